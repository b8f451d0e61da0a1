package engine

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// decideHeld decides a command holding the conversation's lock in the
// store (Store.Exclusive): it catches up to the log's head, decides and
// appends while no writer on any node can append, so that it cannot be
// overtaken. Optimistic attempts are cheaper and almost always win; a
// command whose conversation another node writes without pause (a runner
// streaming there at full speed) would otherwise find the log moved on at
// every attempt and be refused as busy. c.mu must be held.
func (e *Engine) decideHeld(ctx context.Context, c *conversation, id string, build func(conv.State) (conv.Command, error), respond func(conv.Decision) (*store.Idempotency, error)) (conv.Decision, conv.State, error) {
	var d conv.Decision
	var next conv.State
	var refused error
	written := false
	err := e.store.Exclusive(ctx, id, func(write func(store.AppendParams) error) error {
		if _, err := e.catchUp(ctx, c, id); err != nil {
			return err
		}
		cmd, err := build(c.state)
		if err == nil {
			err = conv.Authorize(c.state, cmd)
		}
		if err == nil {
			d, err = conv.Decide(c.state, cmd, e.env())
		}
		if err != nil || d.Replay != nil || (len(d.Events) == 0 && d.Task == nil) {
			refused = err // on the head's state: final
			return nil
		}
		next = conv.Evolve(c.state, d.Events...)
		if err := e.append(ctx, c, write, c.state, next, d, respond); err != nil {
			return err
		}
		written = true
		return nil
	})
	if err != nil {
		switch parley.ErrorCode(err) {
		case parley.EINTERNAL:
			e.resync(c, id)
		case parley.ENOTFOUND:
			if !c.dropped {
				err = e.drop(c, id) // deleted on another node
			}
		}
		return conv.Decision{}, c.state, err
	}
	if !written {
		return d, c.state, refused
	}
	e.applied(c, id, next, d)
	return d, next, nil
}
