package reads

import (
	"context"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// MaxThread bounds the ancestors and the descendants a thread returns (a
// page of descendants).
const MaxThread = 1000

// maxSummarized is how many ancestors of a thread may be shown whole at
// the most size each: one over pageBytes/maxSummarized is summarized.
const maxSummarized = 64

// Thread is a message with its ancestors and a page of its descendants.
type Thread struct {
	// Root is the thread's root: its first ancestor shown, or the message.
	Root *parley.Message
	// Ancestors are the messages Message replies to, transitively, root
	// first; the furthest are left out past MaxThread or the size bound.
	Ancestors []*parley.Message
	// Message is the message asked for.
	Message *parley.Message
	// Descendants are a page of the messages that reply to Message,
	// transitively, in seq order.
	Descendants []*parley.Message
	// NextAfter, when not 0, is where the next page of descendants starts.
	NextAfter int64
	// Truncated says ancestors were left out or descendants go on.
	Truncated bool
}

// Thread returns a message with its ancestors and a page of its
// descendants after seq after, each bounded in bytes before it is read
// from the store: the nearest ancestors whole while they hold about
// pageBytes, each at most pageBytes/maxSummarized, the others summarized;
// descendants up to about pageBytes, then NextAfter. Messages streaming
// are assembled, wherever they stand (a summary says to fetch the
// message, which assembles it). It returns ENOTFOUND for an unknown
// message.
func (r *Reader) Thread(ctx context.Context, conversationID, messageID string, after int64, pageBytes int) (*Thread, error) {
	id, mid := conversationID, messageID
	m, err := r.st.GetMessage(ctx, id, mid)
	if err != nil {
		return nil, err
	}
	whole := pageBytes / maxSummarized
	anc, err := r.st.Ancestors(ctx, store.ThreadParams{ConversationID: id, MessageID: mid, Limit: MaxThread + 1, MaxBytes: pageBytes, SummarizeOver: whole})
	if err != nil {
		return nil, err
	}
	truncated := len(anc) > MaxThread // the furthest are left out: ask for the thread of the first shown
	if truncated {
		anc = anc[1:]
	}
	desc, err := r.st.Descendants(ctx, store.ThreadParams{ConversationID: id, MessageID: mid, After: after, Limit: MaxThread + 1, MaxBytes: pageBytes})
	if err != nil {
		return nil, err
	}
	all := append(append([]*parley.Message{m}, anc...), desc...)
	shown := slices.DeleteFunc(slices.Clone(all), func(m *parley.Message) bool { return m.Summarized != nil })
	if err := r.assemble(ctx, id, shown); err != nil {
		return nil, err
	}
	for i, j := 0, 0; i < len(all); i++ {
		if all[i].Summarized == nil {
			all[i], j = shown[j], j+1
		}
	}
	m, anc, desc = all[0], all[1:1+len(anc)], all[1+len(anc):]
	// An ancestor assembled from its chunks may have grown past the bound.
	for i, a := range anc {
		if a.Summarized == nil && a.Status == parley.StatusStreaming {
			if n := Size([]*parley.Message{a}); n > whole {
				anc[i] = a.Summarize(n)
			}
		}
	}
	t := &Thread{Root: m, Ancestors: anc, Message: m, Descendants: desc, Truncated: truncated}
	if len(anc) > 0 {
		t.Root = anc[0]
	}
	if len(desc) > MaxThread || len(desc) > 0 && Size(desc) >= pageBytes {
		t.Descendants = desc[:min(len(desc), MaxThread)]
		t.NextAfter = t.Descendants[len(t.Descendants)-1].Seq
		t.Truncated = true
	}
	return t, nil
}
