package conv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// script drives the rules as the engine does: it resolves a command's
// look-ups from what was written so far, decides, checks the decision,
// evolves the state and keeps the stored log (every event after a JSON round
// trip, as a store gives it back) and the messages projection.
type script struct {
	t     *testing.T
	s     conv.State
	start conv.State // the state Create returned
	now   time.Time
	env   conv.Env
	log   []parley.Event
	msgs  map[string]*parley.Message // the messages projection, for look-ups
	order []string                   // message ids in the order they were first written
	live  map[string]*parley.Message // streaming messages as assembled so far
	prior map[string]conv.Prior      // idempotency records by agent and clientRequestId
	names map[string]bool            // the ids taken (conv.Names), as the store keeps them
	taken []string                   // the same, in the order they were taken
	ids   int
	tr    tracker
	// fold and foldCreate are the stored log folded event by event, from
	// nothing and from the Create state.
	fold, foldCreate conv.State
	// snapshot and queue are the state as the engine stores it: the
	// snapshot rewritten by every write, the queue only by the writes whose
	// events change it (conv.EncodeStored).
	snapshot, queue []byte
}

var epoch0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newScript(t *testing.T, policy parley.TurnPolicy, participants ...string) *script {
	t.Helper()
	sc := &script{t: t, now: epoch0, msgs: map[string]*parley.Message{}, live: map[string]*parley.Message{}, prior: map[string]conv.Prior{}, names: map[string]bool{}}
	sc.env = conv.Env{Now: sc.now, Limits: conv.DefaultLimits}
	s, events, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: participants, TurnPolicy: policy}, sc.env)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Seq != 1 || events[0].Type != parley.EventConversationCreated || events[0].Turn != 0 || s.LastSeq != 1 {
		t.Fatalf("Create gave %s, lastSeq %d", types(events), s.LastSeq)
	}
	sc.s, sc.start, sc.foldCreate = s, s, s
	sc.tr = newTracker(s.Conversation)
	sc.store(events)
	sc.keep(events)
	return sc
}

// build makes a script and runs steps through it: a conv.Command must be
// accepted, a time.Duration moves the clock on. Seqs are checked dense.
func build(t *testing.T, policy parley.TurnPolicy, participants []string, steps ...any) *script {
	t.Helper()
	sc := newScript(t, policy, participants...)
	sc.run(steps...)
	return sc
}

func (sc *script) run(steps ...any) {
	sc.t.Helper()
	for i, st := range steps {
		switch st := st.(type) {
		case conv.Command:
			if _, err := sc.do(st); err != nil {
				sc.t.Fatalf("step %d: %T refused: %v", i, st, err)
			}
		case time.Duration:
			sc.advance(st)
		default:
			sc.t.Fatalf("step %d: %T is neither a command nor a duration", i, st)
		}
	}
}

// advance moves the clock on.
func (sc *script) advance(d time.Duration) { sc.now = sc.now.Add(d) }

func msgKnown(sc *script, turnID string) bool {
	if _, ok := sc.msgs[turnID]; ok {
		return true
	}
	for _, m := range sc.msgs {
		if m.TurnID == turnID {
			return true
		}
	}
	return false
}

// resolve fills a command's look-ups from what was written so far, as the
// engine does from the store. Look-ups a test set itself are kept.
func (sc *script) resolve(cmd conv.Command) conv.Command {
	switch c := cmd.(type) {
	case conv.PostMessage:
		if c.ID == "" {
			sc.ids++
			c.ID = fmt.Sprintf("m%d", sc.ids)
		}
		if c.ClientRequestID != "" && c.Known.Prior == nil {
			if p, ok := sc.prior[c.AgentID+"/"+c.ClientRequestID]; ok {
				c.Known.Prior = &p
			}
		}
		if !c.Known.IDTaken {
			c.Known.IDTaken = sc.names[c.ID]
		}
		if p, ok := sc.msgs[c.ReplyTo]; ok && c.Known.Parent == nil {
			c.Known.Parent = &conv.ParentRef{ID: p.ID, TurnID: p.TurnID, Depth: p.Depth}
		}
		if c.TurnID != "" && !c.Known.TurnIDKnown {
			c.Known.TurnIDKnown = msgKnown(sc, c.TurnID)
		}
		return c
	case conv.PostTrace:
		if c.ID == "" {
			sc.ids++
			c.ID = fmt.Sprintf("t%d", sc.ids)
		}
		if c.ClientRequestID != "" && c.Known.Prior == nil {
			if p, ok := sc.prior[c.AgentID+"/"+c.ClientRequestID]; ok {
				c.Known.Prior = &p
			}
		}
		if c.TurnID != "" && !c.Known.TurnIDKnown {
			c.Known.TurnIDKnown = msgKnown(sc, c.TurnID)
		}
		return c
	case conv.EnqueuePrompt:
		if !c.Known.IDTaken {
			c.Known.IDTaken = sc.names[c.ID]
		}
		return c
	case conv.StreamText:
		if c.Known.Message == nil {
			c.Known.Message = sc.live[c.MessageID]
		}
		return c
	case conv.StreamTool:
		if c.Known.Message == nil {
			c.Known.Message = sc.live[c.MessageID]
		}
		return c
	case conv.FinalizeMessage:
		if c.Known.Message == nil {
			c.Known.Message = sc.live[c.MessageID]
		}
		return c
	case conv.AskInput:
		if c.Known.Message == nil {
			c.Known.Message = sc.live[c.MessageID]
		}
		if !c.IDTaken {
			c.IDTaken = sc.names[conv.InputName(c.Request.RequestID)]
		}
		return c
	case conv.AnswerInput:
		if in, _, ok := sc.s.InputOf(c.RequestID); ok && c.Known.Message == nil {
			c.Known.Message = sc.live[in.MessageID]
		}
		return c
	case conv.Revert:
		if c.Known == nil {
			if i := slices.Index(sc.order, c.MessageID); i >= 0 {
				c.Known = slices.Clone(sc.order[i:])
			}
		}
		return c
	}
	return cmd
}

