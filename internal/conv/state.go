// Package conv holds the rules of a conversation as pure functions: Decide
// turns (state, command, environment) into events or a typed error, and Evolve
// folds events into state. Nothing here does I/O or reads a clock; the engine
// passes the time and the results of any look-ups in.
package conv

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/flatjson"
)

// State is everything the rules need to know about one conversation. It is
// small (it never holds the messages) and is stored beside the log as two
// JSON documents, the snapshot and the queue (EncodeStored); folding the log
// with Evolve must always give the same value.
type State struct {
	// Conversation is not part of the stored snapshot (the store keeps it
	// beside it, rewritten with each conversation.updated); the engine
	// sets it on load.
	Conversation parley.Conversation `json:"-"`
	LastSeq      int64               `json:"lastSeq"`
	// LastAt is the time of the last event.
	LastAt   parley.Time      `json:"lastAt"`
	LastTurn int              `json:"lastTurn"`
	Open     *parley.OpenTurn `json:"open,omitempty"`
	// OpenActiveAt is when the open turn was last written to (opened,
	// continued, reset or delegated into): its lease counts from it.
	OpenActiveAt  parley.Time   `json:"openActiveAt,omitzero"`
	Claim         *parley.Claim `json:"claim,omitempty"`
	Closed        bool          `json:"closed,omitempty"`
	LastClosedSeq int64         `json:"lastClosedSeq,omitempty"`
	// LastOwner owned the most recently closed turn (round-robin starts after it).
	LastOwner string `json:"lastOwner,omitempty"`
	// Next is the agent the most recent closing message named, until a turn opens.
	Next string `json:"next,omitempty"`
	// LastTurnID is the turnId of the most recently opened turn.
	LastTurnID string `json:"lastTurnId,omitempty"`
	// LastAbort remembers the last abort, so that repeating it writes nothing.
	LastAbort *AbortMark `json:"lastAbort,omitempty"`
	// Streams are the messages still streaming, by id.
	Streams Streams `json:"streams,omitzero"`
	// Texts are the texts agents stream in a v1 conversation that no
	// message holds yet, by agent (see StreamV1).
	Texts map[string]PendingText `json:"texts,omitempty"`
	// Queue holds the prompts waiting or dispatched, in order.
	Queue []parley.QueuedPrompt `json:"queue,omitempty"`
	// Ended are the last prompts that ended, newest last (at most
	// MaxEndedPrompts): what PromptStatus says of a prompt no longer queued.
	Ended []EndedPrompt `json:"ended,omitempty"`
	// Inputs are the input requests open, or ended and not yet
	// acknowledged by the runner that asked, by request id.
	Inputs map[string]InputState `json:"inputs,omitempty"`
	// InputsEnded are the last input requests that left Inputs, newest
	// last (at most maxInputsEnded).
	InputsEnded []EndedInput `json:"inputsEnded,omitempty"`
}

// AbortMark records who aborted which turn at which seq.
type AbortMark struct {
	AgentID string `json:"agentId"`
	Turn    int    `json:"turn"`
	Seq     int64  `json:"seq"`
}

// Evolve returns the state after the events, which must follow s in seq order.
// It never fails: events were validated by Decide before they were stored.
func Evolve(s State, events ...parley.Event) State {
	for _, e := range events {
		s = apply(s, e)
	}
	return s
}

