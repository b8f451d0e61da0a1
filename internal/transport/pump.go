package transport

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/gopool"
)

// streamPump moves items from a follower to a transport: it writes every
// item waiting, then flushes once, so that busy streams send several
// events per flush, and pings after a heartbeat of silence. It runs on a
// goroutine only while there is something to do (items arrived or the
// follower ended, the stream's context ended, a heartbeat is due) and then
// lets the goroutine go (to the pool of package gopool, which keeps it a
// moment for other work), so that an idle stream holds none. Once the
// stream ends, finish is called once, on the pump's goroutine, with why:
// ErrClientGone when the client left or stopped reading, else the
// server's reason (the subscriber was too slow, the server shuts down,
// the token was revoked).
type streamPump struct {
	ctx    context.Context
	f      *engine.Follower
	write  func(feed.Item) error
	flush  func() error
	ping   func() error
	finish func(end error)
	every  time.Duration // the heartbeat

	beat    *time.Timer
	stopCtx func() bool
	// quietSince is when the pump last wrote or pinged; only the running
	// goroutine uses it.
	quietSince time.Time

	mu      sync.Mutex
	running bool // a goroutine runs the pump (for good once it has ended)
	again   bool // kicked since the goroutine last looked
	due     bool // the heartbeat timer fired
}

// pump starts pumping f's items to a transport (see streamPump) and
// returns at once.
func (t *Streams) pump(ctx context.Context, f *engine.Follower, write func(feed.Item) error, flush, ping func() error, finish func(end error)) {
	// It starts as running: a kick before the first run only asks it to
	// look again.
	p := &streamPump{ctx: ctx, f: f, write: write, flush: flush, ping: ping, finish: finish, every: t.opts.Heartbeat, quietSince: time.Now(), running: true}
	p.beat = time.AfterFunc(p.every, p.heartbeat)
	p.stopCtx = context.AfterFunc(ctx, p.kick)
	f.Notify(p.kick)
	gopool.Go(p.run) // what was queued before Notify, and the log's history
}

// kick has the pump look for work: it has a goroutine run it unless one does,
// which then looks again before it lets go. It takes only p.mu (it is
// called under the subscription's lock).
func (p *streamPump) kick() {
	p.mu.Lock()
	start := !p.running
	p.running, p.again = true, true
	p.mu.Unlock()
	if start {
		gopool.Go(p.run)
	}
}

func (p *streamPump) heartbeat() {
	p.mu.Lock()
	p.due = true
	p.mu.Unlock()
	p.kick()
}

// run does what there is to do, until there is nothing, or the stream ends.
func (p *streamPump) run() {
	for {
		p.mu.Lock()
		due := p.due
		p.again, p.due = false, false
		p.mu.Unlock()
		if end, over := p.step(due); over {
			p.f.Notify(nil)
			p.beat.Stop()
			p.stopCtx()
			p.finish(end)
			return // running stays set: nothing starts it again
		}
		p.mu.Lock()
		if !p.again {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// step writes what is waiting and flushes it, or pings if the heartbeat is
// due and the stream was silent for one. It reports whether the stream
// ended, and why.
func (p *streamPump) step(due bool) (end error, over bool) {
	wrote := false
	for {
		// An item waiting may have been published after the server ended
		// the stream (a delegate's turn closed before the next write): the
		// context is looked at before each item is written.
		if p.ctx.Err() != nil {
			end = CutOff(p.ctx, ErrClientGone)
			if wrote && !errors.Is(end, ErrClientGone) {
				_ = p.flush() // what came before it, then the error frame
			}
			return end, true
		}
		it, err := p.f.Next(p.ctx, 0)
		if errors.Is(err, feed.ErrIdle) {
			break
		}
		if err != nil {
			if wrote {
				_ = p.flush()
			}
			return CutOff(p.ctx, streamEnd(p.ctx, err)), true
		}
		if p.write(it) != nil {
			return ErrClientGone, true
		}
		wrote = true
	}
	now := time.Now()
	quiet := now.Sub(p.quietSince)
	switch {
	case wrote:
		if p.flush() != nil {
			return ErrClientGone, true
		}
		p.quietSince, quiet = now, 0
	case due && quiet >= p.every:
		if p.ping() != nil || p.flush() != nil {
			return ErrClientGone, true
		}
		p.quietSince, quiet = now, 0
	}
	if due { // the timer is spent: set it for when a heartbeat of silence ends
		p.beat.Reset(p.every - quiet)
	}
	return nil, false
}
