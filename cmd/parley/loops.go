package main

import (
	"context"
	"sync"
)

// loops are a server's background loops (sweepers, pollers, listeners).
// Each runs in a goroutine of its own, with a context of its own under the
// one it was started with, until it returns or is stopped. Stop stops them
// one at a time, the last started first, and waits for each to return, so
// that a loop never outlives what it uses.
type loops struct {
	mu      sync.Mutex
	started []*loop
}

// loop is one background loop.
type loop struct {
	name string
	stop context.CancelFunc
	done chan struct{}
}

// Go starts run in a goroutine of its own, under ctx.
func (g *loops) Go(ctx context.Context, name string, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	l := &loop{name: name, stop: cancel, done: make(chan struct{})}
	g.mu.Lock()
	g.started = append(g.started, l)
	g.mu.Unlock()
	go func() {
		defer close(l.done)
		run(ctx) // ctx lives on until Stop: what run started may still use it
	}()
}

// Stop stops every loop, the last started first, waiting for each.
func (g *loops) Stop() {
	g.mu.Lock()
	started := g.started
	g.mu.Unlock()
	for i := len(started) - 1; i >= 0; i-- {
		started[i].stop()
		<-started[i].done
	}
}

// Running returns the names of the loops started that have not returned.
func (g *loops) Running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for _, l := range g.started {
		select {
		case <-l.done:
		default:
			names = append(names, l.name)
		}
	}
	return names
}

// Started returns the names of every loop started, in order.
func (g *loops) Started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, len(g.started))
	for i, l := range g.started {
		names[i] = l.name
	}
	return names
}
