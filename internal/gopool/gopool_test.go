package gopool

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestGoReusesGoroutines: tasks run one after another run on the
// goroutine that ran the one before (it waits for the next), tasks that
// block do not hold others back (each that finds no goroutine waiting gets
// one of its own), no more than maxIdle goroutines wait after a burst, and
// once there are no tasks the goroutines end.
func TestGoReusesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()

	// One after another: one goroutine runs them all.
	ids := map[uint64]bool{}
	for range 100 {
		done := make(chan uint64)
		Go(func() { done <- goid() })
		ids[<-done] = true
		// Let the goroutine reach its wait for the next task.
		for deadline := time.Now().Add(5 * time.Second); idle.Load() == 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
	}
	// (A task handed over just as the goroutine counted itself idle, before
	// it waits, starts another: rarely, so a few are let be.)
	if len(ids) > 5 {
		t.Errorf("100 tasks one after another ran on %d goroutines, want 1", len(ids))
	}

	// Blocked tasks: each gets a goroutine, and none waits for another.
	const blocked = 50
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(blocked)
	finished.Add(blocked)
	for range blocked {
		Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // all run at once, or this would hang
	close(release)
	finished.Wait()
	// No more than maxIdle of them wait for the next task, while the
	// others end.
	for runtime.NumGoroutine() > before+maxIdle {
		if n := idle.Load(); n > maxIdle {
			t.Fatalf("%d goroutines wait for a task after a burst of %d, want at most %d", n, blocked, maxIdle)
		}
		time.Sleep(time.Millisecond)
	}

	// Idle: the goroutines end.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines more than before the tasks, %s after the last one", n-before, 10*time.Second)
	}
}

// goid returns the running goroutine's id, from its stack's header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	// "goroutine 123 [running]:"
	var id uint64
	for _, c := range b[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
