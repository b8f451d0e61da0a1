package conv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
)

// script drives the rules as the engine does: decide, then evolve with the
// events, keeping the whole log so that tests can check it.
type script struct {
	t    *testing.T
	s    conv.State
	now  time.Time
	log  []parley.Event
	env  conv.Env
	msgs map[string]*parley.Message // the messages projection, for look-ups
	ids  int
}

var epoch0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newScript(t *testing.T, policy parley.TurnPolicy, participants ...string) *script {
	t.Helper()
	sc := &script{t: t, now: epoch0, msgs: map[string]*parley.Message{}}
	sc.env = conv.Env{Now: sc.now, Limits: conv.DefaultLimits}
	s, events, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: participants, TurnPolicy: policy}, sc.env)
	if err != nil {
		t.Fatal(err)
	}
	sc.s, sc.log = s, events
	return sc
}

// advance moves the clock on.
func (sc *script) advance(d time.Duration) { sc.now = sc.now.Add(d) }

// resolve fills a command's look-ups from the messages seen so far, as the
// engine does from the store.
func (sc *script) resolve(cmd conv.Command) conv.Command {
	if m, ok := cmd.(conv.PostMessage); ok {
		if m.ID == "" {
			sc.ids++
			m.ID = fmt.Sprintf("m%d", sc.ids)
		}
		_, m.Known.IDTaken = sc.msgs[m.ID]
		if p, ok := sc.msgs[m.ReplyTo]; ok && m.Known.Parent == nil {
			m.Known.Parent = &conv.ParentRef{ID: p.ID, TurnID: p.TurnID, Depth: p.Depth}
		}
		if m.TurnID != "" {
			_, m.Known.TurnIDKnown = sc.msgs[m.TurnID]
		}
		return m
	}
	if tr, ok := cmd.(conv.PostTrace); ok && tr.ID == "" {
		sc.ids++
		tr.ID = fmt.Sprintf("t%d", sc.ids)
		return tr
	}
	return cmd
}

// do decides a command and, if accepted, applies it.
func (sc *script) do(cmd conv.Command) (conv.Decision, error) {
	sc.t.Helper()
	env := sc.env
	env.Limits = sc.env.Limits
	env.Now = sc.now
	d, err := conv.Decide(sc.s, sc.resolve(cmd), env)
	if err != nil {
		return d, err
	}
	for i, e := range d.Events {
		if want := sc.s.LastSeq + int64(i) + 1; e.Seq != want {
			sc.t.Fatalf("event %d has seq %d, want %d", i, e.Seq, want)
		}
	}
	sc.s = conv.Evolve(sc.s, d.Events...)
	sc.log = append(sc.log, d.Events...)
	for _, m := range d.Messages {
		sc.msgs[m.ID] = m
	}
	return d, nil
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
	before := sc.s.LastSeq
	_, err := sc.do(cmd)
	var e *parley.Error
	if !errors.As(err, &e) || e.Code != code {
		sc.t.Fatalf("%T: err = %v, want code %s", cmd, err, code)
	}
	if sc.s.LastSeq != before {
		sc.t.Fatalf("a refused command changed the state")
	}
	return e
}

// say is a message by agent with text and finality.
func say(agent string, fin parley.Finality) conv.PostMessage {
	return conv.PostMessage{Actor: conv.Actor{AgentID: agent}, Role: parley.RoleAssistant, Parts: []parley.Part{{Type: parley.PartText, Text: agent + " says"}}, Finality: fin}
}

func starting(m conv.PostMessage, turn int) conv.PostMessage {
	m.Precondition = &conv.Precondition{ExpectTurn: turn, StartingTurn: true}
	return m
}

func continuing(m conv.PostMessage, turn int) conv.PostMessage {
	m.Precondition = &conv.Precondition{ExpectTurn: turn, StartingTurn: false}
	return m
}

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

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
