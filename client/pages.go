package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/parleyhq/parley"
)

// PageOptions choose a page of a list ordered by seq: the items after seq
// After (0: from the start), at most Limit of them (0: the server's
// default, 100; at most 1000). A page of large items may hold fewer: the
// server also bounds a page by size.
type PageOptions struct {
	After int64
	Limit int
}

func (o PageOptions) query(q url.Values) url.Values {
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ListConversationsOptions choose a page of conversations.
type ListConversationsOptions struct {
	// Cursor continues a list (a page's NextCursor); empty: the first page.
	Cursor string
	// Limit is the page's size (0: the server's default, 100; at most 1000).
	Limit int
	// Title narrows the list to the conversations whose title contains it,
	// ignoring case.
	Title string
	// Participant narrows it to the conversations with this agent among
	// their participants.
	Participant string
	// Involves narrows it to the conversations this agent takes part in:
	// a participant, a member or their creator.
	Involves string
	// Metadata narrows it to the conversations whose metadata has each
	// top-level key with exactly that string value (at most 4).
	Metadata map[string]string
}

// ConversationPage is one page of conversations, most recently active
// first.
type ConversationPage struct {
	Conversations []*View `json:"conversations"`
	// NextCursor continues the list; empty on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// ListConversations returns one page of the conversations the token may
// read (an agent token: those its agent takes part in, whatever the
// filters say), most recently active first (by the time of their last
// event), narrowed by o's filters.
func (c *Client) ListConversations(ctx context.Context, o ListConversationsOptions) (*ConversationPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"cursor": o.Cursor, "title": o.Title, "participant": o.Participant, "involves": o.Involves} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range o.Metadata {
		q.Set("metadata."+k, v)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return call[ConversationPage](ctx, c, http.MethodGet, withQuery("/v1/conversations", q), nil)
}

// EachConversation iterates over every conversation ListConversations
// lists, page after page (o.Cursor, if set, is where it starts). An error
// is yielded once, with a nil view, and ends the iteration.
func (c *Client) EachConversation(ctx context.Context, o ListConversationsOptions) iter.Seq2[*View, error] {
	return each(func(cursor string) ([]*View, string, error) {
		o.Cursor = cursor
		p, err := c.ListConversations(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return p.Conversations, p.NextCursor, nil
	}, o.Cursor)
}

// ListMessagesOptions choose a page of a conversation's messages.
type ListMessagesOptions struct {
	PageOptions
	// TurnID keeps only the messages of that exchange.
	TurnID string
	// AgentID keeps only the messages that agent wrote.
	AgentID string
}

// MessagePage is one page of messages in seq order.
type MessagePage struct {
	Messages []*parley.Message `json:"messages"`
	// NextAfter is the After of the next page; 0 on the last page.
	NextAfter int64 `json:"nextAfter,omitempty"`
}

// ListMessages returns one page of a conversation's messages, oldest
// first. A message still streaming is shown with all its text so far, and
// its UpdatedSeq is the seq it is complete as of.
func (c *Client) ListMessages(ctx context.Context, conversationID string, o ListMessagesOptions) (*MessagePage, error) {
	q := o.query(url.Values{})
	if o.TurnID != "" {
		q.Set("turnId", o.TurnID)
	}
	if o.AgentID != "" {
		q.Set("agentId", o.AgentID)
	}
	return call[MessagePage](ctx, c, http.MethodGet, withQuery(convPath(conversationID, "/messages"), q), nil)
}

// EachMessage iterates over a conversation's messages, oldest first, page
// after page, as ListMessages lists them. An error is yielded once, with a
// nil message, and ends the iteration.
func (c *Client) EachMessage(ctx context.Context, conversationID string, o ListMessagesOptions) iter.Seq2[*parley.Message, error] {
	return each(func(after int64) ([]*parley.Message, int64, error) {
		o.After = after
		p, err := c.ListMessages(ctx, conversationID, o)
		if err != nil {
			return nil, 0, err
		}
		return p.Messages, p.NextAfter, nil
	}, o.After)
}

// ListReplies returns one page of the direct replies to a message, by seq.
func (c *Client) ListReplies(ctx context.Context, conversationID, messageID string, o PageOptions) (*MessagePage, error) {
	path := convPath(conversationID, "/messages/"+url.PathEscape(messageID)+"/replies")
	return call[MessagePage](ctx, c, http.MethodGet, withQuery(path, o.query(url.Values{})), nil)
}

// EachReply iterates over the direct replies to a message, by seq, page
// after page. An error is yielded once and ends the iteration.
func (c *Client) EachReply(ctx context.Context, conversationID, messageID string, o PageOptions) iter.Seq2[*parley.Message, error] {
	return each(func(after int64) ([]*parley.Message, int64, error) {
		o.After = after
		p, err := c.ListReplies(ctx, conversationID, messageID, o)
		if err != nil {
			return nil, 0, err
		}
		return p.Messages, p.NextAfter, nil
	}, o.After)
}

// EventPage is one page of a conversation's log.
type EventPage struct {
	Events []parley.Event `json:"events"`
	// NextAfter is the After of the next page; 0 on the last page.
	NextAfter int64 `json:"nextAfter,omitempty"`
}

// ListEvents returns one page of a conversation's log, oldest first: the
// events themselves, as a stream delivers them (DecodeEvent reads their
// data).
func (c *Client) ListEvents(ctx context.Context, conversationID string, o PageOptions) (*EventPage, error) {
	return call[EventPage](ctx, c, http.MethodGet, withQuery(convPath(conversationID, "/events"), o.query(url.Values{})), nil)
}

// EachEvent iterates over a conversation's log from o.After, page after
// page, up to its end as of the last page read (a Stream follows it live).
// An error is yielded once and ends the iteration.
func (c *Client) EachEvent(ctx context.Context, conversationID string, o PageOptions) iter.Seq2[parley.Event, error] {
	return each(func(after int64) ([]parley.Event, int64, error) {
		o.After = after
		p, err := c.ListEvents(ctx, conversationID, o)
		if err != nil {
			return nil, 0, err
		}
		return p.Events, p.NextAfter, nil
	}, o.After)
}

// Thread is a message with its ancestors and a page of its descendants.
type Thread struct {
	// Root is the thread's first message: the first ancestor, or the
	// message itself.
	Root *parley.Message `json:"root"`
	// Ancestors are the message's ancestors, root first: the nearest 1000
	// at most. One over 128 KiB, or past the first 8 MiB of them, is
	// summarized (read it with Client.Message).
	Ancestors []*parley.Message `json:"ancestors"`
	Message   *parley.Message   `json:"message"`
	// Descendants are the replies, their replies and so on, by seq: at most
	// 1000 and about 8 MiB of them.
	Descendants []*parley.Message `json:"descendants"`
	// NextAfter, when not 0, is where the next page of descendants starts
	// (ThreadAfter).
	NextAfter int64 `json:"nextAfter,omitempty"`
	// Truncated is true when some of the thread is not here: more
	// descendants, or ancestors beyond the 1000 nearest.
	Truncated bool `json:"truncated"`
}

// Thread returns a message with its ancestors and its first descendants.
func (c *Client) Thread(ctx context.Context, conversationID, messageID string) (*Thread, error) {
	return c.ThreadAfter(ctx, conversationID, messageID, 0)
}

// ThreadAfter is Thread with the descendants after seq after: the page
// that a Thread's NextAfter names.
func (c *Client) ThreadAfter(ctx context.Context, conversationID, messageID string, after int64) (*Thread, error) {
	path := convPath(conversationID, "/messages/"+url.PathEscape(messageID)+"/thread")
	if after > 0 {
		path += "?after=" + strconv.FormatInt(after, 10)
	}
	return call[Thread](ctx, c, http.MethodGet, path, nil)
}

// each iterates over the items of pages read by page(at), which returns a
// page's items and where the next page starts: an after seq or a cursor,
// the zero value on the last page.
func each[T any, C comparable](page func(at C) ([]T, C, error), at C) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, next, err := page(at)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			var last C
			if next == last {
				return
			}
			at = next
		}
	}
}

// withQuery appends q to path, if it holds anything.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