// conflicts are the 409 codes: their errors carry the head.
var conflicts = map[string]bool{parley.ETURNCONFLICT: true, parley.EPRECONDITION: true, parley.ECLAIMCONFLICT: true, parley.ECLOSED: true, parley.EBUSY: true}

// do decides a command and, if accepted, applies it. It checks what holds
// for every decision: Decide leaves its input alone; a refusal is a domain
// error, and a 409 carries the stored head; accepted events follow the
// state's last seq; nothing is written once the conversation is closed and
// a replay writes nothing.
func (sc *script) do(cmd conv.Command) (conv.Decision, error) {
	t := sc.t
	t.Helper()
	cmd = sc.resolve(cmd)
	env := sc.env
	env.Now = sc.now
	before := sc.s
	beforeJSON := mustJSON(before)
	// Who may issue it is decided apart (the engine asks first); whatever
	// the command, it is an answer or a 403, never a panic.
	if err := conv.Authorize(before, cmd); err != nil && parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("Authorize(%T) = %v, want nil or forbidden", cmd, err)
	}
	d, err := conv.Decide(before, cmd, env)
	if mustJSON(before) != beforeJSON {
		t.Fatalf("Decide(%T) changed the state it was given", cmd)
	}
	if err != nil {
		var e *parley.Error
		if !errors.As(err, &e) || e.Code == parley.EINTERNAL {
			t.Fatalf("%T: %v is not a domain error", cmd, err)
		}
		if conflicts[e.Code] && (e.Head == nil || e.Head.LastSeq != before.LastSeq || e.Head.Closed != before.Closed || e.Head.LastTurn != before.LastTurn) {
			t.Fatalf("%T: %s carries head %+v; the stored state has lastSeq %d lastTurn %d", cmd, e.Code, e.Head, before.LastSeq, before.LastTurn)
		}
		if len(d.Events) > 0 || len(d.Messages) > 0 {
			t.Fatalf("%T refused with %s but returned %s", cmd, e.Code, types(d.Events))
		}
		return d, err
	}
	if before.Closed && (len(d.Events) > 0 || len(d.Messages) > 0 || len(d.Removed) > 0) {
		t.Fatalf("%T accepted after the conversation closed: %s", cmd, types(d.Events))
	}
	if d.Replay != nil && (len(d.Events) > 0 || len(d.Messages) > 0) {
		t.Fatalf("%T: a replay also writes %s", cmd, types(d.Events))
	}
	for i, e := range d.Events {
		if want := before.LastSeq + int64(i) + 1; e.Seq != want {
			t.Fatalf("%T: event %d has seq %d, want %d", cmd, i, e.Seq, want)
		}
		if e.ConversationID != before.Conversation.ID || !e.Time.Equal(parley.NewTime(sc.now).Time) {
			t.Fatalf("%T: event %+v has the wrong conversation or time", cmd, e)
		}
	}
	if m := d.Result.Message; m != nil && d.Result.Seq != 0 && m.Seq > d.Result.Seq {
		t.Fatalf("%T: message seq %d after result seq %d", cmd, m.Seq, d.Result.Seq)
	}
	if pm, ok := cmd.(conv.PostMessage); ok && d.Replay == nil {
		m := d.Result.Message
		want, replyTo := 0, pm.ReplyTo
		if pm.ReplyTo != "" {
			want = pm.Known.Parent.Depth + 1
		} else if a := before.Active(); a != nil && a.Runner == pm.AgentID && pm.Role == parley.RoleAssistant {
			want, replyTo = 1, a.ID // the response answers the prompt dispatched to its writer
		}
		if m == nil || m.Depth != want || m.ReplyTo != replyTo || m.ID != pm.ID {
			t.Fatalf("message %+v: want id %s depth %d replyTo %q", m, pm.ID, want, replyTo)
		}
	}
	// No decision takes an id that names something already (the store
	// would refuse the append), nor one id twice.
	for _, n := range conv.Names(before, d.Events) {
		if sc.names[n] {
			t.Fatalf("%T takes id %q, which names a message or prompt already", cmd, n)
		}
		sc.names[n] = true
		sc.taken = append(sc.taken, n)
	}
	sc.s = conv.Evolve(before, d.Events...)
	if before.Closed && !sc.s.Closed {
		t.Fatal("the conversation opened again")
	}
	sc.store(d.Events)
	if len(d.Events) > 0 {
		sc.keep(d.Events)
	}
	sc.project(d)
	if key, agent, hash := requestKey(cmd); key != "" && d.Replay == nil && len(d.Events) > 0 {
		sc.prior[agent+"/"+key] = conv.Prior{RequestHash: hash, Response: []byte(mustJSON(d.Result))}
	}
	return d, nil
}

