package api

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/sqlite"
	"github.com/parleyhq/parley/store"
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
// line, in a fresh conversation where alice streams message r1 and bob has
// answered nothing. Every frame must be answered with an ack (whose seq is
// one of the events it appended, or 0 when it appended none) or with an
// error of a documented code that appended nothing; the log stays dense.
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
	eng := engine.New(db, engine.Options{RunnerGrace: time.Hour})
	defer eng.Close()
	srv := New(eng, Options{})
	alice := conv.Actor{AgentID: "alice"}

	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		id := v.Conversation.ID
		defer eng.AttachRunner(id, "alice", func([]byte) {})()
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: alice, ID: "r1", Role: parley.RoleAssistant, Streaming: true}); err != nil {
			t.Fatal(err)
		}
		rs := &runnerSession{s: srv, conv: id, act: alice, active: "r1"}
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
				Seq   int64
				Error *struct{ Code, Message string }
			}
			raw := rs.handle(ctx, frame)
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
			case reply.Type == "ack":
				if reply.Seq == 0 && after != before || reply.Seq != 0 && (reply.Seq <= before || reply.Seq > after) {
					t.Fatalf("%q was acked at seq %d; the log went from %d to %d", frame, reply.Seq, before, after)
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
