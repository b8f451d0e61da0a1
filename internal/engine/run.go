package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// A run is what the group commit of queue.go decides as one append: the
// streaming commands queued behind an append being written, each decided
// on the state the ones before it leave, consecutive text deltas of one
// message as one chunk event.

// run is a run of streaming commands decided together.
type run struct {
	// next is the state after the run. The one before it is the
	// conversation's, which stays as it is until the run is durable.
	next conv.State
	d    conv.Decision // what they all write: events, message rows, deliveries
	// streams holds the assemblies of the messages the run changed, as of
	// next, one per message: the conversation's own (as of its state) are
	// left alone until the run is durable, for readers. A run nearly always
	// changes one message, so a list, not a map.
	streams []*parley.Message
	// results holds the outcome of each command of order.
	results []runResult
	order   []*pending
	// stale is set when a row read was newer than the state (another node
	// wrote): the run must be decided again.
	stale error
}

// runResult is what one command of a run came to: only what its Ack
// tells, not the events nor the state.
type runResult struct {
	res   conv.Result
	err   error
	wrote bool // its decision has events in the run's append
	// message is the id of the message its decision wrote, whose
	// assembly as the run left it (r.streams) is its outcome's message.
	message string
}

// answer sends each command its outcome: those whose decision writes the
// run's err, if not nil, else their own.
func (r *run) answer(err error) {
	for i, p := range r.order {
		o := r.results[i]
		if err != nil && o.err == nil && o.wrote {
			o = runResult{err: err}
		}
		id := o.message
		if m := o.res.Message; m != nil {
			id = m.ID // a message the command left as it was
		}
		if id != "" {
			if last := r.stream(id); last != nil {
				o.res.Message = last // as the run left it (see decideRun)
			}
		}
		p.settle(o.res, o.err)
	}
}

// stream returns the run's assembly of message id, or nil if the run did
// not change it.
func (r *run) stream(id string) *parley.Message {
	for _, m := range r.streams {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// setStream makes m the run's assembly of its message.
func (r *run) setStream(m *parley.Message) {
	for i, old := range r.streams {
		if old.ID == m.ID {
			r.streams[i] = m
			return
		}
	}
	r.streams = append(r.streams, m)
}

// decideRun decides the commands of a run on c's state, each on what the
// ones before it leave. c.mu must be held.
func (cq *commandQueue) decideRun(ctx context.Context, c *conversation, id string, ps []*pending) *run {
	r := &run{next: c.state, results: make([]runResult, len(ps)), order: ps}
	env := cq.e.env()
	for i := 0; i < len(ps); {
		p := ps[i]
		j := i + 1
		cmd := p.stream
		var delta string
		if cmd.text != nil {
			// Join the text deltas of this message that follow (a delta
			// alone is its own text, copied nowhere).
			delta = cmd.text.Delta
			n := len(delta)
			for j < len(ps) && ps[j].stream.text != nil && ps[j].stream.messageID == cmd.messageID && ps[j].stream.text.Actor == cmd.text.Actor {
				n += len(ps[j].stream.text.Delta)
				j++
			}
			if j > i+1 {
				var b strings.Builder
				b.Grow(n)
				for _, q := range ps[i:j] {
					b.WriteString(q.stream.text.Delta)
				}
				delta = b.String()
			}
		}
		d, err := cq.decideStream(ctx, r, &c.state, id, cmd, delta, env)
		if err != nil && j > i+1 && parley.ErrorCode(err) == parley.ETOOLARGE {
			j = i + 1 // joined, the text is too large: decide the first alone, the rest after it
			d, err = cq.decideStream(ctx, r, &c.state, id, cmd, cmd.text.Delta, env)
		}
		if errors.Is(err, errStale) {
			r.stale = err
			return r
		}
		if err == nil && len(d.Events) > 0 {
			r.next = conv.Evolve(r.next, d.Events...)
			r.d.Events = append(r.d.Events, d.Events...)
			r.d.Deliveries = append(r.d.Deliveries, d.Deliveries...)
			for _, m := range d.Messages { // a later row of a message replaces an earlier
				if at := slices.IndexFunc(r.d.Messages, func(o *parley.Message) bool { return o.ID == m.ID }); at >= 0 {
					r.d.Messages[at] = m
				} else {
					r.d.Messages = append(r.d.Messages, m)
				}
			}
			if m := d.Result.Message; m != nil {
				r.setStream(m) // the next command's assembly
			}
			r.d.Result = d.Result
		}
		// A command's outcome keeps none of its message but its id: each
		// decision makes the message anew, and a run holds none but the
		// last of each (r.streams) until it is answered, with that one.
		wrote := err == nil && len(d.Events) > 0
		var message string
		if m := d.Result.Message; m != nil && wrote {
			message, d.Result.Message = m.ID, nil
		} else if m != nil { // nothing written: its head, as the run may not change it
			head := *m
			head.Parts, head.Content = nil, ""
			d.Result.Message = &head
		}
		for k := i; k < j; k++ {
			r.results[k] = runResult{res: d.Result, err: err, wrote: wrote, message: message}
		}
		i = j
	}
	return r
}

// decideStream decides one streaming command (a text delta with text
// delta, if joined) on the run's state; start is the conversation's, as the
// run found it. The conversation's lock must be held.
func (cq *commandQueue) decideStream(ctx context.Context, r *run, start *conv.State, id string, cmd *streamCmd, delta string, env conv.Env) (conv.Decision, error) {
	s := r.next
	m := r.stream(cmd.messageID)
	if m == nil {
		// Not changed by the run yet: as the conversation holds it, which
		// is as of the state the run started from.
		var err error
		if m, err = cq.e.assembled(ctx, id, cmd.messageID, *start); err != nil {
			return conv.Decision{}, err
		}
	}
	var command conv.Command
	if cmd.text != nil {
		t := *cmd.text
		t.Delta, t.Known = delta, conv.StreamLookups{Message: m}
		command = t
	} else {
		command = cmd.with(conv.StreamLookups{Message: m})
	}
	if err := conv.Authorize(s, command); err != nil {
		return conv.Decision{}, err
	}
	return conv.Decide(s, command, env)
}
