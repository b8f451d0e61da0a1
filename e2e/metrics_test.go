package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsTellTheWriter: parley serve on SQLite serves the metrics of
// its one writer on /metrics, and they move with the writes it commits:
// commits, the writes in them (never fewer), the time it was busy (more
// than none, and not more than the server has run), and its queue.
func TestMetricsTellTheWriter(t *testing.T) {
	t.Parallel()
	began := time.Now()
	srv := startServer(t, filepath.Join(t.TempDir(), "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scrape := func() map[string]float64 {
		t.Helper()
		res, err := http.Get(srv.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, name := range []string{sqlitemetrics.CommitsName, sqlitemetrics.WritesName, sqlitemetrics.BusyName, sqlitemetrics.QueueName, sqlitemetrics.SyncName} {
			f, ok := fams[name]
			if !ok || len(f.GetMetric()) != 1 {
				t.Fatalf("/metrics has no %s", name)
			}
			m := f.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				got[name] = c.GetValue()
			} else {
				got[name] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	before := scrape()

	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	const posts = 5
	for i := range posts {
		if _, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "human", Role: parley.RoleUser, Content: "hello", ID: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	after, ran := scrape(), time.Since(began)

	commits := after[sqlitemetrics.CommitsName] - before[sqlitemetrics.CommitsName]
	writes := after[sqlitemetrics.WritesName] - before[sqlitemetrics.WritesName]
	busy := after[sqlitemetrics.BusyName] - before[sqlitemetrics.BusyName]
	if commits < 1+posts || writes < commits {
		t.Fatalf("a conversation and %d posts, each answered once durable, moved the writer's metrics by %v commits of %v writes", posts, commits, writes)
	}
	if busy <= 0 || after[sqlitemetrics.BusyName] > ran.Seconds() {
		t.Fatalf("the writer was busy %vs for them, %vs in all, in a server that ran %v", busy, after[sqlitemetrics.BusyName], ran)
	}
	if q := after[sqlitemetrics.QueueName]; q != 0 {
		t.Fatalf("%v writes queued with every request answered", q)
	}
	if w := after[sqlitemetrics.SyncName]; w < 0 || w > 1 {
		t.Fatalf("the log's sync has waited %vs with every request answered", w)
	}
}