func requestKey(cmd conv.Command) (key, agent, hash string) {
	switch c := cmd.(type) {
	case conv.PostMessage:
		return c.ClientRequestID, c.AgentID, c.RequestHash
	case conv.PostTrace:
		return c.ClientRequestID, c.AgentID, c.RequestHash
	}
	return "", "", ""
}

// store appends events to the log as a store returns them, after a JSON round
// trip, and checks each against the log so far.
func (sc *script) store(events []parley.Event) {
	sc.t.Helper()
	for _, e := range events {
		var back parley.Event
		if err := json.Unmarshal([]byte(mustJSON(e)), &back); err != nil {
			sc.t.Fatal(err)
		}
		sc.tr.feed(sc.t, back)
		sc.log = append(sc.log, back)
		sc.fold = conv.Evolve(sc.fold, back)
		if back.Seq > 1 {
			sc.foldCreate = conv.Evolve(sc.foldCreate, back)
		}
	}
}

// keep stores the state after events as the engine does: the snapshot
// always, the queue only if one of the events changes it.
func (sc *script) keep(events []parley.Event) {
	sc.t.Helper()
	snapshot, queue, err := conv.EncodeStored(sc.s, events...)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.snapshot = snapshot
	if queue != nil {
		sc.queue = queue
	}
}

// project keeps the messages projection as the engine writes it.
func (sc *script) project(d conv.Decision) {
	for _, m := range d.Messages {
		if _, ok := sc.msgs[m.ID]; !ok {
			sc.order = append(sc.order, m.ID)
		}
		sc.msgs[m.ID] = m
	}
	for _, m := range append(slices.Clone(d.Messages), d.Result.Message) {
		if m == nil {
			continue
		}
		if m.Status == parley.StatusStreaming {
			sc.live[m.ID] = m
		} else {
			delete(sc.live, m.ID)
		}
	}
	for _, e := range d.Events {
		// An input request that ended in a message the decision did not
		// write (a stop, a revert, an expiry), as the engine follows it.
		if e.Type != parley.EventInputAnswered {
			continue
		}
		var a parley.InputAnswered
		_ = json.Unmarshal(e.Data, &a)
		if m, ok := sc.live[a.MessageID]; ok && m != d.Result.Message {
			c := *m
			c.Parts = slices.Clone(m.Parts)
			c.ApplyInputAnswered(a)
			sc.live[a.MessageID] = &c
		}
	}
	for _, id := range d.Removed {
		delete(sc.msgs, id)
		delete(sc.live, id)
		sc.order = slices.DeleteFunc(sc.order, func(x string) bool { return x == id })
	}
}

func (sc *script) ok(cmd conv.Command) conv.Decision {
	sc.t.Helper()
	d, err := sc.do(cmd)
	if err != nil {
		sc.t.Fatalf("%T refused: %v", cmd, err)
	}
	return d
}

// fail expects the command to be refused with code and to change nothing.
func (sc *script) fail(cmd conv.Command, code string) *parley.Error {
	sc.t.Helper()
	before := mustJSON(sc.s)
	_, err := sc.do(cmd)
	var e *parley.Error
	if !errors.As(err, &e) || e.Code != code {
		sc.t.Fatalf("%T: err = %v, want code %s", cmd, err, code)
	}
	if mustJSON(sc.s) != before {
		sc.t.Fatalf("a refused command changed the state")
	}
	return e
}