func apply(s State, e parley.Event) State {
	s.LastSeq, s.LastAt = e.Seq, e.Time
	var head messageHead // of a message or message.updated event
	switch e.Type {
	case parley.EventConversationCreated:
		// Into a new value: decoding into s.Conversation would reuse the
		// backing array of its Participants, which the caller may share.
		var c parley.Conversation
		_ = json.Unmarshal(e.Data, &c)
		s.Conversation = c
	case parley.EventConversationUpdated:
		s = applyUpdate(s, e)
	case parley.EventMessage, parley.EventTrace, parley.EventChunk, parley.EventPartUpdated, parley.EventMessageUpdated:
		if e.Type == parley.EventMessage || e.Type == parley.EventMessageUpdated {
			head = readHead(e.Data) // once: it is the costly part of Evolve
		}
		s = applyStream(s, e, head)
		s = noteInput(s, e, head)
		if e.Turn > 0 {
			s = enterTurn(s, e)
		}
		switch e.Finality {
		case parley.FinalityTurn:
			s = closeTurn(s, e, head.Next)
		case parley.FinalityConversation:
			if s.Open != nil {
				s = closeTurn(s, e, "")
			}
			s.Closed = true
			s.Claim = nil
			s.LastClosedSeq = e.Seq
		}
	case parley.EventTurnClaimed:
		var c parley.Claim
		_ = json.Unmarshal(e.Data, &c)
		s.Claim = &c
	case parley.EventClaimExpired:
		s.Claim = nil
	case parley.EventTurnReset:
		if s.Open != nil {
			open := *s.Open
			open.Reset = true
			s.Open = &open
			s.OpenActiveAt = e.Time
		}
	case parley.EventTurnAborted:
		if s.Open != nil {
			s = closeTurn(s, e, "")
		}
		s.LastAbort = &AbortMark{AgentID: e.AgentID, Turn: e.Turn, Seq: e.Seq}
	case parley.EventMessagesRemoved:
		s = applyStream(s, e, messageHead{})
		if len(s.Inputs) > 0 {
			var r parley.MessagesRemoved
			_ = json.Unmarshal(e.Data, &r)
			s = dropInputs(s, r.MessageIDs...)
		}
	case parley.EventInputAnswered, parley.EventInputAcked:
		s = applyInput(s, e)
	case parley.EventDelegation:
		var d parley.Delegation
		_ = json.Unmarshal(e.Data, &d)
		if s.Open != nil && !slices.Contains(s.Open.Delegates, d.To) {
			open := *s.Open
			open.Delegates = append(slices.Clone(open.Delegates), d.To)
			s.Open = &open
			s.OpenActiveAt = e.Time
		}
	default:
		if queueEvents[e.Type] {
			s = applyPrompt(s, e) // the only events that change the queue
		}
	}
	if len(s.Texts) > 0 {
		s = endTexts(s, e, head)
	}
	return s
}

// enterTurn opens turn e.Turn if it is not the open one, or notes that the
// open turn was written to (which ends a reset). A turn that has closed is
// never opened again: the only events of a closed turn that Decide writes are
// those that finalize a message still streaming when its turn closed.
func enterTurn(s State, e parley.Event) State {
	if s.Open != nil && s.Open.Turn == e.Turn {
		s.OpenActiveAt = e.Time
		if s.Open.Reset {
			open := *s.Open
			open.Reset = false
			s.Open = &open
		}
		return s
	}
	if e.Turn <= s.LastTurn {
		return s
	}
	s.Open = &parley.OpenTurn{Turn: e.Turn, Owner: e.AgentID, TurnID: e.TurnID, OpenedSeq: e.Seq}
	s.OpenActiveAt = e.Time
	s.LastTurn = e.Turn
	s.LastTurnID = e.TurnID
	s.Next = ""
	s.LastAbort = nil
	if s.Claim != nil && s.Claim.Turn <= e.Turn {
		s.Claim = nil
	}
	return s
}

func closeTurn(s State, e parley.Event, next string) State {
	if s.Open != nil {
		s.LastOwner = s.Open.Owner
	}
	s.Open = nil
	s.OpenActiveAt = parley.Time{}
	s.Claim = nil
	s.Next = next
	s.LastClosedSeq = e.Seq
	return s
}

// messageHead is what Evolve reads of a message or message.updated event:
// the message's id and status (for Streams), the next agent it names, and
// its writer and finality (for Texts).
type messageHead struct {
	ID       string               `json:"id"`
	Status   parley.MessageStatus `json:"status"`
	Next     string               `json:"next"`
	AgentID  string               `json:"agentId"`
	Finality parley.Finality      `json:"finality"`
}

