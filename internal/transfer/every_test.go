package transfer_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/transfer"
)

// TestEveryEventTypeRoundTrips builds, through the engine, a conversation
// holding every event type a server writes (parley.EventTypes: every
// prompt.*, turn.*, claim.*, a delegation, a task run, a revert, a trace,
// streamed text and tool updates, an input request answered and
// acknowledged, compaction tombstones) and one made with
// messageFormat v1; exports each in every machine format, imports it into
// an empty store and under a new id into its own store, and checks that
// each imported log is the original's (but for the conversation's id and
// epoch) and exports the same. A type added to parley.EventTypes that the
// builder does not write, or that does not import back, fails here.
func TestEveryEventTypeRoundTrips(t *testing.T) {
	t.Parallel()
	backends := map[string]func(testing.TB) *engine.Engine{"sqlite": sqliteEngine, "postgres": postgresEngine}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := mk(t)
			id := everyEventConversation(t, src)
			v1 := v1Conversation(t, src)
			got := map[string]bool{}
			for _, e := range readLog(t, src, id) {
				got[e.Type] = true
			}
			if want := parley.EventTypes(); !maps.Equal(got, setOf(want)) {
				t.Fatalf("the conversation holds the event types\n%v\nnot every type a server writes:\n%v", slices.Sorted(maps.Keys(got)), want)
			}
			if !slices.ContainsFunc(readLog(t, src, v1), func(e parley.Event) bool {
				return e.Type == parley.EventChunk && strings.Contains(string(e.Data), `"messageId":""`)
			}) {
				t.Fatal("the v1 conversation has no chunk that names no message")
			}
			for _, cid := range []string{id, v1} {
				for _, f := range []transfer.Format{transfer.JSON, transfer.JSONL} {
					t.Run(cid+"-"+string(f), func(t *testing.T) {
						first := export(t, src, cid, f)
						// Into an empty store, under its own id.
						dst := mk(t)
						res, err := transfer.Import(ctxT(t), dst, bytes.NewReader(first), transfer.ImportOptions{})
						if err != nil {
							t.Fatalf("importing its own export: %v", err)
						}
						if res.Source != "export" || len(res.Warnings) != 0 {
							t.Fatalf("import: source %q, warnings %v", res.Source, res.Warnings)
						}
						sameLog(t, src, cid, dst, cid)
						if second := export(t, dst, cid, f); !bytes.Equal(withoutEpoch(first), withoutEpoch(second)) {
							t.Fatalf("the second export differs:\n%s\n---\n%s", first, second)
						}
						// Into its own store, under a new id (parley import -id).
						copyID := cid + "-copy-" + string(f)
						if _, err := transfer.Import(ctxT(t), src, bytes.NewReader(first), transfer.ImportOptions{ID: copyID}); err != nil {
							t.Fatalf("importing its own export as %s: %v", copyID, err)
						}
						sameLog(t, src, cid, src, copyID)
					})
				}
			}
		})
	}
}

func setOf(types []string) map[string]bool {
	m := map[string]bool{}
	for _, t := range types {
		m[t] = true
	}
	return m
}

