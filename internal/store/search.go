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
	// MinPrefixRunes is the fewest letters and digits of a last word
	// matched as the beginning of a word (SearchQuery.Prefix): a shorter
	// one would begin too many words to be worth the work, and is matched
	// whole.
	MinPrefixRunes = 2
)

// SearchQuery is a parsed search: terms that a message's text must all
// have. A term is a word or a phrase (words one after the other); each
// backend splits it into words as it splits the text it indexes, so that a
// word such as "e-mail" is found as the text has it.
type SearchQuery struct {
	Terms []string
	// Prefix says that the last word of the last term is the beginning
	// of a word (search as you type: "canb" finds "Canberra"), not a whole
	// word. The term is a word or words that were not in quotes.
	Prefix bool
}

// ParseSearch reads a search as people type it: words, which a message's
// text must all have (in any order), and phrases in double quotes (“curly”
// ones too), whose words it must have one after the other. Nothing else is
// syntax: operators, parentheses, stars and colons are text, and a quote
// left open runs to the end. Case does not matter. Terms without a letter
// or a digit are dropped, so a search of punctuation alone has no terms and
// finds nothing; private-use characters separate words. The last word,
// if it is not in quotes, nothing follows it (no space, punctuation or
// quote) and it has at least MinPrefixRunes letters and digits, is the
// beginning of a word (SearchQuery.Prefix). It returns EINVALID for text
// that is not UTF-8 or holds a NUL character, and EINVALIDVALUE past
// MaxSearchBytes or MaxSearchWords.
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
	if last := cur.String(); !quoted && prefixWord(last) != "" {
		sq.Prefix = true
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

// prefixWord returns the word term ends with if it may be a prefix: term
// ends with a letter or digit, and that word has at least MinPrefixRunes.
// Otherwise "".
func prefixWord(term string) string {
	w := term[strings.LastIndexFunc(term, func(r rune) bool { return !wordRune(r) })+1:]
	if utf8.RuneCountInString(w) < MinPrefixRunes {
		return ""
	}
	return w
}

// SplitPrefix splits a term that ends with a prefix word into the text
// before that word (perhaps "") and the word; ok is false if term does not
// end with a word of at least MinPrefixRunes.
func SplitPrefix(term string) (head, word string, ok bool) {
	w := prefixWord(term)
	if w == "" {
		return "", "", false
	}
	return term[:len(term)-len(w)], w, true
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
// when none is left. prefix says the last of them ends with a word to
// match as a prefix (see SplitPrefix): q.Prefix is set, the last term of
// q is left, and it ends with a word of at least MinPrefixRunes.
func SearchTerms(q SearchQuery) (terms []string, prefix bool) {
	var out []string
	for i, t := range q.Terms {
		t = strings.Map(func(r rune) rune {
			if r == 0 || unicode.Is(unicode.Co, r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(t, ""))
		if countWords(t) > 0 {
			out = append(out, t)
			prefix = q.Prefix && i == len(q.Terms)-1 && prefixWord(t) != ""
		}
	}
	return out, prefix
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
