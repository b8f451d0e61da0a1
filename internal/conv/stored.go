package conv

import (
	"encoding/json"
	"strings"

	"github.com/parleyhq/parley"
)

// A State is stored as two JSON documents: the snapshot, which is the whole
// state but its prompt queue and is rewritten by every append, and the
// queue, which is rewritten only by the appends whose events change it. So
// a text delta, a tool update or a message costs the same to write however
// many prompts wait.

// queueEvents are the event types that change State.Queue: the prompt.*
// types of parley.EventTypes; no other event does (apply calls applyPrompt
// for these alone).
var queueEvents = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range parley.EventTypes() {
		if strings.HasPrefix(t, "prompt.") {
			m[t] = true
		}
	}
	return m
}()

// ChangesQueue reports whether folding the events may change a state's
// prompt queue: whether one of them is a prompt event.
func ChangesQueue(events ...parley.Event) bool {
	for _, e := range events {
		if queueEvents[e.Type] {
			return true
		}
	}
	return false
}

// EncodeStored returns what is stored of s after events were folded into
// it: the snapshot (s without its queue), and the queue, or nil when none
// of the events changes the queue and the stored one stays as it is.
func EncodeStored(s State, events ...parley.Event) (snapshot, queue []byte, err error) {
	if ChangesQueue(events...) {
		q := s.Queue
		if q == nil {
			q = []parley.QueuedPrompt{} // stored as [], never null
		}
		if queue, err = json.Marshal(q); err != nil {
			return nil, nil, err
		}
	}
	s.Queue = nil
	snapshot, err = json.Marshal(s)
	return snapshot, queue, err
}

// DecodeStored returns the state stored as snapshot and queue (the last
// queue EncodeStored returned). A nil queue leaves the snapshot's own,
// which only a snapshot written before the queue was stored apart has. The
// conversation is not part of either: the caller sets it.
func DecodeStored(snapshot, queue []byte) (State, error) {
	var s State
	if err := json.Unmarshal(snapshot, &s); err != nil {
		return s, err
	}
	if queue != nil {
		s.Queue = nil
		if err := json.Unmarshal(queue, &s.Queue); err != nil {
			return s, err
		}
		if len(s.Queue) == 0 {
			s.Queue = nil
		}
	}
	return s, nil
}
