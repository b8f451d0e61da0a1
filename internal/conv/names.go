package conv

import (
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// Names. Every message and every prompt of a conversation has an id, and
// clients may choose them. An id, once it names something in a
// conversation, names that one thing for good: no later write takes it,
// whoever writes, even once the message was reverted or the prompt
// withdrawn. Without this a prompt queued under another's message id would
// be written, when dispatched, over that message, and a message's events,
// which may be stored as references to its row, would then say what the
// other wrote.
//
// The store keeps the names taken (one row per id, written with the
// events that take it: store.AppendParams.Names) and refuses a second
// taker; the rules refuse it first, knowing from Lookups.IDTaken whether
// the id is taken.

// Names returns the ids the events take in a conversation whose state
// before them is s: the id of each message written (but for the message a
// dispatched prompt becomes, which is the prompt's own) and of each prompt
// queued (one merged into a collect prompt included). The same function
// serves live writes and imports, so that both take the same names.
func Names(s State, events []parley.Event) []string {
	var names []string
	var queued []string // the prompts in the queue, once a prompt event is met
	tracking := false
	for i := range events {
		e := &events[i]
		switch {
		case e.Type == parley.EventMessage:
			id := readHead(e.Data).ID
			if id == "" {
				continue
			}
			if !tracking && !slices.ContainsFunc(s.Queue, func(p parley.QueuedPrompt) bool { return p.ID == id }) ||
				tracking && !slices.Contains(queued, id) {
				names = append(names, id)
			}
		case e.Type == parley.EventPartUpdated:
			// An input request takes its id (under a name no message or
			// prompt id can have: see InputName).
			if id := openedInput(e); id != "" {
				names = append(names, InputName(id))
			}
		case queueEvents[e.Type]:
			if !tracking {
				tracking = true
				for _, p := range s.Queue {
					queued = append(queued, p.ID)
				}
			}
			var p promptEvent
			if json.Unmarshal(e.Data, &p) != nil || p.ID == "" {
				continue
			}
			switch e.Type {
			case parley.EventPromptQueued:
				names = append(names, p.ID)
				if p.Into == "" {
					queued = append(queued, p.ID)
				}
			case parley.EventPromptCompleted, parley.EventPromptCanceled:
				queued = slices.DeleteFunc(queued, func(id string) bool { return id == p.ID })
			}
		}
	}
	return names
}

// taken refuses an id that names a message or prompt of the conversation
// already (known says whether the store has it), or a prompt in the queue.
func (d *decider) taken(what, id string, known bool) error {
	if known || slices.ContainsFunc(d.s.Queue, func(p parley.QueuedPrompt) bool { return p.ID == id }) {
		return parley.Errorf(parley.EBUSY, "id %q already names a message or prompt of this conversation (ids are never reused, even once removed); give the %s another id", id, what).
			With("id", id).WithHead(d.base.Head(d.env.Now))
	}
	return nil
}
