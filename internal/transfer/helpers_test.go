package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/transfer"
)

// sqliteEngine is an engine over a new SQLite file. The runner grace is long
// so that a message left streaming stays streaming while the test runs.
func sqliteEngine(t testing.TB) *engine.Engine {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, db)
}

// postgresEngine is an engine over a new PostgreSQL schema, or a skip.
func postgresEngine(t testing.TB) *engine.Engine {
	t.Helper()
	db, err := postgres.Open(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, db)
}

func newEngine(t testing.TB, db store.Store) *engine.Engine {
	eng := engine.New(db, engine.Options{})
	// A long grace: no message ends canceled behind the test's back.
	r := runners.New(eng, db, runners.Options{Grace: time.Hour})
	byEngine.Store(eng, &node{db: db, runners: r, reads: reads.New(db, eng)})
	t.Cleanup(func() { r.Close(); eng.Close(); db.Close(); byEngine.Delete(eng) })
	return eng
}

// node is what newEngine made beside an engine.
type node struct {
	db      store.Store
	runners *runners.Dispatcher
	reads   *reads.Reader
}

// byEngine holds what newEngine made beside each engine.
var byEngine sync.Map // *engine.Engine → *node

func nodeOf(eng *engine.Engine) *node {
	n, _ := byEngine.Load(eng)
	return n.(*node)
}

// storeOf is the store of an engine newEngine made.
func storeOf(eng *engine.Engine) store.Store { return nodeOf(eng).db }

// readerOf is the read side of an engine newEngine made.
func readerOf(eng *engine.Engine) *reads.Reader { return nodeOf(eng).reads }

