package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestPagesAreBoundedInBytes: a page of messages, replies or events ends
// early once it holds PageBytes and says where to continue, so that paging
// reads everything and no answer holds a whole page of large items; a
// thread shows a large ancestor summarized and its descendants truncated.
func TestPagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	b := setup(t, engine.Options{}, api.Options{PageBytes: budget})
	id := b.conversation()
	base := "/v1/conversations/" + id
	big := strings.Repeat("x", 20<<10)
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "root", "content": big, "finality": "turn"}), 201, "")
	for i := range 12 {
		b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": fmt.Sprint("r", i), "replyTo": "root", "content": big, "finality": "turn"}), 201, "")
	}
	collect := func(path, key string) (ids []string, pages int) {
		t.Helper()
		for after := 0.0; ; pages++ {
			r := b.do("GET", fmt.Sprintf("%s%s?after=%d&limit=1000", base, path, int64(after)), b.viewer, nil)
			b.want(r, 200, "")
			if len(r.raw) > 2*budget {
				t.Fatalf("GET %s: a page of %d bytes, the budget is %d", path, len(r.raw), budget)
			}
			for _, x := range r.body[key].([]any) {
				if m, ok := x.(map[string]any); ok {
					ids = append(ids, fmt.Sprint(m["id"], m["seq"]))
				}
			}
			next, ok := r.body["nextAfter"].(float64)
			if !ok {
				return ids, pages + 1
			}
			after = next
		}
	}
	if ids, pages := collect("/messages", "messages"); len(ids) != 13 || pages < 4 {
		t.Fatalf("messages: %d in %d pages, want 13 in 4 or more", len(ids), pages)
	}
	if ids, pages := collect("/messages/root/replies", "messages"); len(ids) != 12 || pages < 4 {
		t.Fatalf("replies: %d in %d pages", len(ids), pages)
	}
	if ids, pages := collect("/events", "events"); len(ids) != 14 || pages < 4 {
		t.Fatalf("events: %d in %d pages", len(ids), pages)
	}
	r := b.do("GET", base+"/messages/root/thread", b.viewer, nil)
	b.want(r, 200, "")
	if d := r.body["descendants"].([]any); len(d) >= 12 || r.body["truncated"] != true {
		t.Fatalf("thread of root: %d descendants, truncated %v", len(d), r.body["truncated"])
	}
	r = b.do("GET", base+"/messages/r3/thread", b.viewer, nil)
	anc := r.body["ancestors"].([]any)
	if len(anc) != 1 || anc[0].(map[string]any)["summarized"] == nil || r.body["message"].(map[string]any)["content"] != big {
		t.Fatalf("thread of r3: ancestors %.200v", anc)
	}
}

