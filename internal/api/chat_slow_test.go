package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
	dto "github.com/prometheus/client_model/go"
)

// TestSlowChatClientLosesNothing: a chat client that reads slower than
// the answer is written has its subscription dropped (its queue holds 4
// events here), and the stream takes it up again from the last event it
// read: the client still gets every delta once, in order. Under -short
// (the race pass) the answer is 500 deltas, not 2,000: still far more
// than the client's socket buffers and queue hold.
func TestSlowChatClientLosesNothing(t *testing.T) {
	t.Parallel()
	metrics := engine.NewMetrics(nil)
	// Small socket buffers on both ends, so that a client that reads
	// nothing holds the stream up after a few KiB.
	small := func(opt int) func(_, _ string, c syscall.RawConn) error {
		return func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
		}
	}
	// The client reads nothing until the runner has sent all: each batch of
	// writes may wait that long (on a loaded machine, longer than the
	// default 10 s), which is not what this test is about.
	aopts := api.Options{WriteTimeout: 10 * time.Minute}
	b := setupListening(t, engine.Options{SubscriberBuffer: 4, Metrics: metrics}, aopts, func() net.Listener {
		l, err := (&net.ListenConfig{Control: small(syscall.SO_SNDBUF)}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
	id := b.conversation("alice")
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: small(syscall.SO_RCVBUF)}).DialContext}}
	body, _ := json.Marshal(chatBody(id, "u1", "Say a lot"))
	req, _ := http.NewRequestWithContext(b.ctx, "POST", b.url+"/v1/chat", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+b.bob)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	var want strings.Builder
	deltas := 2000
	if testing.Short() {
		deltas = 500
	}
	for i := range deltas {
		// "<" is six bytes on the wire (\u003c): 3 MB of chunks for 500 KB of text.
		delta := strings.Repeat("<", 249) + string(rune('a'+i%26))
		want.WriteString(delta)
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"`+delta+`"}`)
	}
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)

	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	last := ""
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = line
		var c struct{ Type, Delta string }
		if json.Unmarshal([]byte(line), &c) == nil && c.Type == "text-delta" {
			got.WriteString(c.Delta)
		}
	}
	if last != "[DONE]" || got.String() != want.String() {
		t.Fatalf("the slow client got %d bytes of %d (last chunk %.80q)", got.Len(), want.Len(), last)
	}
	var m dto.Metric
	if err := metrics.SlowDisconnects.Write(&m); err != nil || m.GetCounter().GetValue() == 0 {
		t.Fatal("the client was never too slow: the test shows nothing")
	}
}

// setupListening is setup with the server on the listener listen makes.
func setupListening(t *testing.T, eopts engine.Options, aopts api.Options, listen func() net.Listener) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, eopts)
	rn := runners.New(eng, db, runners.Options{})
	srv := httptest.NewUnstartedServer(api.New(eng, rn, reads.New(db, eng), aopts))
	srv.Listener.Close()
	srv.Listener = listen()
	srv.Start()
	t.Cleanup(func() { srv.Close(); rn.Close(); eng.Close(); db.Close() })
	b := &bundle{t: t, url: srv.URL, eng: eng, db: db, ctx: ctx}
	for _, tok := range []struct {
		to   *string
		kind parley.TokenKind
		who  string
	}{{&b.admin, parley.TokenAdmin, ""}, {&b.alice, parley.TokenAgent, "alice"}, {&b.bob, parley.TokenAgent, "bob"}, {&b.viewer, parley.TokenViewer, ""}} {
		if *tok.to, _, err = eng.CreateToken(ctx, tok.kind, tok.who, ""); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
