package api_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// listIDs lists the conversations of query (a page of 100) with token.
func (b *bundle) listIDs(token, query string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations?"+query, token, nil)
	b.want(r, 200, "")
	var ids []string
	for _, v := range r.body["conversations"].([]any) {
		ids = append(ids, v.(map[string]any)["conversation"].(map[string]any)["id"].(string))
	}
	return ids
}

// TestListConversationsByActivity: the list is most recently active
// first, and a write moves its conversation to the top.
func TestListConversationsByActivity(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	first, second, third := b.conversation("alice"), b.conversation("alice"), b.conversation("alice")
	if got := b.listIDs(b.viewer, ""); !slices.Equal(got, []string{third, second, first}) {
		t.Fatalf("before any write: %v, want %v", got, []string{third, second, first})
	}
	b.want(b.do("POST", "/v1/conversations/"+first+"/messages", b.alice, map[string]any{"content": "hello"}), 201, "")
	if got := b.listIDs(b.viewer, ""); !slices.Equal(got, []string{first, third, second}) {
		t.Fatalf("after a write to the first: %v, want %v", got, []string{first, third, second})
	}
	// In pages of one, each once, in that order.
	var walk []string
	for cursor := ""; ; {
		r := b.do("GET", "/v1/conversations?limit=1&cursor="+url.QueryEscape(cursor), b.viewer, nil)
		b.want(r, 200, "")
		for _, v := range r.body["conversations"].([]any) {
			walk = append(walk, v.(map[string]any)["conversation"].(map[string]any)["id"].(string))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(walk, []string{first, third, second}) {
		t.Fatalf("in pages of one: %v", walk)
	}
}

// TestListConversationsFilters: participant, involves and metadata filters
// narrow the list together and with the title; an agent's token lists only
// its own conversations whatever they say; bad filters are 422 and list
// nothing.
func TestListConversationsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	mk := func(body map[string]any) string {
		r := b.do("POST", "/v1/conversations", b.admin, body)
		b.want(r, 201, "")
		return r.body["conversation"].(map[string]any)["id"].(string)
	}
	red := mk(map[string]any{"title": "red plan", "participants": []string{"alice", "carol"}, "metadata": map[string]any{"team": "red", "n": 1}})
	blue := mk(map[string]any{"title": "blue plan", "participants": []string{"carol"}, "members": []string{"bob"}, "metadata": map[string]any{"team": "blue", "a.b": "x y"}})
	bobs := mk(map[string]any{"title": "bob's", "participants": []string{"bob"}, "metadata": map[string]any{"team": "red"}})
	for _, c := range []struct {
		token, query string
		want         []string
	}{
		{b.viewer, "participant=carol", []string{blue, red}},
		{b.viewer, "participant=bob", []string{bobs}},
		{b.viewer, "involves=bob", []string{bobs, blue}},
		{b.viewer, "metadata.team=red", []string{bobs, red}},
		{b.viewer, "metadata.n=1", nil}, // a number is not the string "1"
		{b.viewer, "metadata." + url.QueryEscape("a.b") + "=" + url.QueryEscape("x y"), []string{blue}},
		{b.viewer, "metadata.team=red&participant=carol", []string{red}},
		{b.viewer, "metadata.team=red&title=PLAN", []string{red}},
		{b.viewer, "involves=bob&metadata.team=blue&participant=carol&title=blue", []string{blue}},
		{b.viewer, "participant=nobody", nil},
		// Agents list only their own conversations, whatever the filters.
		{b.alice, "participant=carol", []string{red}},
		{b.alice, "involves=bob", nil},
		{b.bob, "metadata.team=red", []string{bobs}},
		{b.bob, "involves=bob", []string{bobs, blue}},
	} {
		if got := b.listIDs(c.token, c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.query, got, c.want)
		}
	}
	long := strings.Repeat("x", 513)
	for _, q := range []string{
		"participant=",
		"involves=",
		"participant=a&participant=b",
		"metadata.=v",
		"metadata.k=" + long,
		"metadata." + strings.Repeat("k", 129) + "=v",
		"metadata.k=1&metadata.k=2",
		"metadata.a=1&metadata.b=2&metadata.c=3&metadata.d=4&metadata.e=5",
		"involves=" + long,
		"metadata.k=%FF",
	} {
		r := b.do("GET", "/v1/conversations?"+q, b.viewer, nil)
		b.want(r, 422, "invalid_value")
		if strings.Contains(string(r.raw), `"conversations"`) {
			t.Errorf("%s: a refused list listed: %s", q, r.raw)
		}
	}
	if got := b.listIDs(b.viewer, "metadata.a=1&metadata.b=2&metadata.c=3&metadata.team=red"); got != nil {
		t.Errorf("four metadata filters: %v, want none", got)
	}
}
