package store

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley"
)

// Search bounds, the same on every backend.
const (
	// MaxSearchBytes bounds the text of a search.
	MaxSearchBytes = 1024
	// MaxSearchWords bounds the words of a search, those of its phrases
	// included.
	MaxSearchWords = 32
	// SearchCandidates bounds the messages a search ranks: of the messages
	// that have every term, the newest SearchCandidates are ranked, so that
	// a word found in half a million messages costs what one found in a few
	// thousand does. A search finds at most that many messages.
	SearchCandidates = 2000
	// SearchIndexedChars is how much of a message's text is indexed: its
	// first 64 Ki characters. Words past them are not found.
	SearchIndexedChars = 65536
	// SnippetWords is about how many words a snippet holds.
	SnippetWords = 24
)

// SearchQuery is a parsed search: terms that a message's text must all
// have. A term is a word or a phrase (words one after the other); each
// backend splits it into words as it splits the text it indexes, so that a
// word such as "e-mail" is found as the text has it.
type SearchQuery struct {
	Terms []string
}

// ParseSearch reads a search as people type it: words, which a message's
// text must all have (in any order), and phrases in double quotes (“curly”
// ones too), whose words it must have one after the other. Nothing else is
// syntax: operators, parentheses, stars and colons are text, and a quote
// left open runs to the end. Case does not matter. Terms without a letter
// or a digit are dropped, so a search of punctuation alone has no terms and
// finds nothing; private-use characters separate words. It returns EINVALID for text that is not UTF-8 or holds a
// NUL character, and EINVALIDVALUE past MaxSearchBytes or MaxSearchWords.
func ParseSearch(q string) (SearchQuery, error) {
	switch {
	case !utf8.ValidString(q):
		return SearchQuery{}, parley.Errorf(parley.EINVALID, "the search is not valid UTF-8 text")
	case strings.ContainsRune(q, 0):
		return SearchQuery{}, parley.Errorf(parley.EINVALID, "the search holds a NUL character; send text only")
	case len(q) > MaxSearchBytes:
		return SearchQuery{}, parley.Errorf(parley.EINVALIDVALUE, "the search is %d bytes; at most %d", len(q), MaxSearchBytes)
	}
	var sq SearchQuery
	words := 0
	add := func(term string) {
		term = strings.Join(strings.Fields(term), " ")
		if n := countWords(term); n > 0 {
			sq.Terms = append(sq.Terms, term)
			words += n
		}
	}
	var cur strings.Builder
	quoted := false
	for _, r := range q {
		switch {
		case isQuote(r):
			add(cur.String())
			cur.Reset()
			quoted = !quoted
		case !quoted && unicode.IsSpace(r):
			add(cur.String())
			cur.Reset()
		case unicode.Is(unicode.Co, r):
			// Private-use characters separate words: stores mark
			// what they index besides text with them.
			cur.WriteByte(' ')
		default:
			cur.WriteRune(r)
		}
	}
	add(cur.String())
	if words > MaxSearchWords {
		return SearchQuery{}, parley.Errorf(parley.EINVALIDVALUE, "the search has %d words; at most %d", words, MaxSearchWords)
	}
	return sq, nil
}

func isQuote(r rune) bool { return r == '"' || r == '“' || r == '”' }

// wordRune reports whether r is part of a word: a letter or a digit.
func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// SearchWords returns the words of a term: its runs of letters and digits.
// A backend splits the term itself, as it splits text; these are for
// looking each word up on its own.
func SearchWords(term string) []string {
	return strings.FieldsFunc(term, func(r rune) bool { return !wordRune(r) })
}

// countWords counts the runs of word characters in s.
func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		w := wordRune(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

// SearchTerms returns the terms a backend searches for: q's terms with NUL
// and private-use characters made spaces and bytes that are not UTF-8
// dropped (ParseSearch leaves none, but a caller may make a query by
// hand), and those left without a word left out. A backend finds nothing
// when none is left.
func SearchTerms(q SearchQuery) []string {
	var out []string
	for _, t := range q.Terms {
		t = strings.Map(func(r rune) rune {
			if r == 0 || unicode.Is(unicode.Co, r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(t, ""))
		if countWords(t) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// SearchParams are the arguments of Store.Search.
type SearchParams struct {
	Query SearchQuery
	// ConversationID, if set, narrows the search to one conversation.
	ConversationID string
	// Member, if set, searches only the conversations this agent takes
	// part in (CreateConversationParams.Members).
	Member string
	// Offset skips the first hits of the ranking (a page's start); Limit
	// is the most hits returned.
	Offset int
	Limit  int
}
