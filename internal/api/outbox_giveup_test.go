package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/deliveries"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/prometheus/client_golang/prometheus"
)

// stepClock is a clock a test moves on.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// hookServer is a channel webhook that answers every post with status,
// and counts them.
type hookServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls int
}

func newHook(t *testing.T, status int) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls++
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// channelReplies has the runner of alice answer one prompt from each of
// channels (type/id pairs) in a new conversation: each reply goes to the
// outbox.
func channelReplies(t *testing.T, b *bundle, channels ...string) {
	t.Helper()
	id := b.conversation()
	run := b.runnerConn(id, b.alice)
	for i, ch := range channels {
		typ, cid, _ := strings.Cut(ch, "/")
		b.want(b.do("POST", "/v1/conversations/"+id+"/prompts", b.admin, map[string]any{"agentId": "human", "id": fmt.Sprintf("p%d", i),
			"content": "hi", "channel": map[string]any{"type": typ, "id": cid}}), 201, "")
		until(t, b, run, "prompt")
		answer(t, b, run, fmt.Sprintf("r%d", i), "hello")
	}
}

// deliveries lists the outbox's rows of a status as token.
func (b *bundle) deliveries(token, status string) response {
	b.t.Helper()
	return b.do("GET", "/v1/admin/deliveries?status="+status, token, nil)
}

// listed is the outbox's rows of a status, as an admin lists them.
func (b *bundle) listed(status string) []any {
	b.t.Helper()
	r := b.deliveries(b.admin, status)
	b.want(r, 200, "")
	return r.body["deliveries"].([]any)
}

// TestUndeliverableRepliesAreGivenUp: replies whose webhook answers 500
// are tried a bounded number of times (one probe at a time while it fails,
// with a backoff that grows), then given up once -delivery-give-up has
// passed (a clock the test moves on): each is kept with status failed, its
// last error and attempts, listed to an admin (to no viewer or agent),
// counted in the metric, and logged once, with no word of the webhook's
// URL, which holds a secret; and removed after the retention.
func TestUndeliverableRepliesAreGivenUp(t *testing.T) {
	t.Parallel()
	const replies, giveUp = 5, time.Minute
	clock := &stepClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	var logs logBuffer
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	b := setup(t, engine.Options{Now: clock.Now, Logger: logger, Metrics: engine.NewMetrics(reg)}, api.Options{Gatherer: reg})
	hook := newHook(t, http.StatusInternalServerError)
	secret := hook.URL + "/services/T0/SECRETPATH?token=SECRETQUERY"
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go deliveries.New(b.db, deliveries.Options{Webhooks: map[string]string{"slack": secret}, Poll: 2 * time.Millisecond,
		Backoff: time.Second, MaxBackoff: 8 * time.Second, GiveUp: giveUp, Lease: 30 * time.Second, Retention: time.Hour,
		Now: clock.Now, Logger: logger, Metrics: deliveries.NewMetrics(reg)}).Deliver(ctx)
	channelReplies(t, b, "slack/C1", "slack/C2", "slack/C3", "slack/C4", "slack/C5")

	// The clock moves on a quarter second at a time, for as long as a
	// delivery may be tried and a lease more; then on, until every reply
	// is given up (however late the outbox's poller comes).
	for end := clock.Now().Add(giveUp + time.Minute); clock.Now().Before(end); {
		clock.add(250 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the outbox's poller see it
	}
	waitFor(t, func() bool {
		clock.add(250 * time.Millisecond)
		return len(b.listed("failed")) == replies
	})
	// One probe at a time while the webhook fails, after a backoff from
	// half a second that doubles up to 4 to 8 seconds: about 20 in a
	// minute for all the replies, where each alone would have made as
	// many. And a final try each, at most.
	t.Logf("%d posts to the failing webhook for %d replies", hook.count(), replies)
	if n := hook.count(); n < 1 || n > 20+replies {
		t.Fatalf("%d posts to a failing webhook for %d replies over %s; want 1 to %d", n, replies, giveUp, 20+replies)
	}
	// Each is kept with why and its attempts (none for one whose channel's
	// webhook was failing whenever it was due).
	r := b.deliveries(b.admin, "failed")
	attempts := 0
	for _, d := range r.body["deliveries"].([]any) {
		d := d.(map[string]any)
		if d["status"] != "failed" || !strings.HasSuffix(d["lastError"].(string), "webhook answered HTTP 500") || d["gaveUpAt"] == nil {
			t.Fatalf("a given-up delivery lists as %v", d)
		}
		attempts += int(d["attempts"].(float64))
	}
	if attempts != hook.count() {
		t.Fatalf("the given-up deliveries count %d attempts; the webhook had %d posts", attempts, hook.count())
	}
	if strings.Contains(string(r.raw), "SECRET") {
		t.Fatalf("the listing shows the webhook's URL: %s", r.raw)
	}
	for _, tok := range []string{b.viewer, b.alice} {
		b.want(b.deliveries(tok, "failed"), 403, "forbidden")
	}
	log := logs.String()
	if n := strings.Count(log, "gave up a channel delivery"); n != replies || strings.Contains(log, "SECRET") {
		t.Fatalf("the log says %d times that a delivery was given up (want %d), or names the webhook's URL:\n%s", n, replies, log)
	}
	m := b.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(m.raw), fmt.Sprintf(`parley_channel_deliveries_total{result="given_up"} %d`, replies)) {
		t.Fatalf("metrics:\n%s", m.raw)
	}
	// Kept for the retention (an hour here), then removed.
	for range 3 * 60 {
		clock.add(30 * time.Second)
		time.Sleep(time.Millisecond)
	}
	waitFor(t, func() bool {
		clock.add(time.Minute)
		return len(b.listed("")) == 0
	})
}

// TestPermanentFailuresAreGivenUpAtOnce: a reply whose webhook answers 404,
// and one to a channel type with no webhook, are given up after their first
// attempt, which trying again cannot mend.
func TestPermanentFailuresAreGivenUpAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	hook := newHook(t, http.StatusNotFound)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go deliveries.New(b.db, deliveries.Options{Webhooks: map[string]string{"slack": hook.URL}, Poll: 5 * time.Millisecond, Backoff: 10 * time.Millisecond}).Deliver(ctx)
	channelReplies(t, b, "slack/C1", "telegram/42")
	var failed []any
	waitFor(t, func() bool {
		failed = b.listed("failed")
		return len(failed) == 2
	})
	why := map[string]string{}
	for _, d := range failed {
		d := d.(map[string]any)
		if d["attempts"].(float64) != 1 {
			t.Fatalf("given up after %v attempts, want 1: %v", d["attempts"], d)
		}
		why[d["channel"].(map[string]any)["type"].(string)] = d["lastError"].(string)
	}
	if why["slack"] != "webhook answered HTTP 404" || why["telegram"] != `no webhook is configured for channel type "telegram"` {
		t.Fatalf("given up because %v", why)
	}
	if n := hook.count(); n != 1 {
		t.Fatalf("%d posts to a webhook that answers 404, want 1", n)
	}
}
