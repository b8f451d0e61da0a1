package engine

import (
	"runtime"
	"sync"
)

// workers run the engine's short jobs: runs of streaming commands, and
// what follows their appends (see queue.go). A few goroutines with their
// stacks grown take every job from one list, which never blocks the one
// who adds to it (a store's goroutine among them).
type workers struct {
	mu     sync.Mutex
	cond   *sync.Cond
	jobs   []func()
	closed bool
	wg     sync.WaitGroup
}

// workerCount is how many workers an engine runs.
func workerCount() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

func (w *workers) start(n int) {
	w.cond = sync.NewCond(&w.mu)
	w.wg.Add(n)
	for range n {
		go w.run()
	}
}

func (w *workers) run() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		for len(w.jobs) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.jobs) == 0 {
			w.mu.Unlock()
			return
		}
		job := w.jobs[0]
		w.jobs[0] = nil
		w.jobs = w.jobs[1:]
		w.mu.Unlock()
		job()
	}
}

// add runs job on a worker; once the workers have stopped, on a goroutine
// of its own.
func (w *workers) add(job func()) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		go job()
		return
	}
	w.jobs = append(w.jobs, job)
	w.mu.Unlock()
	w.cond.Signal()
}

// stop lets the workers finish the jobs they have, and waits for them.
func (w *workers) stop() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
	w.wg.Wait()
}
