package transfer_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/transfer"
)

// labels returns the headings of the numbered messages of a Markdown export.
func labels(t *testing.T, md []byte) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(string(md), "\n") {
		if i := strings.Index(l, ". **"); i > 0 && i < 6 {
			out = append(out, strings.TrimSuffix(l[i+4:], "**"))
		}
	}
	return out
}

func newConv(t *testing.T, eng *engine.Engine, id string, participants ...string) {
	t.Helper()
	must[*engine.View](t)(eng.CreateConversation(ctxT(t), parley.Conversation{ID: id, Participants: participants, Members: []string{"alice", "human"}}))
}

func turnMsg(agent, id, replyTo string) conv.PostMessage {
	return conv.PostMessage{Actor: actor(agent), ID: id, ReplyTo: replyTo, Finality: parley.FinalityTurn}
}

func human(id string) conv.PostMessage {
	m := turnMsg("alice", id, "")
	m.Role = parley.RoleUser
	return m
}

// TestMarkdownLabels covers every label and the no-reply rule, with the
// scenarios of seed 004.
func TestMarkdownLabels(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(t *testing.T, eng *engine.Engine, id string)
		want  []string
	}{
		{"a human message answered by two agents", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a", "b")
			post(t, eng, id, human("h1"))
			post(t, eng, id, turnMsg("a", "ra", "h1"))
			post(t, eng, id, turnMsg("b", "rb", "h1"))
		}, []string{"From: HUMAN (alice) · To: a", "Agent: a (reply to alice)", "Agent: b (reply to alice)"}},

		{"an agent-to-agent chain A → B → C", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a", "b", "c")
			post(t, eng, id, turnMsg("a", "m1", ""))
			post(t, eng, id, turnMsg("b", "m2", "m1"))
			post(t, eng, id, turnMsg("c", "m3", "m2"))
		}, []string{"Agent: b (message from a)", "Agent: b (reply to a)", "Agent: c (reply to b)"}},

		{"a message that nobody answers", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a", "b")
			post(t, eng, id, human("h1"))
			post(t, eng, id, turnMsg("a", "m1", ""))
		}, []string{"From: HUMAN (alice) · To: a " + transfer.NoReply, "Agent: b (message from a) " + transfer.NoReply}},

		{"an answer that does not name its question leaves it unanswered", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a")
			post(t, eng, id, human("h1"))
			post(t, eng, id, turnMsg("a", "r1", ""))
		}, []string{"From: HUMAN (alice) · To: a " + transfer.NoReply, "Agent: a"}},

		{"free turns deliver to every other agent", func(t *testing.T, eng *engine.Engine, id string) {
			must[*engine.View](t)(eng.CreateConversation(ctxT(t), parley.Conversation{ID: id, Participants: []string{"a", "b", "c"}, Members: []string{"alice", "human"}, TurnPolicy: parley.PolicyFree}))
			post(t, eng, id, turnMsg("a", "m1", ""))
			post(t, eng, id, turnMsg("c", "m2", "m1"))
		}, []string{"Agent: b, c (message from a)", "Agent: c (reply to a)"}},

		{"a closing message names the next agent", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a", "b", "c")
			m := turnMsg("a", "m1", "")
			m.Next = "c"
			post(t, eng, id, m)
		}, []string{"Agent: c (message from a) " + transfer.NoReply}},

		{"a message inside an open turn goes to nobody yet", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a", "b")
			post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "m1"})
			post(t, eng, id, turnMsg("a", "m2", "m1"))
		}, []string{"Agent: a", "Agent: a (reply to a)"}},

		{"tool results and system messages", func(t *testing.T, eng *engine.Engine, id string) {
			newConv(t, eng, id, "a")
			post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "call"})
			post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "res", Role: parley.RoleTool, ReplyTo: "call"})
			post(t, eng, id, conv.PostMessage{Actor: conv.Actor{AgentID: "ops", Admin: true}, ID: "sys", Role: parley.RoleSystem})
		}, []string{"Agent: a", "Tool result: a (reply to a)", "System: ops"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := sqliteEngine(t)
			tc.build(t, eng, "c")
			md := export(t, eng, "c", transfer.Markdown)
			if got := labels(t, md); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("labels:\n%s\nwant:\n%s\n\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), md)
			}
		})
	}
}

