package conv_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// tracker reads the stored log event by event and checks the turn rules on
// it, independently of State: seqs are dense from 1; only messages and traces
// open turns, one at a time, each the last turn plus one; every message and
// trace of a turn T > 0 is written by T's owner or a delegate of T; a turn
// keeps its turnId; message turns never decrease; a closed turn stays closed
// (the only event it may still get is the finalize of a message that was
// streaming when it closed, which closes nothing); nothing follows the close
// of the conversation. It also works out who the guidance should name.
type tracker struct {
	conv      parley.Conversation
	seq       int64
	lastTurn  int
	open      int // the open turn, 0 if none
	owner     map[int]string
	turnID    map[int]string
	delegates map[int][]string
	msgTurn   int // the highest turn of a message so far
	closed    bool
	lastOwner string // owner of the last closed turn
	next      string // named by the closing message, until a turn opens
	claim     *parley.Claim
}

func newTracker(c parley.Conversation) tracker {
	return tracker{conv: c, owner: map[int]string{}, turnID: map[int]string{}, delegates: map[int][]string{}}
}

// turnEvents are the event types that belong to a turn when Turn > 0.
var turnEvents = map[string]bool{
	parley.EventMessage: true, parley.EventTrace: true, parley.EventChunk: true, parley.EventPartUpdated: true, parley.EventMessageUpdated: true,
	parley.EventTurnReset: true, parley.EventDelegation: true, parley.EventTurnAborted: true,
}

func (tr *tracker) feed(t *testing.T, e parley.Event) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("log event %d (%s turn %d by %s): "+format, append([]any{e.Seq, e.Type, e.Turn, e.AgentID}, args...)...)
	}
	if e.Seq != tr.seq+1 {
		fail("seq follows %d", tr.seq)
	}
	tr.seq = e.Seq
	if (e.Seq == 1) != (e.Type == parley.EventConversationCreated) {
		fail("conversation.created is seq 1 and only seq 1")
	}
	if tr.closed {
		fail("written after the conversation closed")
	}
	if !e.Finality.Valid() {
		fail("finality %q", e.Finality)
	}
	if e.Finality != parley.FinalityNone && e.Type != parley.EventMessage && e.Type != parley.EventMessageUpdated && e.Type != parley.EventTurnAborted {
		fail("only messages (and the abort tombstone) close; this has finality %s", e.Finality)
	}
	if e.Type == parley.EventTurnAborted && e.Finality != parley.FinalityTurn {
		fail("turn.aborted has finality %s, want turn", e.Finality)
	}
	var m parley.Message
	if e.Type == parley.EventMessage || e.Type == parley.EventMessageUpdated {
		if err := json.Unmarshal(e.Data, &m); err != nil {
			fail("data: %v", err)
		}
		if m.Turn != e.Turn || m.TurnID != e.TurnID || m.AgentID != e.AgentID || m.Finality != e.Finality || m.ConversationID != e.ConversationID {
			fail("message %+v disagrees with its event", m)
		}
		if e.Type == parley.EventMessage && m.Seq != e.Seq {
			fail("message seq %d", m.Seq)
		}
		if (m.Role == parley.RoleSystem) != (e.Turn == 0) {
			fail("a %s message in turn %d: system messages and only they are in turn 0", m.Role, e.Turn)
		}
	}
	switch {
	case e.Type == parley.EventTurnClaimed:
		var c parley.Claim
		_ = json.Unmarshal(e.Data, &c)
		if tr.open != 0 || c.Turn != tr.lastTurn+1 || e.Turn != c.Turn || c.AgentID != e.AgentID {
			fail("claim %+v with turn %d open after turn %d", c, tr.open, tr.lastTurn)
		}
		tr.claim = &c
	case e.Type == parley.EventClaimExpired:
		if tr.claim == nil {
			fail("no claim to expire")
		}
		tr.claim = nil
	case turnEvents[e.Type] && e.Turn > 0:
		switch {
		case e.Turn == tr.open:
			if e.Type != parley.EventTurnAborted && e.AgentID != tr.owner[e.Turn] && !slices.Contains(tr.delegates[e.Turn], e.AgentID) {
				fail("turn %d is owned by %s (delegates %v)", e.Turn, tr.owner[e.Turn], tr.delegates[e.Turn])
			}
		case e.Turn > tr.lastTurn:
			if e.Type != parley.EventMessage && e.Type != parley.EventTrace {
				fail("only a message or a trace opens a turn")
			}
			if tr.open != 0 || e.Turn != tr.lastTurn+1 {
				fail("opens turn %d while turn %d is open after turn %d", e.Turn, tr.open, tr.lastTurn)
			}
			tr.open, tr.lastTurn = e.Turn, e.Turn
			tr.owner[e.Turn], tr.turnID[e.Turn] = e.AgentID, e.TurnID
			tr.next = ""
			tr.claim = nil
		default:
			if e.Type != parley.EventMessageUpdated || e.Finality != parley.FinalityNone || m.Status == parley.StatusStreaming {
				fail("written to closed turn %d", e.Turn)
			}
		}
		if e.TurnID != tr.turnID[e.Turn] {
			fail("turnId %q, but turn %d has turnId %q", e.TurnID, e.Turn, tr.turnID[e.Turn])
		}
		if e.Type == parley.EventMessage {
			if e.Turn < tr.msgTurn {
				fail("message turn goes down from %d", tr.msgTurn)
			}
			tr.msgTurn = e.Turn
		}
		if e.Type == parley.EventDelegation {
			var dl parley.Delegation
			_ = json.Unmarshal(e.Data, &dl)
			if dl.Turn != e.Turn || dl.From != e.AgentID || dl.To == tr.owner[e.Turn] || slices.Contains(tr.delegates[e.Turn], dl.To) {
				fail("delegation %+v", dl)
			}
			tr.delegates[e.Turn] = append(tr.delegates[e.Turn], dl.To)
		}
		if e.Type == parley.EventTrace && e.Finality != parley.FinalityNone {
			fail("a trace closes")
		}
		if e.Finality != parley.FinalityNone && e.Turn == tr.open {
			tr.lastOwner, tr.open, tr.claim = tr.owner[e.Turn], 0, nil
			tr.next = ""
			if e.Finality == parley.FinalityTurn {
				tr.next = m.Next
			}
		}
	case turnEvents[e.Type] && e.Type != parley.EventMessage && e.Type != parley.EventMessageUpdated && e.Type != parley.EventChunk && e.Type != parley.EventPartUpdated:
		fail("a turn event in turn 0")
	case e.Turn == 0 && e.Finality == parley.FinalityTurn:
		fail("turn 0 closes a turn")
	}
	if e.Finality == parley.FinalityConversation {
		if tr.open != 0 {
			tr.lastOwner = tr.owner[tr.open]
		}
		tr.closed, tr.open, tr.claim, tr.next = true, 0, nil, ""
	}
}