func actor(agent string) conv.Actor { return conv.Actor{AgentID: agent} }

var admin = conv.Actor{AgentID: "ops", Admin: true}

// say is a message by agent with text and finality.
func say(agent string, fin parley.Finality) conv.PostMessage {
	return conv.PostMessage{Actor: actor(agent), Role: parley.RoleAssistant, Parts: []parley.Part{{Type: parley.PartText, Text: agent + " says"}}, Finality: fin}
}

func starting(m conv.PostMessage, turn int) conv.PostMessage {
	m.Precondition = &parley.Precondition{ExpectTurn: turn, StartingTurn: true}
	return m
}

func continuing(m conv.PostMessage, turn int) conv.PostMessage {
	m.Precondition = &parley.Precondition{ExpectTurn: turn, StartingTurn: false}
	return m
}

func withID(m conv.PostMessage, id string) conv.PostMessage { m.ID = id; return m }

func replyTo(m conv.PostMessage, parent string) conv.PostMessage { m.ReplyTo = parent; return m }

func userSays(id string) conv.PostMessage {
	return conv.PostMessage{Actor: actor("human"), ID: id, Role: parley.RoleUser, Parts: []parley.Part{{Type: parley.PartText, Text: "question"}}, Finality: parley.FinalityTurn}
}

func trace(agent string) conv.PostTrace {
	return conv.PostTrace{Actor: actor(agent), Payload: json.RawMessage(`{"thought":1}`)}
}

func system(fin parley.Finality) conv.PostMessage {
	return conv.PostMessage{Actor: admin, Role: parley.RoleSystem, Parts: []parley.Part{{Type: parley.PartText, Text: "maintenance"}}, Finality: fin}
}

func claim(agent string, ttl time.Duration) conv.ClaimTurn {
	return conv.ClaimTurn{Actor: actor(agent), TTL: ttl}
}

func reset(agent string) conv.ResetTurn { return conv.ResetTurn{Actor: actor(agent)} }
func resetAndClaim(agent string) conv.ResetTurn {
	return conv.ResetTurn{Actor: actor(agent), Claim: true}
}
func abort(agent string) conv.AbortTurn      { return conv.AbortTurn{Actor: actor(agent)} }
func delegate(from, to string) conv.Delegate { return conv.Delegate{Actor: actor(from), To: to} }

// lastMessage returns the message of a decision.
func lastMessage(t *testing.T, d conv.Decision) *parley.Message {
	t.Helper()
	if d.Result.Message == nil {
		t.Fatal("decision has no message")
	}
	return d.Result.Message
}

func types(events []parley.Event) string {
	var s []string
	for _, e := range events {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

func wantGuidance(t *testing.T, sc *script, agent string, kind parley.GuidanceKind, turn int) {
	t.Helper()
	g := sc.s.Guidance(sc.now)
	if g == nil || g.NextAgentID != agent || g.Kind != kind || g.Turn != turn || g.AfterSeq != sc.s.LastSeq {
		t.Fatalf("guidance = %+v, want %q %s turn %d after seq %d", g, agent, kind, turn, sc.s.LastSeq)
	}
}

func wantCode(t *testing.T, err error, code string) *parley.Error {
	t.Helper()
	var e *parley.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return e
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// rule is one row of a rule table: a state built from steps (commands that
// must be accepted, durations that move the clock), one command, and what
// must come of it.
type rule struct {
	name   string
	policy parley.TurnPolicy // free unless set
	agents []string          // the participants
	steps  []any
	cmd    conv.Command
	code   string // the refusal expected; "" if the command must be accepted
	check  func(t *testing.T, o outcome)
}

// outcome is what a rule's command came to.
type outcome struct {
	sc     *script
	before conv.State
	d      conv.Decision
	err    *parley.Error
}

func runRules(t *testing.T, rules []rule) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			policy := r.policy
			if policy == "" {
				policy = parley.PolicyFree
			}
			sc := build(t, policy, r.agents, r.steps...)
			o := outcome{sc: sc, before: sc.s}
			if r.code != "" {
				o.err = sc.fail(r.cmd, r.code)
			} else {
				o.d = sc.ok(r.cmd)
			}
			if r.check != nil {
				r.check(t, o)
			}
			checkInvariants(sc)
		})
	}
}

// streamOf is the stream of message id in s (the zero Stream if none).
func streamOf(s conv.State, id string) conv.Stream {
	st, _ := s.Streams.Get(id)
	return st
}
