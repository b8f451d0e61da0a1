package api_test

import (
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// searchIDs runs GET /v1/search with query (already encoded) as token and
// returns the message ids found, sorted, after checking the answer's shape.
func (b *bundle) searchIDs(query, token string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/search?"+query, token, nil)
	b.want(r, 200, "")
	var ids []string
	for _, h := range r.body["hits"].([]any) {
		hit := h.(map[string]any)
		for _, f := range []string{"conversationId", "messageId", "agentId", "role", "createdAt"} {
			if s, _ := hit[f].(string); s == "" {
				b.t.Fatalf("a hit without %s: %s", f, r.raw)
			}
		}
		if _, ok := hit["rank"].(float64); !ok {
			b.t.Fatalf("a hit without a rank: %s", r.raw)
		}
		if seq, _ := hit["seq"].(float64); seq < 1 {
			b.t.Fatalf("a hit without a seq: %s", r.raw)
		}
		marked := false
		for _, p := range hit["snippet"].([]any) {
			part := p.(map[string]any)
			if part["match"] == true {
				marked = true
			}
		}
		if !marked {
			b.t.Fatalf("a snippet marks nothing: %s", r.raw)
		}
		ids = append(ids, hit["messageId"].(string))
	}
	sort.Strings(ids)
	return ids
}

func q(text string) string { return "q=" + url.QueryEscape(text) }

// TestSearchRespectsAccess: an agent's search finds only the messages of
// the conversations it takes part in; narrowed to one conversation, it needs
// to be able to read it (a delegate of the open turn may); viewers and
// admins find everything. A streamed message is found once finalized, and
// a deleted conversation's messages no more.
func TestSearchRespectsAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	carol, worker := b.agentToken("carol"), b.agentToken("worker")
	ours := b.conversation("alice") // bob is a member
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"title": "carol's", "participants": []string{"carol"}})
	b.want(r, 201, "")
	theirs := r.body["conversation"].(map[string]any)["id"].(string)
	post := func(conv, token, id, text string, extra map[string]any) {
		body := map[string]any{"id": id, "content": text}
		for k, v := range extra {
			body[k] = v
		}
		b.want(b.do("POST", "/v1/conversations/"+conv+"/messages", token, body), 201, "")
	}
	post(ours, b.alice, "a1", "the release plan for friday", map[string]any{"finality": "turn"})
	post(ours, b.bob, "b1", "friday: deploy the checklist", map[string]any{"finality": "turn"})
	post(theirs, carol, "c1", "a friday plan nobody else sees", map[string]any{"finality": "turn"})

	// A response streams: found once it is finalized, by all its text.
	runner := b.runnerConn(ours, b.alice)
	for _, f := range []string{
		`{"type":"message.create","turnId":"r1"}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"streaming about friday "}`,
	} {
		send(t, b, runner, f)
	}
	if got := b.searchIDs(q("streaming friday"), b.admin); len(got) != 0 {
		t.Fatalf("a message still streaming was found: %v", got)
	}
	for _, f := range []string{
		`{"type":"message.part.text-delta","turnId":"r1","delta":"and the weekend"}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`,
	} {
		send(t, b, runner, f)
	}
	all := []string{"a1", "b1", "c1", "r1"}
	for who, want := range map[string][]string{
		b.admin: all, b.viewer: all, b.alice: {"a1", "b1", "r1"}, b.bob: {"a1", "b1", "r1"}, carol: {"c1"}, worker: nil,
	} {
		if got := b.searchIDs(q("friday"), who); !slices.Equal(got, want) {
			t.Fatalf("a search of friday found %v, want %v", got, want)
		}
	}
	if got := b.searchIDs(q(`"friday and the weekend"`), b.alice); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("the streamed message's last words found %v", got)
	}
	if got := b.searchIDs(q("friday")+"&conversationId="+ours, b.viewer); !slices.Equal(got, []string{"a1", "b1", "r1"}) {
		t.Fatalf("narrowed to ours: %v", got)
	}
	b.want(b.do("GET", "/v1/search?"+q("friday")+"&conversationId="+theirs, b.alice, nil), 403, parley.EFORBIDDEN)
	b.want(b.do("GET", "/v1/search?"+q("friday")+"&conversationId=nope", b.alice, nil), 404, parley.ENOTFOUND)
	b.want(b.do("GET", "/v1/search?"+q("friday"), "", nil), 401, parley.EUNAUTHORIZED)

	// A delegate of the open turn reads the conversation, so it may search
	// it by name; it takes no part in it, so its search of all finds nothing.
	post(ours, b.alice, "a2", "still working on friday", nil)
	b.want(b.do("POST", "/v1/conversations/"+ours+"/delegations", b.alice, map[string]any{"to": "worker"}), 200, "")
	if got := b.searchIDs(q("working")+"&conversationId="+ours, worker); !slices.Equal(got, []string{"a2"}) {
		t.Fatalf("the delegate's search of the conversation: %v", got)
	}
	if got := b.searchIDs(q("working"), worker); len(got) != 0 {
		t.Fatalf("the delegate's search of all: %v", got)
	}

	b.want(b.do("DELETE", "/v1/conversations/"+ours, b.admin, nil), 204, "")
	if got := b.searchIDs(q("friday"), b.admin); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("after deleting ours: %v", got)
	}
}