// guidance is who the tracker says should act next, at now; answerer is
// the agent the prompt queue names (the queue is checked elsewhere).
func (tr *tracker) guidance(now time.Time, answerer string) (agent string, kind parley.GuidanceKind, turn int) {
	if tr.open != 0 {
		return tr.owner[tr.open], parley.GuidanceContinueTurn, tr.open
	}
	switch {
	case tr.claim != nil && now.Before(tr.claim.ExpiresAt.Time):
		agent = tr.claim.AgentID
	case answerer != "":
		agent = answerer
	case tr.next != "":
		agent = tr.next
	case tr.conv.TurnPolicy == parley.PolicyRoundRobin && len(tr.conv.Participants) > 0:
		i := slices.Index(tr.conv.Participants, tr.lastOwner)
		agent = tr.conv.Participants[(i+1)%len(tr.conv.Participants)]
	}
	return agent, parley.GuidanceStartTurn, tr.lastTurn + 1
}

// checkInvariants checks the state against the stored log: folding the whole
// log gives the state (from nothing and from the Create state); the state
// survives JSON; it agrees with the tracker's reading of the log; Head and
// Guidance tell the same story at any time.
func checkInvariants(sc *script) { checkState(sc, true) }

// checkState is checkInvariants; unless full, the log is not folded again
// from its start: the folds kept event by event stand for it (Evolve is a
// left fold, so they are the same value, only cheaper).
func checkState(sc *script, full bool) {
	t := sc.t
	t.Helper()
	s, tr := sc.s, &sc.tr
	want := mustJSON(s)
	if s.LastSeq != int64(len(sc.log)) || tr.seq != s.LastSeq {
		t.Fatalf("state lastSeq %d, log has %d events", s.LastSeq, len(sc.log))
	}
	folds := map[string]conv.State{"nothing, event by event": sc.fold, "the Create state, event by event": sc.foldCreate}
	if full {
		folds["nothing"] = conv.Evolve(conv.State{}, sc.log...)
		folds["the Create state"] = conv.Evolve(sc.start, sc.log[1:]...)
	}
	for name, folded := range folds {
		if got := mustJSON(folded); got != want || mustJSON(folded.Conversation) != mustJSON(s.Conversation) {
			t.Fatalf("folding the log from %s gives another state:\n%s\nwant\n%s", name, got, want)
		}
	}
	var round conv.State
	if err := json.Unmarshal([]byte(want), &round); err != nil || mustJSON(round) != want {
		t.Fatalf("state does not survive JSON (%v):\n%s\n%s", err, mustJSON(round), want)
	}
	round.Conversation = s.Conversation // the store keeps it beside the snapshot
	stored, err := conv.DecodeStored(sc.snapshot, sc.queue)
	stored.Conversation = s.Conversation
	if err != nil || mustJSON(stored) != want {
		t.Fatalf("the state as stored (the queue written only by prompt events) reads back as another state (%v):\n%s\nwant\n%s", err, mustJSON(stored), want)
	}
	queued, limit := 0, sc.env.Limits.MaxQueuedPrompts
	for _, p := range s.Queue {
		queued += len(p.Parts)
	}
	if queued > limit {
		t.Fatalf("the queue holds %d prompts, past its limit of %d", queued, limit)
	}
	for _, at := range []time.Time{sc.now, sc.now.Add(time.Hour), epoch0} {
		if mustJSON(round.Head(at)) != mustJSON(s.Head(at)) || mustJSON(round.Guidance(at)) != mustJSON(s.Guidance(at)) {
			t.Fatal("the state read back from JSON gives another head or guidance")
		}
		checkHead(t, s, tr, at)
	}
	if s.Closed != tr.closed || s.LastTurn != tr.lastTurn {
		t.Fatalf("state closed %v lastTurn %d; the log says %v %d", s.Closed, s.LastTurn, tr.closed, tr.lastTurn)
	}
	if (s.Open == nil) != (tr.open == 0) {
		t.Fatalf("state open turn %+v; the log says turn %d is open", s.Open, tr.open)
	}
	if o := s.Open; o != nil {
		ds := slices.Clone(o.Delegates)
		slices.Sort(ds)
		wantDs := slices.Clone(tr.delegates[o.Turn])
		slices.Sort(wantDs)
		if o.Turn != tr.open || o.Owner != tr.owner[o.Turn] || o.TurnID != tr.turnID[o.Turn] || !slices.Equal(ds, wantDs) {
			t.Fatalf("open turn %+v; the log says turn %d owner %s turnId %q delegates %v", o, tr.open, tr.owner[tr.open], tr.turnID[tr.open], wantDs)
		}
	}
	if s.Closed && (s.Open != nil || s.Claim != nil) {
		t.Fatalf("closed with open turn %+v claim %+v", s.Open, s.Claim)
	}
	checkRebuilds(sc)
	if full {
		checkReplays(sc)
	}
}