// attach attaches a runner of agent to a conversation of eng, which sends
// nothing; call the function returned to detach it.
func attach(eng *engine.Engine, id, agent string) func() {
	return nodeOf(eng).runners.Attach(id, agent, func([]byte) {})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func text(s string) []parley.Part { return []parley.Part{{Type: parley.PartText, Text: s}} }

func actor(a string) conv.Actor { return conv.Actor{AgentID: a} }

// post writes a whole message.
func post(t testing.TB, eng *engine.Engine, id string, m conv.PostMessage) *parley.Message {
	t.Helper()
	if m.Role == "" {
		m.Role = parley.RoleAssistant
	}
	if m.Parts == nil {
		m.Parts = text("message " + m.ID)
	}
	return must[*engine.MessageResult](t)(eng.PostMessage(ctxT(t), id, m)).Message
}

// richConversation builds a conversation with everything an export must
// carry: a prompt answered by a streamed response with a tool call, a reply
// thread, a claim, a delegation, an abort, a reset, a revert, a trace, a
// message still streaming, and an incoming message nobody answered.
func richConversation(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	ctx := ctxT(t)
	id := "rich"
	must[*engine.View](t)(eng.CreateConversation(ctx, parley.Conversation{ID: id, Title: "Everything", Participants: []string{"a", "b", "c"}, Members: []string{"alice", "human"}}))

	// alice asks; the prompt goes to a's runner, which streams its answer.
	detach := attach(eng, id, "a")
	must[*engine.PromptResult](t)(eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: actor("alice"), ID: "q1", Content: "What is 6 x 7?"}))
	waitFor(t, func() bool {
		_, err := storeOf(eng).GetMessage(ctx, id, "q1")
		return err == nil
	})
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "r1", Streaming: true, Parts: []parley.Part{}})
	for i := range 150 { // past several checkpoints
		must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "r1", Delta: string(rune('a'+i%26)) + " "}))
	}
	must[*engine.MessageResult](t)(eng.StreamTool(ctx, id, conv.StreamTool{Actor: actor("a"), MessageID: "r1",
		Tool: conv.ToolUpdate{CallID: "call-1", ToolName: "calc", Status: parley.ToolRunning, Args: json.RawMessage(`{"expr":"6*7"}`)}}))
	must[*engine.MessageResult](t)(eng.StreamTool(ctx, id, conv.StreamTool{Actor: actor("a"), MessageID: "r1",
		Tool: conv.ToolUpdate{CallID: "call-1", ToolName: "calc", Status: parley.ToolCompleted, Result: json.RawMessage(`{"value":42}`)}}))
	must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "r1", Delta: "The answer is 42."}))
	must[*engine.MessageResult](t)(eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: actor("a"), MessageID: "r1", Reason: parley.FinishEndTurn, Finality: parley.FinalityTurn}))
	must[*engine.TurnResult](t)(eng.CompletePrompt(ctx, id, conv.CompletePrompt{Actor: actor("a")}))
	detach()

	// b claims the next turn, replies to a, delegates to c, and c replies to b.
	must[*engine.TurnResult](t)(eng.Claim(ctx, id, conv.ClaimTurn{Actor: actor("b"), TTL: time.Minute}))
	post(t, eng, id, conv.PostMessage{Actor: actor("b"), ID: "b1", ReplyTo: "r1", Parts: text("Checked: 42 ```is``` right.")})
	must[*engine.TurnResult](t)(eng.Delegate(ctx, id, conv.Delegate{Actor: actor("b"), To: "c"}))
	post(t, eng, id, conv.PostMessage{Actor: actor("c"), ID: "c1", ReplyTo: "b1", Parts: text("Agreed.")})
	must[*engine.TraceResult](t)(eng.PostTrace(ctx, id, conv.PostTrace{Actor: actor("b"), Payload: json.RawMessage(`{"thought":"done"}`)}))
	must[*engine.TurnResult](t)(eng.AbortTurn(ctx, id, conv.AbortTurn{Actor: actor("b"), Reason: "handing over"}))

	// c opens a turn, resets it, writes again and closes it with a message
	// to a that nobody answers.
	post(t, eng, id, conv.PostMessage{Actor: actor("c"), ID: "c2"})
	must[*engine.TurnResult](t)(eng.Reset(ctx, id, conv.ResetTurn{Actor: actor("c")}))
	post(t, eng, id, conv.PostMessage{Actor: actor("c"), ID: "c3", Parts: text("@a can you look at this?"), Finality: parley.FinalityTurn})

	// a writes two messages; the second is reverted.
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "a2", ReplyTo: "q1"})
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "a3"})
	must[*engine.RevertResult](t)(eng.Revert(ctx, id, conv.Actor{Admin: true}, "a3"))

	// a's last message is still streaming when the export runs.
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "a4", Streaming: true, Parts: []parley.Part{}})
	for range 70 {
		must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "a4", Delta: "thinking "}))
	}
	// Its row holds 64 deltas: the rest, a tool call and more text are in
	// the events after it.
	must[*engine.MessageResult](t)(eng.StreamTool(ctx, id, conv.StreamTool{Actor: actor("a"), MessageID: "a4",
		Tool: conv.ToolUpdate{CallID: "call-2", ToolName: "search", Status: parley.ToolRunning, Args: json.RawMessage(`{"q":"more"}`)}}))
	must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "a4", Delta: "still looking"}))
	return id
}

func waitFor(t testing.TB, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// export returns conversation id exported in format f.
func export(t testing.TB, eng *engine.Engine, id string, f transfer.Format) []byte {
	t.Helper()
	var b bytes.Buffer
	must[transfer.Stats](t)(transfer.Export(ctxT(t), readerOf(eng), id, f, &b))
	return b.Bytes()
}

var epochRE = regexp.MustCompile(`"epoch":"[^"]*"`)

// withoutEpoch blanks every epoch: the one thing an import changes.
func withoutEpoch(b []byte) []byte { return epochRE.ReplaceAll(b, []byte(`"epoch":"-"`)) }

func finalizeA4() conv.FinalizeMessage {
	return conv.FinalizeMessage{Actor: actor("a"), MessageID: "a4", Reason: parley.FinishEndTurn, Finality: parley.FinalityTurn}
}

func ctxTBackground() context.Context { return context.Background() }
