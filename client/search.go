package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/parleyhq/parley"
)

// SearchOptions say what to search for and which page of the answer to
// return.
type SearchOptions struct {
	// Query is what to search for: words that a message's text must all
	// have, and phrases in double quotes; nothing else is syntax.
	Query string
	// ConversationID narrows the search to one conversation.
	ConversationID string
	// Limit is the page's size (0: the server's default, 20; at most 100).
	Limit int
	// Cursor continues a search (a page's NextCursor, with the same Query
	// and ConversationID); empty: the first page.
	Cursor string
}

// SearchPage is one page of a search's hits, best first.
type SearchPage struct {
	Hits []*parley.SearchHit `json:"hits"`
	// NextCursor continues the search; empty on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// Search returns one page of the messages whose text has o.Query, best
// first, in the conversations the token may read (an agent token: those
// its agent takes part in, or the one o.ConversationID names if it may
// read it). Each hit says where the message is and who wrote it, with a
// snippet of its text in which the words found are marked.
func (c *Client) Search(ctx context.Context, o SearchOptions) (*SearchPage, error) {
	q := url.Values{"q": {o.Query}}
	if o.ConversationID != "" {
		q.Set("conversationId", o.ConversationID)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return call[SearchPage](ctx, c, http.MethodGet, withQuery("/v1/search", q), nil)
}

// EachHit iterates over every hit of a search, best first, page after page
// (o.Cursor, if set, is where it starts). An error is yielded once, with a
// nil hit, and ends the iteration.
func (c *Client) EachHit(ctx context.Context, o SearchOptions) iter.Seq2[*parley.SearchHit, error] {
	return each(func(cursor string) ([]*parley.SearchHit, string, error) {
		o.Cursor = cursor
		p, err := c.Search(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return p.Hits, p.NextCursor, nil
	}, o.Cursor)
}
