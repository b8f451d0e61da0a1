package store

import (
	"slices"
	"testing"
)

// TestParseSearchPrefix: the last word is a prefix when it is not quoted,
// nothing follows it and it has two letters or more; SearchTerms keeps
// that only while the last term is left, and SplitPrefix finds the word.
func TestParseSearchPrefix(t *testing.T) {
	for _, c := range []struct {
		q      string
		terms  []string
		prefix bool
	}{
		{"canb", []string{"canb"}, true},
		{"new yo", []string{"new", "yo"}, true},
		{"new y", []string{"new", "y"}, false},
		{"canb ", []string{"canb"}, false},
		{"canb.", []string{"canb."}, false},
		{`"canb"`, []string{"canb"}, false},
		{`"new yo`, []string{"new yo"}, false},
		{`"new" yo`, []string{"new", "yo"}, true},
		{"e-ma", []string{"e-ma"}, true},
		{"a:* & !b | ')", []string{"a:*", "!b"}, false},
		{"canb\ue000", []string{"canb"}, false},
		{"日本", []string{"日本"}, true},
	} {
		q, err := ParseSearch(c.q)
		if err != nil {
			t.Fatalf("ParseSearch(%q): %v", c.q, err)
		}
		if !slices.Equal(q.Terms, c.terms) || q.Prefix != c.prefix {
			t.Errorf("ParseSearch(%q) = %q, prefix %v; want %q, %v", c.q, q.Terms, q.Prefix, c.terms, c.prefix)
		}
		if terms, prefix := SearchTerms(q); !slices.Equal(terms, c.terms) || prefix != c.prefix {
			t.Errorf("SearchTerms(%q) = %q, %v", c.q, terms, prefix)
		}
	}
	// A query made by hand: its last term gone, or too short, is no prefix.
	if _, prefix := SearchTerms(SearchQuery{Terms: []string{"canb", "\ue000"}, Prefix: true}); prefix {
		t.Error("a prefix of a term left out")
	}
	if _, prefix := SearchTerms(SearchQuery{Terms: []string{"canb", "x"}, Prefix: true}); prefix {
		t.Error("a prefix of one letter")
	}
	for term, want := range map[string][2]string{"new-yo": {"new-", "yo"}, "canb": {"", "canb"}, "x!ab": {"x!", "ab"}} {
		if head, word, ok := SplitPrefix(term); !ok || head != want[0] || word != want[1] {
			t.Errorf("SplitPrefix(%q) = %q, %q, %v", term, head, word, ok)
		}
	}
	for _, term := range []string{"a", "ab.", "", "x y"} {
		if _, _, ok := SplitPrefix(term); ok {
			t.Errorf("SplitPrefix(%q) is a prefix", term)
		}
	}
}
