package api

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// runnerCodes are the error codes a runner frame may be refused with
// (docs/api.md); "internal" is never one.
var runnerCodes = map[string]bool{
	parley.EINVALID: true, parley.EINVALIDVALUE: true, parley.EINVALIDTHREAD: true, parley.ETOOLARGE: true,
	parley.ENOTFOUND: true, parley.EFORBIDDEN: true, parley.EBUSY: true, parley.ETURNCONFLICT: true,
	parley.EPRECONDITION: true, parley.ECLAIMCONFLICT: true, parley.ECLOSED: true,
}

// FuzzRunnerFrame feeds a runner connection's frame handler (decode, then
// apply to a real engine on SQLite) sequences of up to 8 frames, one per
// line, in a fresh conversation where alice streams message r1. A frame
// is alice's, or bob's (another runner of the conversation) when its line
// starts with "bob:". Every frame must be answered with an ack (whose seq
// is one of the events it appended, or 0 when it appended none) or with an
// error of a documented code that appended nothing; the log stays dense.
// Each input gets its own conversation so that a failing input reproduces
// alone. The limits are small (a message of at most 2 KiB, 1 KiB of text;
// two streaming at once) so that refusals of size are within reach.
func FuzzRunnerFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"message.part.text-delta","turnId":"r1","delta":"hi"}` + "\n" + `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":{"q":1}}` + "\n" +
			`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"completed","result":"ok"}`,
		`{"type":"aborted"}`, `{"type":"error","error":"boom"}`, `{"type":"message.state","turnId":"r1"}`,
		`{"type":"reverted","messageIds":["r1"]}`, `{"type":"complete"}`,
		`{"type":"message.create","turnId":"r2","replyTo":"r1"}` + "\n" + `{"type":"message.part.text-delta","turnId":"r2","delta":"x"}`,
		`{"type":"message.create","turnId":"r1"}`, `{"type":"message.finalize","turnId":"r1","reason":"bored"}`,
		`{"type":"message.create","turnId":"r 9"}`, `{"type":"teleport"}`, `{"type":`, `[]`, `{}`, "\x00\xff",
		// The frames of TestBadRunnerFrames.
		`hello`, ``, `[{"type":"complete"}]`, `{"type":"complete"} x`, "\x00\x01\xff",
		`{"type":"message.create","turnId":"r9","colour":"red"}`, `{"type":"message.create","turnId":9}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":{"a":}}`,
		`{"type":"reverted","messageIds":"r1"}`, `{"type":"message.create","turnId":"` + strings.Repeat("a", 129) + `"}`,
		`{"type":"message.create","turnId":"r9","replyTo":"a b"}`, `{"type":"message.create","turnId":"r9","replyTo":"nope"}`,
		`{"type":"message.create","turnId":"r9","replyTo":"r9"}`, `{"type":"message.create","turnId":"r9","retryOf":"r/1"}`,
		`{"type":"message.create","turnId":"r9","channelType":"a b","channelId":"c"}`,
		`{"type":"message.part.text-delta","turnId":"nope","delta":"x"}`, `{"type":"message.part.text-delta","turnId":"r1","delta":""}`,
		`{"type":"message.part.tool-update","turnId":"nope","callId":"c","toolName":"t","status":"running"}`,
		`{"type":"message.part.tool-update","turnId":"r1","toolName":"t","status":"running"}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"exploded"}`,
		`{"type":"message.finalize","turnId":"nope","reason":"end_turn"}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finality":"forever"}`,
		`{"type":"message.state","turnId":"nope"}`, `{"type":"reverted","messageIds":["a b"]}`,
		`{"type":"reverted","messageIds":[".."]}`, `{"type":"message.create","turnId":"."}`,
		`{"type":"reverted","messageIds":["r1"` + strings.Repeat(`,"r1"`, engine.MaxRevertIDs) + `]}`,
		`bob:{"type":"message.part.text-delta","turnId":"r1","delta":"x"}`, `bob:{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`,
		`bob:{"type":"aborted","turnId":"r1"}`, `bob:{"type":"message.state","turnId":"r1"}`,
		// Over the size limits, and one streaming message too many.
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":"` + strings.Repeat("a", 2048) + `"}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"` + strings.Repeat("d", 1000) + `"}` + "\n" +
			`{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":"` + strings.Repeat("<", 200) + `"}`,
		`{"type":"error","turnId":"r1","error":"` + strings.Repeat("e", 2048) + `"}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"` + strings.Repeat("f", 1025) + `"}`,
		`{"type":"message.create","turnId":"r2"}` + "\n" + `bob:{"type":"message.create","turnId":"b1"}`,
		// Good sequences.
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"done","finality":"turn"}` + "\n" + `{"type":"complete"}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}` + "\n" + `{"type":"message.create","turnId":"r2","channelType":"slack","channelId":"c1","opencodeSessionId":"s"}` + "\n" +
			`{"type":"message.part.text-delta","turnId":"r2","delta":"again"}` + "\n" + `{"type":"error","error":"boom"}` + "\n" + `{"type":"message.state","turnId":"r2"}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}` + "\n" + `{"type":"message.create","turnId":"r3","retryOf":"r1"}` + "\n" + `{"type":"reverted","messageIds":["r1"]}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finality":"turn"}` + "\n" + `bob:{"type":"message.create","turnId":"b1","replyTo":"r1"}` + "\n" +
			`bob:{"type":"message.part.text-delta","turnId":"b1","delta":"mine"}` + "\n" + `{"type":"aborted","turnId":"b1"}` + "\n" + `bob:{"type":"aborted"}`,
		// Input requests: asked, asked again, acknowledged before any outcome,
		// a question with a schema, one that names bob, the message ended.
		`{"type":"message.part.input-request","turnId":"r1","requestId":"q1","kind":"approval","title":"May I?","toolCallId":"c","toolName":"t","args":{"x":1}}` + "\n" +
			`{"type":"message.part.input-request","turnId":"r1","requestId":"q1","kind":"approval","title":"Again?"}` + "\n" + `{"type":"input.ack","requestId":"q1"}` + "\n" +
			`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}` + "\n" + `{"type":"input.ack","requestId":"q1"}`,
		`{"type":"message.part.input-request","turnId":"r1","requestId":"q2","kind":"question","title":"How many?","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}},"answerers":["bob"]}` + "\n" +
			`{"type":"message.part.input-request","turnId":"r1","requestId":"q3","kind":"question","title":"Which?","options":[{"label":"a"},{"label":"b","description":"the other"}],"multiple":true,"expiresAt":"2999-01-01T00:00:00Z"}` + "\n" +
			`bob:{"type":"message.part.input-request","turnId":"r1","requestId":"q4","kind":"approval","title":"Mine?"}` + "\n" + `bob:{"type":"input.ack","requestId":"q2"}` + "\n" + `bob:{"type":"input.withdraw","requestId":"q2"}` + "\n" + `{"type":"input.withdraw","requestId":"q3","reason":"done"}`,
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "fuzz.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	// A long grace: no message ends canceled behind the handler's back.
	limits := conv.DefaultLimits
	limits.MaxMessageBytes, limits.MaxTextBytes, limits.MaxStreaming = 2048, 1024, 2
	eng := engine.New(db, engine.Options{Limits: limits})
	defer eng.Close()
	rn := runners.New(eng, db, runners.Options{Grace: time.Hour})
	defer rn.Close()
	alice := conv.Actor{AgentID: "alice"}

	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"alice", "bob"}})
		if err != nil {
			t.Fatal(err)
		}
		id := v.Conversation.ID
		defer rn.Attach(id, "alice", func([]byte) {})()
		defer rn.Attach(id, "bob", func([]byte) {})()
		rs := rn.Session(id, alice)
		// alice's session creates r1, as a runner would.
		if _, err := rs.Apply(ctx, &runners.Frame{Type: "message.create", TurnID: "r1"}); err != nil {
			t.Fatal(err)
		}
		bob := rn.Session(id, conv.Actor{AgentID: "bob"})
		last := func() int64 {
			v, err := eng.Conversation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return v.Head.LastSeq
		}
		frames := bytes.SplitN(data, []byte("\n"), 9)
		for _, frame := range frames[:min(len(frames), 8)] {
			before := last()
			var reply struct {
				Type  string
				Seq   *int64
				Error *struct{ Code, Message string }
			}
			session := rs
			if b, ok := bytes.CutPrefix(frame, []byte("bob:")); ok {
				session, frame = bob, b
			}
			raw := runnerReply(ctx, session, frame, new(runners.Frame)).appendFrame(nil)
			if err := json.Unmarshal(raw, &reply); err != nil {
				t.Fatalf("%q answered %q: %v", frame, raw, err)
			}
			after := last()
			switch {
			case reply.Type == "error" && reply.Error != nil:
				if !runnerCodes[reply.Error.Code] || reply.Error.Message == "" {
					t.Fatalf("%q was refused with %+v", frame, reply.Error)
				}
				if after != before {
					t.Fatalf("%q was refused but the log went from %d to %d", frame, before, after)
				}
			case reply.Type == "ack" && reply.Seq != nil:
				seq := *reply.Seq
				if seq < 0 || seq == 0 && after != before || seq != 0 && (seq <= before || seq > after) {
					t.Fatalf("%q was acked at seq %d; the log went from %d to %d", frame, seq, before, after)
				}
			default:
				t.Fatalf("%q answered %s", frame, raw)
			}
		}
		events, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CheckDense(events, 0); err != nil || int64(len(events)) != last() {
			t.Fatalf("after %q: %d events, head %d: %v", data, len(events), last(), err)
		}
	})
}