// readHead reads the head of a message from its JSON: picked out of the
// object's string fields, skipping its parts unread (a streamed answer's
// row is kilobytes), or, for JSON that is not as the server writes it,
// decoded.
func readHead(data []byte) messageHead {
	var h messageHead
	fields := [...]struct {
		key string
		to  *string
	}{{"id", &h.ID}, {"status", (*string)(&h.Status)}, {"next", &h.Next}, {"agentId", &h.AgentID}, {"finality", (*string)(&h.Finality)}}
	ok := flatjson.StringsOf(data, func(key, value string, isString bool) bool {
		for _, f := range fields {
			switch {
			case key == f.key && isString:
				*f.to = strings.Clone(value) // not the whole message's bytes
				return true
			case strings.EqualFold(key, f.key):
				// A null or another kind of value, or the key in another
				// case (encoding/json matches keys regardless of case): as
				// encoding/json reads it.
				return false
			}
		}
		return true
	})
	if !ok {
		h = messageHead{}
		_ = json.Unmarshal(data, &h)
	}
	return h
}

// activeClaim returns the claim if it has not expired at now.
func (s State) activeClaim(now time.Time) *parley.Claim {
	if s.Claim == nil || !now.Before(s.Claim.ExpiresAt.Time) {
		return nil
	}
	return s.Claim
}

// Head returns the head of the conversation as seen at now: an expired claim
// is not shown even before its claim.expired event is written.
func (s State) Head(now time.Time) parley.Head {
	h := parley.Head{
		LastSeq:       s.LastSeq,
		Epoch:         s.Conversation.Epoch,
		LastTurn:      s.LastTurn,
		Closed:        s.Closed,
		LastClosedSeq: s.LastClosedSeq,
		LastEventAt:   s.LastAt,
		PendingInputs: s.Pending(),
	}
	if s.Open != nil {
		open := *s.Open
		open.Delegates = slices.Clone(open.Delegates)
		h.OpenTurn = &open
	}
	if c := s.activeClaim(now); c != nil {
		claim := *c
		h.Claim = &claim
	}
	return h
}

// Guidance derives who should act next, or nil once the conversation is
// closed, knowing of no attached runner (GuidanceFor knows them).
func (s State) Guidance(now time.Time) *parley.Guidance { return s.GuidanceFor(now, nil) }

// GuidanceFor derives who should act next, or nil once the conversation is
// closed; runners are the agents with a runner attached, sorted. An open
// turn is continued by its owner. Otherwise the next turn goes to the holder
// of an active claim; else to the agent the prompt queue says answers next,
// as the dispatcher will hand it out; else to the agent the closing message
// named; else to whom the turn policy names (empty: anyone).
func (s State) GuidanceFor(now time.Time, runners []string) *parley.Guidance {
	if s.Closed {
		return nil
	}
	if s.Open != nil {
		return &parley.Guidance{NextAgentID: s.Open.Owner, Kind: parley.GuidanceContinueTurn, Turn: s.Open.Turn, AfterSeq: s.LastSeq}
	}
	g := &parley.Guidance{Kind: parley.GuidanceStartTurn, Turn: s.LastTurn + 1, AfterSeq: s.LastSeq}
	switch c := s.activeClaim(now); {
	case c != nil && c.Turn == g.Turn:
		g.NextAgentID = c.AgentID
	case s.Answerer(runners) != "":
		g.NextAgentID = s.Answerer(runners)
	case s.Next != "":
		g.NextAgentID = s.Next
	case s.Conversation.TurnPolicy == parley.PolicyRoundRobin || s.Conversation.TurnPolicy == "":
		g.NextAgentID = roundRobin(s.Conversation.Participants, s.LastOwner)
	}
	return g
}

// Answerer is the agent the prompt queue has act next: the runner answering
// the prompt dispatched, else the runner the dispatcher will hand the next
// prompt to (the first of runners, sorted, that a waiting prompt may go
// to), else the agent a waiting prompt is addressed to; "" if none.
func (s State) Answerer(runners []string) string {
	if a := s.Active(); a != nil {
		return a.Runner
	}
	for _, r := range runners {
		for _, p := range s.Queue {
			if p.To == "" || p.To == r {
				return r
			}
		}
	}
	for _, p := range s.Queue {
		if p.To != "" {
			return p.To
		}
	}
	return ""
}

// roundRobin names the participant after last, the first one if last is not a
// participant, and nobody if there are no participants.
func roundRobin(participants []string, last string) string {
	if len(participants) == 0 {
		return ""
	}
	i := slices.Index(participants, last)
	return participants[(i+1)%len(participants)]
}
