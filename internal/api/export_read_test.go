package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/store"
)

// gatedReads is a store whose next read of message rows in seq order (an
// export's, not a stream snapshot's newest rows) waits at a gate, once
// armed: the export is held in the middle of reading the store, as that
// of a large conversation is for seconds.
type gatedReads struct {
	store.Store
	armed atomic.Bool
	held  chan struct{} // closed when a read reaches the gate
	open  chan struct{} // closed to let it through
}

func (g *gatedReads) gate(p store.ListMessagesParams) {
	if !p.Latest && g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.open
	}
}

func (g *gatedReads) ListMessagesRaw(ctx context.Context, p store.ListMessagesParams) ([]store.RawMessage, error) {
	g.gate(p)
	return g.Store.ListMessagesRaw(ctx, p)
}

func (g *gatedReads) ReadSnapshot(ctx context.Context, fn func(store.Reader) error) error {
	return g.Store.ReadSnapshot(ctx, func(r store.Reader) error { return fn(gatedReader{Reader: r, g: g}) })
}

type gatedReader struct {
	store.Reader
	g *gatedReads
}

func (r gatedReader) ListMessagesRaw(ctx context.Context, p store.ListMessagesParams) ([]store.RawMessage, error) {
	r.g.gate(p)
	return r.Reader.ListMessagesRaw(ctx, p)
}

// TestExportDoesNotHoldWriters: while a viewer's export is in the middle
// of reading the conversation from the store (held there), a message
// posted to it is answered, before the export reads one row more; the
// export then holds the conversation as it was when it began, without
// the message. And while an export is held unread by a client that does
// not read it, writes go on too. On SQLite and on PostgreSQL.
func TestExportDoesNotHoldWriters(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		exportWhileWriting(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Schema(t)
		exportWhileWriting(t, func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, url) })
	})
}

func exportWhileWriting(t *testing.T, open func(context.Context) (store.Store, error)) {
	g := &gatedReads{held: make(chan struct{}), open: make(chan struct{})}
	b, _ := setupWrapped(t, open, func(st store.Store) store.Store { g.Store = st; return g }, engine.Options{}, runners.Options{}, api.Options{})
	id := b.conversation("alice")
	for i := range 3 {
		b.post(id, b.alice, fmt.Sprint("before ", i), "none")
	}
	head := b.lastSeq(id)

	g.armed.Store(true)
	exported := make(chan response, 1)
	go func() { exported <- b.do("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil) }()
	bound := time.NewTimer(20 * time.Second) // a hang, not a speed: within the bundle's bound on requests
	defer bound.Stop()
	select {
	case <-g.held:
	case r := <-exported:
		t.Fatalf("the export ended without reading rows: %d %s", r.status, r.raw)
	case <-bound.C:
		t.Fatal("the export never read the conversation's rows")
	}
	posted := make(chan error, 1)
	go func() {
		req := b.request("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"id": "during", "content": "while it exports"})
		resp, err := http.DefaultClient.Do(req.WithContext(context.Background()))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		posted <- err
	}()
	select {
	case err := <-posted:
		if err != nil {
			t.Fatalf("a write while an export reads: %v", err)
		}
	case <-bound.C:
		close(g.open)
		t.Fatal("a write to the conversation waited for an export that was reading it")
	}
	close(g.open)
	r := <-exported
	b.want(r, 200, "")
	lines := strings.Split(strings.TrimSpace(string(r.raw)), "\n")
	var h struct{ LastSeq float64 }
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.LastSeq != head {
		t.Fatalf("the export's header says lastSeq %v (%v), want %v, the head when it began", h.LastSeq, err, head)
	}
	if strings.Contains(string(r.raw), `"during"`) || len(lines) != 1+int(head)+3 {
		t.Fatalf("the export holds what was written after it began (%d lines):\n%s", len(lines), r.raw)
	}

	// An export its client does not read holds nothing of the writers'.
	req := b.request("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	b.post(id, b.alice, "while an export waits for its client", "none")
}

// TestExportSpoolIsBounded: an export is written to the server's spool,
// where no file of it can be seen; one over the bound of one export is
// 413 too_large, and one that would take the spool over its bound in all
// is 409 busy until the others are sent.
func TestExportSpoolIsBounded(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "spool")
	sp, _, err := spool.Open(dir, spool.Limits{MaxFile: 12 << 20, MaxTotal: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, engine.Options{}, api.Options{Spool: sp, WriteTimeout: time.Minute})
	big, large := tracesOf(b, 10), tracesOf(b, 14) // about 10 and 14 MiB
	r := b.do("GET", "/v1/conversations/"+large+"/export?format=json", b.viewer, nil)
	if r.status != http.StatusRequestEntityTooLarge || r.code() != parley.ETOOLARGE || !strings.Contains(string(r.raw), "-max-export-bytes") {
		t.Fatalf("an export over the bound of one: %d, %d bytes: %.300s", r.status, len(r.raw), r.raw)
	}

	// One export held by a client that reads a line of it, through a
	// small receive buffer: the server holds the rest to send.
	slow := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10) })
		return errors.Join(err, serr)
	}}).DialContext}}
	held, err := slow.Do(b.request("GET", "/v1/conversations/"+big+"/export?format=jsonl", b.viewer, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	if held.StatusCode != http.StatusOK || held.ContentLength < 10<<20 {
		t.Fatalf("the first export: %d, %d bytes", held.StatusCode, held.ContentLength)
	}
	if _, err := bufio.NewReader(held.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("an export being sent has a name in the spool: %v", left)
	}
	if used := sp.Used(); used != held.ContentLength {
		t.Fatalf("the spool counts %d bytes, the export being sent holds %d", used, held.ContentLength)
	}
	r = b.do("GET", "/v1/conversations/"+big+"/export?format=jsonl", b.viewer, nil)
	if r.status != http.StatusConflict || r.code() != parley.EBUSY || !strings.Contains(string(r.raw), "-export-spool-bytes") {
		t.Fatalf("an export past the bound of all: %d, %d bytes: %.300s", r.status, len(r.raw), r.raw)
	}
	// Once it is sent, its bytes are free again.
	if _, err := io.Copy(io.Discard, held.Body); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); sp.Used() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spool still counts %d bytes once the export was sent", sp.Used())
		}
	}
	b.want(b.do("GET", "/v1/conversations/"+big+"/export?format=jsonl", b.viewer, nil), 200, "")
}

// tracesOf makes a conversation of n trace events of 1 MiB each, written
// to the store straight (the API bounds a trace's payload), and returns
// its id.
func tracesOf(b *bundle, n int) string {
	b.t.Helper()
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Title: "large", Participants: []string{"alice"}})
	if err != nil {
		b.t.Fatal(err)
	}
	id := v.Conversation.ID
	data, _ := json.Marshal(map[string]string{"payload": strings.Repeat("x", 1<<20)})
	for seq := int64(2); seq < int64(n)+2; seq++ {
		e := parley.Event{ConversationID: id, Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: data}
		if err := b.db.Append(b.ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq - 1, Events: []parley.Event{e}}); err != nil {
			b.t.Fatal(err)
		}
	}
	return id
}
