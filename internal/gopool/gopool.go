// Package gopool runs short tasks on goroutines that have run others
// before. A goroutine starts with a small stack and grows it by copying as
// its calls go deeper: a task that reads a frame, decides it and hands it
// to the store goes deep, and a goroutine started for each such task
// copies its stack several times over (5% of the server's time at 100
// streaming conversations). A goroutine that is done with a task waits a
// moment for the next one, its grown stack with it, and ends if none comes
// (or if maxIdle others wait already). A new goroutine grows its stack
// before its first task, while the stack is shallow and cheap to copy:
// the goroutines of a burst are new, and grown deep in a task each paid
// for copies of a deep stack (8-11% of the server's time at a thousand
// streaming conversations, 2.6-3.6% with this).
//
// Go never waits: a task goes to a goroutine that is waiting for one, or a
// new goroutine is started for it. So tasks may block (on a lock, on the
// disk) without holding others back, and no goroutine is kept while there
// is nothing to do. (Pool libraries bound their goroutines and make a task
// wait or fail when all are busy, which a task that waits on another would
// turn into a deadlock; this is the one thing needed here, in a few lines.)
package gopool

import (
	"sync/atomic"
	"time"
)

const (
	// linger is how long a goroutine waits for its next task before it ends.
	linger = time.Second
	// maxIdle bounds the goroutines that wait: a burst of tasks (an epoll
	// wait reports up to 256 sockets at once) starts as many goroutines,
	// and keeping them all would keep their stacks.
	maxIdle = 16
)

// waiting hands a task to a goroutine that waits for one: a send succeeds
// only if one is receiving.
var waiting = make(chan func())

// idle counts the goroutines waiting for a task: at most maxIdle.
var idle atomic.Int32

// Go runs task on a goroutine that waits for one, or on a new one.
func Go(task func()) {
	select {
	case waiting <- task:
	default:
		go run(task)
	}
}

// takeIdle counts one more goroutine waiting for a task, unless maxIdle
// wait already: a check and an add apart would let goroutines that finish
// together all pass the check.
func takeIdle() bool {
	for {
		n := idle.Load()
		if n >= maxIdle {
			return false
		}
		if idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// run runs task, and the tasks handed to it after, until none comes for
// linger.
func run(task func()) {
	grow()
	t := time.NewTimer(linger)
	defer t.Stop()
	for {
		task()
		if !takeIdle() {
			return
		}
		t.Reset(linger)
		select {
		case task = <-waiting:
			idle.Add(-1)
		case <-t.C:
			idle.Add(-1)
			return
		}
	}
}

// growTo is how deep a new goroutine's stack is made before its first
// task: the runtime gives it a 16 KB stack, which a runner's frame on its
// way to the store fits in (28 KB, a 32 KB stack, cost more than it
// saved).
const growTo = 12 << 10

// sink is read by grow, so that its frame is not optimized away.
var sink atomic.Int32

// grow makes the calling goroutine's stack hold growTo bytes of frames.
//
//go:noinline
func grow() byte {
	var b [growTo]byte
	return b[sink.Load()%growTo]
}
