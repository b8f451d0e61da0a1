package api_test

import (
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestJoinMidStreamShowsEveryWord: a subscriber that joins with no
// position while a message streams gets that message in its snapshot with
// every word streamed so far, and then the words after it; every list of
// messages (a page, replies, a thread, the message itself) shows it
// assembled too. A streaming message older than the snapshot's newest
// messages is in the snapshot all the same.
func TestJoinMidStreamShowsEveryWord(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{SnapshotMessages: 2}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "q1", "content": "why?"}), 201, "")
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	// Enough deltas to pass a checkpoint, so that the row holds some of the
	// text and the chunks after it the rest.
	want := ""
	for i := range 70 {
		w := "w" + itoa(i) + " "
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"`+w+`"}`)
		want += w
	}
	// Newer messages than r1, so that r1 is not among the newest two.
	for i := range 3 {
		b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "ops", "role": "system", "content": "note " + itoa(i)}), 201, "")
	}

	ws := b.dialWS(id, "")
	in := readFrame(t, b.ctx, ws)
	next, _ := b.openSSE(id, "")
	sse := next()
	if sse.event != "init" {
		t.Fatalf("SSE first frame %q", sse.event)
	}
	for name, init := range map[string]map[string]any{"ws": in, "sse": sse.data} {
		msgs := init["messages"].([]any)
		if len(msgs) != 3 {
			t.Fatalf("%s: snapshot has %d messages, want the newest two and the streaming one", name, len(msgs))
		}
		m := msgs[0].(map[string]any)
		pos := init["position"].(map[string]any)["seq"].(float64)
		if m["id"] != "r1" || m["content"] != want || m["status"] != "streaming" || m["updatedSeq"] != pos {
			t.Fatalf("%s: snapshot's streaming message = %v (position %v), want its whole text so far", name, m, pos)
		}
	}
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"more"}`)
	for {
		f := readFrame(t, b.ctx, ws)
		if f["type"] == "chunk" {
			if c := f["data"].(map[string]any)["content"]; c != "more" {
				t.Fatalf("first live chunk %v, want the delta after the snapshot", c)
			}
			break
		}
	}
	want += "more"

	for _, path := range []string{"/messages", "/messages?turnId=q1", "/messages/q1/replies", "/messages/r1"} {
		r := b.do("GET", base+path, b.viewer, nil)
		b.want(r, 200, "")
		var m map[string]any
		if ms, ok := r.body["messages"].([]any); ok {
			for _, x := range ms {
				if x.(map[string]any)["id"] == "r1" {
					m = x.(map[string]any)
				}
			}
		} else {
			m = r.body
		}
		if m == nil || m["content"] != want || len(m["parts"].([]any)) != 1 {
			t.Fatalf("GET %s shows r1 as %v, want its whole text so far", path, m)
		}
	}
	r := b.do("GET", base+"/messages/q1/thread", b.viewer, nil)
	b.want(r, 200, "")
	if d := r.body["descendants"].([]any); len(d) != 1 || d[0].(map[string]any)["content"] != want {
		t.Fatalf("thread of q1 shows %v", d)
	}
	r = b.do("GET", base+"/messages/r1/thread", b.viewer, nil)
	if m := r.body["message"].(map[string]any); m["content"] != want {
		t.Fatalf("thread of r1 shows %v", m)
	}
}