// TestSearchPagesAndBadInput: pages continue by cursor to the same list;
// a cursor of another search, malformed parameters and bounds get clear
// errors; what looks like query syntax is text and never an error.
func TestSearchPagesAndBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	var want []string
	for i := range 7 {
		mid := "m" + string(rune('a'+i))
		b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"id": mid,
			"content": "paging " + strings.Repeat("again ", i) + "<b>bold</b> & (NEAR) \"OR\" *"}), 201, "")
		want = append(want, mid)
	}
	r := b.do("GET", "/v1/search?"+q("paging")+"&limit=100", b.viewer, nil)
	b.want(r, 200, "")
	var whole []string
	for _, h := range r.body["hits"].([]any) {
		whole = append(whole, h.(map[string]any)["messageId"].(string))
	}
	if _, more := r.body["nextCursor"]; more || len(whole) != 7 {
		t.Fatalf("one page of all: %s", r.raw)
	}
	var paged []string
	cursor := ""
	for range 10 {
		r := b.do("GET", "/v1/search?"+q("paging")+"&limit=3"+cursor, b.viewer, nil)
		b.want(r, 200, "")
		for _, h := range r.body["hits"].([]any) {
			paged = append(paged, h.(map[string]any)["messageId"].(string))
		}
		next, ok := r.body["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = "&cursor=" + next
		b.want(b.do("GET", "/v1/search?"+q("other words")+"&limit=3"+cursor, b.viewer, nil), 400, parley.EINVALID)
		b.want(b.do("GET", "/v1/search?"+q("paging")+"&conversationId="+id+"&limit=3"+cursor, b.viewer, nil), 400, parley.EINVALID)
	}
	if !slices.Equal(paged, whole) {
		t.Fatalf("pages of 3 gave %v, one page %v", paged, whole)
	}
	sort.Strings(whole)
	if !slices.Equal(whole, want) {
		t.Fatalf("found %v, want %v", whole, want)
	}
	// The text of a snippet is data: markup in a message comes back as text.
	r = b.do("GET", "/v1/search?"+q("bold"), b.viewer, nil)
	b.want(r, 200, "")
	if !strings.Contains(string(r.raw), `\u003cb\u003e`) {
		t.Fatalf("the snippet of markup: %s", r.raw)
	}

	long := strings.Repeat("x", 1025)
	many := strings.Repeat("w ", 33)
	for _, c := range []struct {
		query  string
		status int
		code   string
	}{
		{"", 400, parley.EINVALID},
		{"q=", 400, parley.EINVALID},
		{"q=%20%20", 400, parley.EINVALID},
		{"q=a&q=b", 400, parley.EINVALID},
		{"q=a%00b", 400, parley.EINVALID},
		{"q=%FF%FE", 400, parley.EINVALID},
		{q(long), 422, parley.EINVALIDVALUE},
		{q(many), 422, parley.EINVALIDVALUE},
		{q("a") + "&limit=0", 422, parley.EINVALIDVALUE},
		{q("a") + "&limit=101", 422, parley.EINVALIDVALUE},
		{q("a") + "&limit=ten", 400, parley.EINVALID},
		{q("a") + "&cursor=%21%21", 400, parley.EINVALID},
		{q("a") + "&cursor=bm90LWEtY3Vyc29y", 400, parley.EINVALID},
		{q("a") + "&cursor=a&cursor=b", 400, parley.EINVALID},
		{q("a") + "&conversationId=a&conversationId=b", 400, parley.EINVALID},
		{q("a") + "&conversationId=" + url.QueryEscape("no/such id"), 422, parley.EINVALIDVALUE},
	} {
		r := b.do("GET", "/v1/search?"+c.query, b.viewer, nil)
		if r.status != c.status || r.code() != c.code {
			t.Errorf("?%.60s answered %d %s, want %d %s", c.query, r.status, r.raw, c.status, c.code)
		}
	}
	for _, text := range []string{`OR`, `NEAR(`, `"`, `"""`, `paging*`, `^paging`, `body:paging`, `conv : x`, `a & b | !c`, `'x':*`, `(`, `)`,
		`\`, `%`, `_`, `-paging`, `paging NOT again`, "\x02paging\x03", "🙂", strings.Repeat("(", 1000), strings.Repeat(`" `, 100)} {
		r := b.do("GET", "/v1/search?"+q(text), b.viewer, nil)
		if r.status != 200 {
			t.Errorf("%q answered %d %s", text, r.status, r.raw)
		}
	}
	// Operators are words: "NEAR" and "OR" are in every message here.
	if r := b.do("GET", "/v1/search?"+q(`paging NEAR OR`), b.viewer, nil); r.status != 200 || len(r.body["hits"].([]any)) != 7 {
		t.Fatalf("operators as words: %s", r.raw)
	}
}