// readLog returns the whole log of conversation id.
func readLog(t testing.TB, eng *engine.Engine, id string) []parley.Event {
	t.Helper()
	var all []parley.Event
	for {
		page := must[[]parley.Event](t)(storeOf(eng).ReadEvents(ctxT(t), store.ReadEventsParams{ConversationID: id, After: int64(len(all)), Limit: 500}))
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}

// sameLog checks that conversation bid of b has the log of aid of a: the
// same events, but for the conversation's id and epoch.
func sameLog(t *testing.T, a *engine.Engine, aid string, b *engine.Engine, bid string) {
	t.Helper()
	la, lb := readLog(t, a, aid), readLog(t, b, bid)
	if len(la) != len(lb) {
		t.Fatalf("the imported log has %d events, the original %d", len(lb), len(la))
	}
	for i := range la {
		ea, eb := la[i], lb[i]
		if ea.ConversationID != aid || eb.ConversationID != bid {
			t.Fatalf("event %d is of %q and %q", ea.Seq, ea.ConversationID, eb.ConversationID)
		}
		ea.ConversationID, eb.ConversationID = "", ""
		if ea.Type == parley.EventConversationCreated {
			var ca, cb parley.Conversation
			if json.Unmarshal(ea.Data, &ca) != nil || json.Unmarshal(eb.Data, &cb) != nil || ca.ID != aid || cb.ID != bid {
				t.Fatalf("conversation.created: %s and %s", ea.Data, eb.Data)
			}
			ca.ID, cb.ID, ca.Epoch, cb.Epoch = "", "", "", ""
			ea.Data, eb.Data = json.RawMessage(jsonOf(t, ca)), json.RawMessage(jsonOf(t, cb))
		}
		if ja, jb := jsonOf(t, ea), jsonOf(t, eb); ja != jb {
			t.Fatalf("event %d differs:\n%s\n%s", ea.Seq, ja, jb)
		}
	}
}

// everyEventConversation builds a conversation holding every event type a
// server writes, and returns its id.
func everyEventConversation(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	ctx := ctxT(t)
	id := "every"
	must[*engine.View](t)(eng.CreateConversation(ctx, parley.Conversation{ID: id, Title: "Every event", Participants: []string{"a", "b", "c", "other"}, Members: []string{"alice"}}))
	post(t, eng, id, conv.PostMessage{Actor: actor("alice"), ID: "hi", Role: parley.RoleUser, Parts: text("hi"), Finality: parley.FinalityTurn})

	// The conversation changed: a title, metadata, one participant more.
	retitled := "Every event, changed"
	must[*engine.View](t)(eng.UpdateConversation(ctx, id, conv.UpdateConversation{Actor: conv.Actor{Admin: true}, Patch: parley.ConversationPatch{
		Title: &retitled, Metadata: json.RawMessage(`{"k":"v"}`), Participants: &parley.NameChanges{Add: []string{"d"}}}}))

	// A claim that lapses; a turn with a trace, a delegation, a reset and
	// an abort.
	must[*engine.TurnResult](t)(eng.Claim(ctx, id, conv.ClaimTurn{Actor: actor("b"), TTL: 20 * time.Millisecond}))
	waitFor(t, func() bool { return hasEvent(t, eng, id, parley.EventClaimExpired) })
	must[*engine.TraceResult](t)(eng.PostTrace(ctx, id, conv.PostTrace{Actor: actor("b"), Payload: json.RawMessage(`{"thought":"hmm"}`)}))
	must[*engine.TurnResult](t)(eng.Delegate(ctx, id, conv.Delegate{Actor: actor("b"), To: "c"}))
	must[*engine.TurnResult](t)(eng.Reset(ctx, id, conv.ResetTurn{Actor: actor("b")}))
	must[*engine.TurnResult](t)(eng.AbortTurn(ctx, id, conv.AbortTurn{Actor: actor("b"), Reason: "gave up"}))

	// A prompt answered by a streamed message with a tool call: queued,
	// dispatched, completed.
	detach := attach(eng, id, "a")
	must[*engine.PromptResult](t)(eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: actor("alice"), ID: "p1", Content: "question", To: "a"}))
	waitFor(t, func() bool { _, err := storeOf(eng).GetMessage(ctx, id, "p1"); return err == nil })
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "r1", Streaming: true, Parts: []parley.Part{}})
	must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "r1", Delta: "looking "}))
	must[*engine.MessageResult](t)(eng.StreamTool(ctx, id, conv.StreamTool{Actor: actor("a"), MessageID: "r1",
		Tool: conv.ToolUpdate{CallID: "call-1", ToolName: "search", Status: parley.ToolCompleted, Result: json.RawMessage(`"found"`)}}))
	must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("a"), MessageID: "r1", Delta: "found it"}))
	must[*engine.MessageResult](t)(eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: actor("a"), MessageID: "r1", Reason: parley.FinishEndTurn, Finality: parley.FinalityTurn}))
	must[*engine.TurnResult](t)(eng.CompletePrompt(ctx, id, conv.CompletePrompt{Actor: actor("a")}))
	detach()

	// Prompts for an agent with no runner: one promoted, one withdrawn
	// (canceled); the promoted one dispatched, requeued when its runner
	// leaves, dispatched again and stopped (aborted), then canceled when
	// its runner leaves.
	must[*engine.PromptResult](t)(eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: actor("alice"), ID: "p2", Content: "second", To: "other"}))
	must[*engine.PromptResult](t)(eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: actor("alice"), ID: "p3", Content: "third", To: "other"}))
	must[*engine.TurnResult](t)(eng.PromotePrompt(ctx, id, conv.PromotePrompt{Actor: actor("alice"), ID: "p3"}))
	must[*engine.TurnResult](t)(eng.WithdrawPrompt(ctx, id, conv.WithdrawPrompt{Actor: actor("alice"), ID: "p2"}))
	detach = attach(eng, id, "other")
	waitFor(t, func() bool { return hasEvent(t, eng, id, parley.EventPromptDispatched, `"id":"p3"`) })
	detach()
	waitFor(t, func() bool { return hasEvent(t, eng, id, parley.EventPromptRequeued) })
	detach = attach(eng, id, "other")
	waitFor(t, func() bool { return countEvents(t, eng, id, parley.EventPromptDispatched, `"id":"p3"`) == 2 })
	if _, err := eng.StopAnswer(ctx, id, conv.Actor{AgentID: "alice"}, "p3"); err != nil {
		t.Fatal(err)
	}
	detach()
	waitFor(t, func() bool { return hasEvent(t, eng, id, parley.EventPromptCanceled, `"id":"p3"`) })

	// A revert.
	post(t, eng, id, conv.PostMessage{Actor: actor("c"), ID: "x1", Finality: parley.FinalityTurn})
	must[*engine.RevertResult](t)(eng.Revert(ctx, id, conv.Actor{Admin: true}, "x1"))

	// A scheduled task's run (every second: the first is due a second on).
	tasks := schedule.New(nodeOf(eng).db, eng, schedule.Options{})
	task := must[*parley.Task](t)(tasks.CreateTask(ctx, parley.Task{ConversationID: id, AgentID: "alice", Prompt: "tick", EveryMs: 1000}))
	waitFor(t, func() bool {
		if err := eng.FireDueTasks(ctx); err != nil {
			t.Fatal(err)
		}
		return hasEvent(t, eng, id, parley.EventTaskRun)
	})
	if err := tasks.DeleteTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}

	// A message still streaming, with text and a tool call in the events
	// after its row; then retention compacts the streamed events of r1.
	post(t, eng, id, conv.PostMessage{Actor: actor("c"), ID: "s1", Streaming: true, Parts: []parley.Part{}})
	must[*engine.MessageResult](t)(eng.StreamText(ctx, id, conv.StreamText{Actor: actor("c"), MessageID: "s1", Delta: "thinking"}))
	must[*engine.MessageResult](t)(eng.StreamTool(ctx, id, conv.StreamTool{Actor: actor("c"), MessageID: "s1",
		Tool: conv.ToolUpdate{CallID: "call-2", ToolName: "calc", Status: parley.ToolRunning, Args: json.RawMessage(`{"x":1}`)}}))
	// It asks for approval twice; alice (a member the requests name)
	// answers one, and its runner takes the answer; the other waits.
	for _, rid := range []string{"ok-1", "ok-2"} {
		must[*engine.MessageResult](t)(eng.AskInput(ctx, id, conv.AskInput{Actor: actor("c"), MessageID: "s1", Request: parley.InputRequest{
			RequestID: rid, Kind: parley.InputApproval, ToolCallID: "call-2", ToolName: "calc", Args: json.RawMessage(`{"x":1}`), Title: "Calculate?",
			Answerers: []string{"alice"}}}))
	}
	must[*engine.InputResult](t)(eng.AnswerInput(ctx, id, conv.AnswerInput{Actor: actor("alice"), RequestID: "ok-1", Answer: json.RawMessage(`{"approved": true}`)}))
	must[int64](t)(eng.AckInput(ctx, id, conv.AckInput{Actor: actor("c"), RequestID: "ok-1"}))
	if n := compactAll(t, eng); n == 0 {
		t.Fatal("nothing was compacted")
	}
	return id
}

