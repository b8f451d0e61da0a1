package parley

import "strings"

// SearchHit is one message a search over message text found: where it is,
// who wrote it and when, a snippet of its text with the words found
// marked, and its rank (higher ranks first; ranks compare only within the
// answer to one search).
type SearchHit struct {
	ConversationID string `json:"conversationId"`
	// ConversationTitle is the title of the conversation, if it has one.
	ConversationTitle string `json:"conversationTitle,omitempty"`
	MessageID         string `json:"messageId"`
	Seq               int64  `json:"seq"`
	AgentID           string `json:"agentId"`
	Role              Role   `json:"role"`
	CreatedAt         Time   `json:"createdAt"`
	// Snippet is a short stretch of the message's text around what was
	// found, in pieces: those with Match set are words the search found.
	// Its pieces are plain text, to show as text (never as HTML).
	Snippet []SnippetPart `json:"snippet"`
	Rank    float64       `json:"rank"`
}

// SnippetPart is a piece of a snippet: plain text, and whether it is a
// word the search found.
type SnippetPart struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// Snippet markers: a store marks where a word found starts and ends in a
// snippet's text with these two characters, which it keeps out of the text
// it indexes (they are control characters, never part of a word).
const (
	SnippetStart = "\x02"
	SnippetEnd   = "\x03"
)

// SplitSnippet turns a snippet marked with SnippetStart and SnippetEnd into
// its parts. Pieces left empty are dropped; a marker without its pair
// marks what follows it (or nothing).
func SplitSnippet(s string) []SnippetPart {
	parts := []SnippetPart{}
	match := false
	for s != "" {
		i := strings.IndexAny(s, SnippetStart+SnippetEnd)
		text := s
		if i >= 0 {
			text = s[:i]
		}
		if text != "" {
			if n := len(parts); n > 0 && parts[n-1].Match == match {
				parts[n-1].Text += text
			} else {
				parts = append(parts, SnippetPart{Text: text, Match: match})
			}
		}
		if i < 0 {
			break
		}
		match = s[i:i+1] == SnippetStart
		s = s[i+1:]
	}
	return parts
}