// TestMarkdownParts checks how parts, turns, exchanges and turn events read.
func TestMarkdownParts(t *testing.T) {
	t.Parallel()
	eng := sqliteEngine(t)
	id := richConversation(t, eng)
	md := string(export(t, eng, id, transfer.Markdown))
	for _, want := range []string{
		"# Everything\n",
		"## Exchange `q1`",
		"### Turn 1 · alice",
		"### Turn 2 · a",
		"- tool call `calc` · completed · call `call-1`\n     - args: `{\"expr\":\"6*7\"}`\n     - result: `{\"value\":42}`",
		"   ````text\n   Checked: 42 ```is``` right.\n   ````", // a longer fence around backticks
		"> b claimed turn 3 until ",
		"> b delegated turn 3 to c",
		"> turn 3 aborted by b: handing over",
		"> turn 4 reset by c",
		"> reverted: a3 removed",
		strings.Repeat("thinking ", 70) + "\n   ```\n", // every delta, though the row holds 64
		"- tool call `search` · running · call `call-2`\n     - args: `{\"q\":\"more\"}`", // after the row too
		"still looking\n   ```\n   _(still streaming)_",
		"8 messages in 5 turns.",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("the export lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "heuristic") {
		t.Fatal("a conversation with threading data used the timestamp heuristic")
	}
}

// TestMarkdownStoppedAndError renders a canceled and a failed message.
func TestMarkdownStoppedAndError(t *testing.T) {
	t.Parallel()
	eng := sqliteEngine(t)
	ctx := ctxT(t)
	newConv(t, eng, "c", "a")
	post(t, eng, "c", conv.PostMessage{Actor: actor("a"), ID: "s1", Streaming: true, Parts: []parley.Part{}})
	must[*engine.MessageResult](t)(eng.StreamText(ctx, "c", conv.StreamText{Actor: actor("a"), MessageID: "s1", Delta: "partial"}))
	must[*engine.MessageResult](t)(eng.FinalizeMessage(ctx, "c", conv.FinalizeMessage{Actor: actor("a"), MessageID: "s1", Reason: parley.FinishCanceled}))
	post(t, eng, "c", conv.PostMessage{Actor: actor("a"), ID: "s2", Streaming: true, Parts: []parley.Part{}})
	must[*engine.MessageResult](t)(eng.FinalizeMessage(ctx, "c", conv.FinalizeMessage{Actor: actor("a"), MessageID: "s2", Reason: parley.FinishError, Error: "model\nunavailable"}))
	md := string(export(t, eng, "c", transfer.Markdown))
	for _, want := range []string{"- _stopped (canceled)_", "- **error:** model unavailable", "- _stopped (error)_", "· canceled ·", "· error ·"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the export lacks %q:\n%s", want, md)
		}
	}
	if bytes.Contains([]byte(md), []byte("end_turn")) {
		t.Fatal("a normal finish is shown")
	}
}

// TestMarkdownInputRequests shows what an agent asked a person, who
// answered what, and what is still pending.
func TestMarkdownInputRequests(t *testing.T) {
	t.Parallel()
	eng := sqliteEngine(t)
	ctx := ctxT(t)
	id := everyEventConversation(t, eng) // s1 asked ok-1 (answered by alice) and ok-2 (pending)
	must[*engine.MessageResult](t)(eng.AskInput(ctx, id, conv.AskInput{Actor: actor("c"), MessageID: "s1", Request: parley.InputRequest{
		RequestID: "pick", Kind: parley.InputQuestion, Title: "Which region?", Options: []parley.InputOption{{Label: "eu"}, {Label: "us"}}}}))
	md := string(export(t, eng, id, transfer.Markdown))
	for _, want := range []string{
		"- asks (approval `ok-1`): Calculate? · answered\n     - tool `calc`\n     - args: `{\"x\":1}`\n     - answered by alice at ",
		"     - answer: `{\"approved\":true}`",
		"- asks (approval `ok-2`): Calculate? · pending",
		"- asks (question `pick`): Which region? · pending\n     - option: eu\n     - option: us",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("the export lacks %q:\n%s", want, md)
		}
	}
}
