package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
)

// rowMeter is a store that counts the bytes of text of the messages it
// hands out whole: what the server read of them.
type rowMeter struct {
	store.Store
	read atomic.Int64
}

func (m *rowMeter) GetMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	msg, err := m.Store.GetMessage(ctx, conversationID, messageID)
	if msg != nil {
		m.read.Add(int64(len(msg.Content)))
	}
	return msg, err
}

func (m *rowMeter) ListMessages(ctx context.Context, p store.ListMessagesParams) ([]*parley.Message, error) {
	ms, err := m.Store.ListMessages(ctx, p)
	for _, msg := range ms {
		m.read.Add(int64(len(msg.Content)))
	}
	return ms, err
}

func (m *rowMeter) ListMessagesRaw(ctx context.Context, p store.ListMessagesParams) ([]store.RawMessage, error) {
	rows, err := m.Store.ListMessagesRaw(ctx, p)
	for _, r := range rows {
		m.read.Add(int64(len(r.Data)))
	}
	return rows, err
}

// TestLookupsDoNotReadLargeRows: what a write or a page looks up of other
// messages (a reply's parent, an id or a turnId it names, what a revert
// removes, the message whose replies are listed) is read without their
// rows: however large those messages are, the server reads none of their
// text for it.
func TestLookupsDoNotReadLargeRows(t *testing.T) {
	t.Parallel()
	meter := &rowMeter{}
	b, _ := setupWrapped(t, nil, func(st store.Store) store.Store { meter.Store = st; return meter }, engine.Options{}, runners.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	large := strings.Repeat("large ", 40<<10) // 240 KB
	for i := range 10 {
		b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": fmt.Sprint("m", i), "content": large}), 201, "")
	}
	meter.read.Store(0)
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "reply", "replyTo": "m0", "turnId": "m0", "content": "small"}), 201, "")
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "m2", "content": "an id taken"}), 409, parley.EBUSY)
	b.want(b.do("GET", base+"/messages/m3/replies", b.viewer, nil), 200, "")
	r := b.do("POST", base+"/revert", b.alice, map[string]any{"messageId": "m1"})
	b.want(r, 200, "")
	if removed := r.body["removed"].([]any); len(removed) != 10 {
		t.Fatalf("the revert removed %v", removed)
	}
	if n := meter.read.Load(); n >= int64(len(large)) {
		t.Fatalf("the look-ups read %d bytes of text, more than one large message holds (%d)", n, len(large))
	}
}