// checkReplays checks that the log the rules wrote is one an import takes
// whole: replayed from the Create state with the same limits (conv.Replay),
// every event is held to the bounds and kept as it is, they fold to the
// state, and every message row passes the row checks.
func checkReplays(sc *script) {
	t := sc.t
	t.Helper()
	env := conv.ReplayEnv{Env: conv.Env{Now: sc.now, Limits: sc.env.Limits}, CollectWindow: time.Second}
	r := conv.NewReplay(sc.start, env)
	for _, e := range sc.log[1:] {
		replayed := e
		if err := r.Add(&replayed); err != nil {
			t.Fatalf("log event %d (%s), written by the rules, is refused on import: %v", e.Seq, e.Type, err)
		}
		if string(replayed.Data) != string(e.Data) {
			t.Fatalf("log event %d (%s) is imported as\n%s\nnot as the rules wrote it:\n%s", e.Seq, e.Type, replayed.Data, e.Data)
		}
	}
	if got, want := mustJSON(r.State()), mustJSON(sc.s); got != want {
		t.Fatalf("the replayed log folds to another state:\n%s\nwant\n%s", got, want)
	}
	for _, id := range sc.order {
		if m, ok := sc.msgs[id]; ok {
			if err := r.CheckRow(m); err != nil {
				t.Fatalf("message row %s, written by the rules, is refused on import: %v", id, err)
			}
		}
	}
}