// TestThreadOfALargeChainIsPaged: the thread of a long chain of large
// messages (each a reply to the one before) is answered in bounded
// pieces: the ancestors of its last message come summarized (each says
// how large it is, and reads whole by its id), the nearest small ones
// whole; the descendants of its first come a page of about PageBytes at a
// time, each page saying where the next begins, until all are read once,
// in order.
func TestThreadOfALargeChainIsPaged(t *testing.T) {
	t.Parallel()
	const budget = 256 << 10
	b := setup(t, engine.Options{}, api.Options{PageBytes: budget})
	id := b.conversation()
	base := "/v1/conversations/" + id
	big := strings.Repeat("large ", 8<<10) // 48 KiB, over budget/64
	const n = 30
	for i := range n {
		body := map[string]any{"id": fmt.Sprint("m", i), "content": big}
		if i > 0 {
			body["replyTo"] = fmt.Sprint("m", i-1)
		}
		if i >= n-2 {
			body["content"] = "small"
		}
		b.want(b.do("POST", base+"/messages", b.alice, body), 201, "")
	}
	whole := b.do("GET", base+"/messages/m3", b.viewer, nil)
	r := b.do("GET", base+"/messages/m29/thread", b.viewer, nil)
	b.want(r, 200, "")
	if len(r.raw) > budget {
		t.Fatalf("the thread of the last message weighs %d bytes, over %d", len(r.raw), budget)
	}
	anc := r.body["ancestors"].([]any)
	if len(anc) != n-1 || r.body["root"].(map[string]any)["id"] != "m0" || r.body["truncated"] != false {
		t.Fatalf("the thread of m29: %d ancestors, root %v, truncated %v", len(anc), r.body["root"].(map[string]any)["id"], r.body["truncated"])
	}
	for i, x := range anc {
		a := x.(map[string]any)
		summary, _ := a["summarized"].(map[string]any)
		switch {
		case a["id"] != fmt.Sprint("m", i):
			t.Fatalf("ancestor %d is %v", i, a["id"])
		case i == n-2 && (summary != nil || a["content"] != "small"):
			t.Fatalf("the small parent is not shown whole: %v", a)
		case i < n-2 && (summary == nil || a["content"] != ""):
			t.Fatalf("large ancestor %d is not summarized", i)
		case i == 3 && summary["bytes"] != float64(len(strings.TrimSpace(string(whole.raw)))):
			t.Fatalf("the summary of m3 says %v bytes; the message weighs %d", summary["bytes"], len(whole.raw))
		}
	}

	var seen []string
	pages := 0
	for after := -1.0; ; pages++ {
		path := base + "/messages/m0/thread"
		if after >= 0 {
			path += fmt.Sprintf("?after=%d", int64(after))
		}
		r := b.do("GET", path, b.viewer, nil)
		b.want(r, 200, "")
		// The message is there whole, and again as the root.
		if len(r.raw) > budget+3*len(whole.raw) {
			t.Fatalf("a page of the thread of m0 weighs %d bytes (%d descendants), the budget is %d", len(r.raw), len(r.body["descendants"].([]any)), budget)
		}
		for _, x := range r.body["descendants"].([]any) {
			seen = append(seen, x.(map[string]any)["id"].(string))
		}
		next, ok := r.body["nextAfter"].(float64)
		if !ok {
			break
		}
		if r.body["truncated"] != true {
			t.Fatalf("a page with more after it says truncated %v", r.body["truncated"])
		}
		after = next
	}
	var want []string
	for i := 1; i < n; i++ {
		want = append(want, fmt.Sprint("m", i))
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) || pages < 4 {
		t.Fatalf("the descendants of m0, in %d pages: %v", pages+1, seen)
	}
	b.want(b.do("GET", base+"/messages/m0/thread?after=-1", b.viewer, nil), 422, "invalid_value")
	b.want(b.do("GET", base+"/messages/nope/thread", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", base+"/messages/nope/replies", b.viewer, nil), 404, "not_found")
}

// TestConversationListIsBoundedInBytes: a page of conversations ends once
// what was read of them (their records, states and queues) reaches
// PageBytes, and says where to continue, so that a page of a thousand
// conversations with large metadata or long queues is not read whole.
func TestConversationListIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	const budget = 32 << 10
	b := setup(t, engine.Options{}, api.Options{PageBytes: budget})
	meta := map[string]string{"notes": strings.Repeat("n", 12<<10)}
	for i := range 6 {
		b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"title": fmt.Sprint("c", i), "participants": []string{"alice"}, "metadata": meta}), 201, "")
	}
	var titles []string
	pages := 0
	for cursor := ""; ; pages++ {
		r := b.do("GET", "/v1/conversations?limit=1000&cursor="+cursor, b.viewer, nil)
		b.want(r, 200, "")
		if len(r.raw) > 2*budget {
			t.Fatalf("a page of conversations of %d bytes, the budget is %d", len(r.raw), budget)
		}
		for _, v := range r.body["conversations"].([]any) {
			titles = append(titles, v.(map[string]any)["conversation"].(map[string]any)["title"].(string))
		}
		next, ok := r.body["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if fmt.Sprint(titles) != "[c5 c4 c3 c2 c1 c0]" || pages < 2 {
		t.Fatalf("listed %v in %d pages", titles, pages+1)
	}
}