// TestSearchAsYouType: the last word of q is the beginning of a word, so
// a search box finds as the person types ("canb" finds Canberra, "new yo"
// New York), while the words before it, quoted words and a word followed
// by a space are whole; what looks like query syntax around a prefix is
// text, never an error.
func TestSearchAsYouType(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	for mid, text := range map[string]string{
		"capital": "We flew to Canberra on Monday.",
		"city":    "Then New York, for a week.",
		"other":   "Canned peaches, a new plan.",
	} {
		b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"id": mid, "content": text}), 201, "")
	}
	for text, want := range map[string][]string{
		"canb":       {"capital"},
		"CANB":       {"capital"},
		"can":        {"capital", "other"},
		"canb ":      nil, // a space ends the word
		`"canb"`:     nil, // so do quotes
		"flew canb":  {"capital"},
		"canb flew":  nil, // only the last word is a prefix
		"new yo":     {"city"},
		"new y":      nil, // one letter is a whole word
		"ne york":    nil,
		"to:* canb":  {"capital"},
		"canb:*":     nil,
		"york & !fo": {"city"},
	} {
		if got := b.searchIDs(q(text), b.viewer); !slices.Equal(got, want) {
			t.Errorf("a search of %q found %v, want %v", text, got, want)
		}
	}
	r := b.do("GET", "/v1/search?"+q("canb"), b.viewer, nil)
	b.want(r, 200, "")
	hit := r.body["hits"].([]any)[0].(map[string]any)
	var marked []string
	for _, p := range hit["snippet"].([]any) {
		if part := p.(map[string]any); part["match"] == true {
			marked = append(marked, part["text"].(string))
		}
	}
	if !slices.Equal(marked, []string{"Canberra"}) {
		t.Fatalf("the snippet marks %v, want the whole word: %s", marked, r.raw)
	}
	for _, text := range []string{`a:* & !b | ')`, `a:* & !b | ')x`, `'canb':*`, `canb\`, `canb'`, `ca''nb`, `!canb`, `(canb`, `canb)`,
		`x <-> canb`, `canb*`, `"canb`, `c\'a`, "can\u0301", strings.Repeat("ab ", 31) + "canb"} {
		r := b.do("GET", "/v1/search?"+q(text), b.viewer, nil)
		if r.status != 200 {
			t.Errorf("%q answered %d %s", text, r.status, r.raw)
		}
	}
	if got := b.searchIDs(q(`a:* & !b | ')`), b.viewer); len(got) != 0 {
		t.Fatalf("the hostile query found %v", got)
	}
}