// v1Conversation builds a conversation made with messageFormat v1, where a
// runner of the first protocol streams text that names no message before
// it sends the message; it returns its id.
func v1Conversation(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	ctx := ctxT(t)
	id := "every-v1"
	must[*engine.View](t)(eng.CreateConversation(ctx, parley.Conversation{ID: id, Participants: []string{"a"}, Members: []string{"alice"}, MessageFormat: "v1"}))
	post(t, eng, id, conv.PostMessage{Actor: actor("alice"), ID: "q", Role: parley.RoleUser, Parts: text("hello?"), Finality: parley.FinalityTurn})
	for _, s := range []string{"hel", "lo"} {
		must[*engine.MessageResult](t)(eng.StreamV1(ctx, id, conv.StreamV1{Actor: actor("a"), Content: s}))
	}
	post(t, eng, id, conv.PostMessage{Actor: actor("a"), ID: "r", Parts: text("hello"), Finality: parley.FinalityTurn})
	// And one still streaming when the export runs.
	post(t, eng, id, conv.PostMessage{Actor: actor("alice"), ID: "q2", Role: parley.RoleUser, Parts: text("again?"), Finality: parley.FinalityTurn})
	must[*engine.MessageResult](t)(eng.StreamV1(ctx, id, conv.StreamV1{Actor: actor("a"), Content: "half"}))
	return id
}

// countEvents counts the events of type typ of conversation id whose data
// holds every one of with.
func countEvents(t testing.TB, eng *engine.Engine, id, typ string, with ...string) int {
	t.Helper()
	n := 0
	for _, e := range readLog(t, eng, id) {
		if e.Type == typ && !slices.ContainsFunc(with, func(s string) bool { return !strings.Contains(string(e.Data), s) }) {
			n++
		}
	}
	return n
}

func hasEvent(t testing.TB, eng *engine.Engine, id, typ string, with ...string) bool {
	t.Helper()
	return countEvents(t, eng, id, typ, with...) > 0
}