// checkRebuilds checks that every streaming message is what a reader
// rebuilds from what is stored: its row, then the chunk and part.updated
// events after the row's updatedSeq (as the engine does after a restart,
// and clients do with a message read over HTTP); that it is within its
// size limit; and that the state streams exactly those messages.
func checkRebuilds(sc *script) {
	t := sc.t
	t.Helper()
	if len(sc.live) != sc.s.Streams.Len() {
		t.Fatalf("%d messages stream, the state has %d streams", len(sc.live), sc.s.Streams.Len())
	}
	for id, m := range sc.msgs {
		if m.Status != parley.StatusStreaming && m.Content != parley.TextContent(m.Parts) {
			t.Fatalf("message %s has content %q, and its text parts say %q", id, m.Content, parley.TextContent(m.Parts))
		}
	}
	for id, live := range sc.live {
		if _, ok := sc.s.Streams.Get(id); !ok {
			t.Fatalf("message %s streams, the state has no stream of it", id)
		}
		row := sc.msgs[id]
		m := *row
		m.Parts = slices.Clone(row.Parts)
		for _, e := range sc.log[row.UpdatedSeq:] {
			switch e.Type {
			case parley.EventChunk:
				var c parley.Chunk
				if _ = json.Unmarshal(e.Data, &c); c.MessageID == id {
					m.AppendText(c.Content)
				}
			case parley.EventPartUpdated:
				var u parley.PartUpdate
				if _ = json.Unmarshal(e.Data, &u); u.MessageID == id {
					m.ApplyTool(u.Part)
				}
			}
		}
		if got, want := mustJSON(&m), mustJSON(live); got != want {
			t.Fatalf("message %s rebuilt from its row (as of %d) and the log:\n%s\nassembled when written:\n%s", id, row.UpdatedSeq, got, want)
		}
		if m.Size() > sc.env.Limits.MaxMessageBytes || len(m.Content) > sc.env.Limits.MaxTextBytes {
			t.Fatalf("message %s is %d bytes, %d of text; the limits are %d and %d", id, m.Size(), len(m.Content), sc.env.Limits.MaxMessageBytes, sc.env.Limits.MaxTextBytes)
		}
	}
	if n := sc.s.Streams.Len(); n > sc.env.Limits.MaxStreaming {
		t.Fatalf("%d messages stream; the limit is %d", n, sc.env.Limits.MaxStreaming)
	}
}

func checkHead(t *testing.T, s conv.State, tr *tracker, at time.Time) {
	t.Helper()
	h := s.Head(at)
	if h.LastSeq != s.LastSeq || h.LastTurn != s.LastTurn || h.Closed != s.Closed || h.Epoch != s.Conversation.Epoch || (h.OpenTurn == nil) != (s.Open == nil) {
		t.Fatalf("head %+v of state %s", h, mustJSON(s))
	}
	if h.Claim != nil && (!at.Before(h.Claim.ExpiresAt.Time) || h.Claim.Turn != s.LastTurn+1) {
		t.Fatalf("head at %v shows claim %+v", at, h.Claim)
	}
	g := s.Guidance(at)
	if s.Closed {
		if g != nil {
			t.Fatalf("guidance %+v after the conversation closed", g)
		}
		return
	}
	if g == nil {
		t.Fatal("no guidance in an open conversation")
	}
	agent, kind, turn := tr.guidance(at, s.Answerer(nil))
	if g.Turn < 1 || g.AfterSeq != s.LastSeq || g.NextAgentID != agent || g.Kind != kind || g.Turn != turn {
		t.Fatalf("guidance at %v = %+v, the log says %q %s turn %d after seq %d", at, g, agent, kind, turn, s.LastSeq)
	}
}
