package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
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
