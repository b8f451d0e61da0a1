package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
	"github.com/parleyhq/parley/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// serveEnv makes the test binary act as `parley serve` (the flags Run passes
// to ServeCommand), so that the tests can start a server as Run does without
// building cmd/parley.
const serveEnv = "PARLEY_LOADGEN_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if err := testServe(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "test serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dbPath := fs.String("db", "", "")
	addr := fs.String("addr", "", "")
	pgURL := fs.String("postgres", "", "")
	fs.String("log-level", "", "")
	sync := fs.String("sqlite-sync", "full", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var db store.Store
	reg := prometheus.NewRegistry()
	if *pgURL != "" {
		pg, err := postgres.Open(ctx, *pgURL)
		if err != nil {
			return err
		}
		db = pg
	} else {
		lite, err := sqlite.Open(ctx, *dbPath, sqlite.Options{Sync: sqlite.Sync(*sync)})
		if err != nil {
			return err
		}
		reg.MustRegister(sqlitemetrics.Collectors(lite)...)
		db = lite
	}
	defer db.Close()
	eng := engine.New(db, engine.Options{})
	rn := runners.New(eng, db, runners.Options{})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.New(eng, rn, reads.New(db, eng), api.Options{Open: true, Gatherer: reg})}
	go srv.Serve(ln)
	<-ctx.Done()
	rn.Close()
	eng.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// smallConfig is a short run: 2 conversations × 2 subscribers.
func smallConfig(transport string) Config {
	return Config{Conversations: 2, Subscribers: 2, Transport: transport, Rate: 150, DeltaBytes: 40, ToolEvery: 7,
		MessageDeltas: 40, PromptRate: 5, Duration: time.Second, Warmup: 300 * time.Millisecond, CeilingDuration: 300 * time.Millisecond}
}

// checkReport asserts what must hold of any clean run, whatever the timing.
func checkReport(t *testing.T, rep *Report, subscribers int) {
	t.Helper()
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if rep.Errors.Total != 0 {
		t.Errorf("errors: %+v", rep.Errors)
	}
	c := rep.Counts
	if c.DeltasAcked == 0 || c.DeltasAcked > c.DeltasSent {
		t.Errorf("deltas acked %d of %d sent", c.DeltasAcked, c.DeltasSent)
	}
	// A chunk event holds one delta, or several sent while a commit was
	// under way: the deltas, counted in the chunks, must each arrive once.
	if c.MissingDeliveries != 0 || c.ExtraDeliveries != 0 || c.ChunksDelivered == 0 || c.ChunksDelivered > c.DeltasAcked*int64(subscribers) {
		t.Errorf("every acked delta should reach each of %d subscribers once: acked %d, chunks delivered %d (missing %d, extra %d)",
			subscribers, c.DeltasAcked, c.ChunksDelivered, c.MissingDeliveries, c.ExtraDeliveries)
	}
	if c.EventsDelivered < c.ChunksDelivered {
		t.Errorf("events delivered %d < chunks delivered %d", c.EventsDelivered, c.ChunksDelivered)
	}
	if c.ToolFramesAcked == 0 {
		t.Error("no tool frames acked")
	}
	if c.TextBytes != c.DeltasAcked*int64(rep.Config.DeltaBytes) {
		t.Errorf("text bytes %d for %d deltas of %d", c.TextBytes, c.DeltasAcked, rep.Config.DeltaBytes)
	}
	for name, l := range map[string]Latency{"subscriber": rep.Latency, "ack": rep.AckLatency, "broadcast": rep.Ceilings.Broadcast.Latency} {
		if l.Samples == 0 || l.P50Ms <= 0 || l.P50Ms > l.P99Ms || l.P99Ms > l.P999Ms || l.P999Ms > l.MaxMs {
			t.Errorf("%s latency not ordered or empty: %+v", name, l)
		}
	}
	if rep.DurableDeltasPerSec <= 0 || rep.EventsDeliveredPerSec <= 0 || rep.DeltasDeliveredPerSec <= 0 || rep.WindowSeconds <= 0 {
		t.Errorf("rates: %v deltas/s, %v events/s, %v deltas/s delivered over %v s", rep.DurableDeltasPerSec, rep.EventsDeliveredPerSec, rep.DeltasDeliveredPerSec, rep.WindowSeconds)
	}
	// Every subscriber gets every delta, some several to a chunk event: the
	// window's deltas delivered are about the deltas acked times the
	// subscribers (the window's edges cut a few either way).
	if want := rep.DurableDeltasPerSec * float64(rep.Config.Subscribers); rep.DeltasDeliveredPerSec < 0.5*want || rep.DeltasDeliveredPerSec > 2*want {
		t.Errorf("deltas delivered %v/s for %v acked/s to %d subscribers each", rep.DeltasDeliveredPerSec, rep.DurableDeltasPerSec, rep.Config.Subscribers)
	}
	if rep.Ceilings.Store.RowsPerSec <= 0 || rep.Ceilings.Store.BytesPerTextByte <= 0 || rep.Ceilings.Broadcast.FramesPerSec <= 0 || rep.Ceilings.Broadcast.FrameBytes <= rep.Config.DeltaBytes {
		t.Errorf("ceilings: %+v", rep.Ceilings)
	}
	if rep.Storage.TextBytes != c.TextBytes || rep.Storage.Bytes <= 0 || rep.Storage.BytesPerTextByte <= 0 {
		t.Errorf("storage: %+v", rep.Storage)
	}
	if r := rep.Ratios; r.DurableDeltas <= 0 || r.EventsDelivered <= 0 || r.DeltasDelivered <= 0 || r.LatencyP50 <= 0 || r.BytesPerTextByte <= 0 {
		t.Errorf("ratios: %+v", r)
	}
	if rep.Process.PID == 0 || rep.Process.RSSMiB <= 0 || rep.Process.PeakRSSMiB < rep.Process.RSSMiB {
		t.Errorf("server process: %+v", rep.Process)
	}
	if c.PromptsAnswered > c.Prompts {
		t.Errorf("%d prompts answered of %d", c.PromptsAnswered, c.Prompts)
	}
}

// checkWriter asserts what the report says of a SQLite server's writer,
// read from its /metrics: it committed in the window, each commit held at
// least one write, and it was busy for some of the window, never more
// than all of it (the share is of its own clock's interval).
func checkWriter(t *testing.T, rep *Report) {
	t.Helper()
	w := rep.Writer
	if w == nil {
		t.Fatal("no SQLite writer in the report")
	}
	if w.CommitsPerSec <= 0 || w.WritesPerCommit < 1 || w.BusyShare <= 0 || w.BusyShare > 1 {
		t.Errorf("SQLite writer: %+v", *w)
	}
}

// TestRunAgainstServer drives a server running in this process over
// loopback, with WebSocket subscribers.
func TestRunAgainstServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng := engine.New(db, engine.Options{})
	defer eng.Close()
	rn := runners.New(eng, db, runners.Options{})
	defer rn.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(sqlitemetrics.Collectors(db)...)
	srv := httptest.NewServer(api.New(eng, rn, reads.New(db, eng), api.Options{Open: true, Gatherer: reg}))
	defer srv.Close()

	cfg := smallConfig(TransportWS)
	cfg.Server, cfg.ServerPID, cfg.DBPath = srv.URL, os.Getpid(), path
	var progress strings.Builder
	cfg.Progress = &progress
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, 2)
	checkWriter(t, rep)
	if rep.Store != "sqlite" || rep.Ceilings.Store.Kind != "sqlite" {
		t.Errorf("store %q, ceiling %q", rep.Store, rep.Ceilings.Store.Kind)
	}
	if !strings.Contains(progress.String(), "deltas/s") {
		t.Errorf("no progress lines: %q", progress.String())
	}
	left, _ := filepath.Glob(filepath.Join(dir, "parley-bench-ceiling-*"))
	if len(left) > 0 {
		t.Errorf("scratch files left behind: %v", left)
	}
}

// TestRunStartsServer lets Run start the server itself (this test binary
// acting as `parley serve`), with SSE subscribers.
func TestRunStartsServer(t *testing.T) {
	t.Setenv(serveEnv, "1")
	cfg := smallConfig(TransportSSE)
	cfg.ServeCommand = []string{os.Args[0]}
	cfg.Dir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, 2)
	checkWriter(t, rep)
	if rep.Process.PID == os.Getpid() {
		t.Error("the server's figures are this process's")
	}
	if left, _ := os.ReadDir(cfg.Dir); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
}

// TestRunPostgres starts a server on PostgreSQL (a schema the run makes and
// drops), when PARLEY_TEST_POSTGRES_URL names a database. The URL carries a
// pool setting, as a user tuning parley serve's pool would pass it: the
// bench's own connections must not send it to the server.
func TestRunPostgres(t *testing.T) {
	base := os.Getenv("PARLEY_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("PARLEY_TEST_POSTGRES_URL is not set: skipping the PostgreSQL run")
	}
	t.Setenv(serveEnv, "1")
	cfg := smallConfig(TransportWS)
	cfg.ServeCommand = []string{os.Args[0]}
	cfg.Dir = t.TempDir()
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	cfg.Postgres = base + sep + "pool_max_conns=8"
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, 2)
	if rep.Store != "postgres" || rep.Ceilings.Store.Kind != "postgres" {
		t.Errorf("store %q, ceiling %q", rep.Store, rep.Ceilings.Store.Kind)
	}
	if rep.Writer != nil {
		t.Errorf("a SQLite writer reported for a PostgreSQL server: %+v", *rep.Writer)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	schema := strings.TrimPrefix(rep.StoreLocation, "schema ")
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1 OR nspname LIKE 'parley_bench_ceiling_%'`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d bench schemas left behind", n)
	}
}

// TestConfigRefused checks that a bad configuration is an error before
// anything is sent.
func TestConfigRefused(t *testing.T) {
	for _, cfg := range []Config{
		{},                                // no server and nothing to start one
		{Server: "ftp://example.invalid"}, // not http
		{Server: "http://127.0.0.1:1", Transport: "carrier-pigeon"},
		{Server: "http://127.0.0.1:1", DeltaBytes: 8},
		{Server: "http://127.0.0.1:1", Postgres: "mysql://x"},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 100000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {0.999, 99900 * time.Microsecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(tc.q)
		if d := got - tc.want; d < -tc.want/50 || d > tc.want/50 {
			t.Errorf("q%v = %v, want %v ± 2%%", tc.q, got, tc.want)
		}
	}
	var empty histogram
	if empty.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 1 << 20, 1<<20 + 12345, 1 << 45} {
		i := bucketOf(v)
		if v < 1<<40 && (v < lowOf(i) || v >= lowOf(i)+widthOf(i)) {
			t.Errorf("%d in bucket %d [%d, %d)", v, i, lowOf(i), lowOf(i)+widthOf(i))
		}
	}
}

func TestStamp(t *testing.T) {
	for _, d := range []time.Duration{0, 1, time.Hour, 1<<63 - 1} {
		b := appendStamped(nil, d, 40)
		if len(b) != 40 {
			t.Fatalf("%d bytes", len(b))
		}
		got, ok := parseStamp(string(b))
		if !ok || got != d {
			t.Errorf("stamp %v read back as %v, %v", d, got, ok)
		}
	}
	if _, ok := parseStamp("short"); ok {
		t.Error("a short payload has a stamp")
	}
	if _, err := parseStampErr(); err == nil {
		t.Error("garbage has a stamp")
	}
}

func parseStampErr() (time.Duration, error) {
	if d, ok := parseStamp("zzzzzzzzzzzzzzzzzzzz"); ok {
		return d, nil
	}
	return 0, errors.New("no stamp")
}

// TestParseReply reads acks as the server writes them without reflection,
// and everything else as encoding/json does.
func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want serverFrame
	}{
		{`{"seq":42,"turnId":"m1","type":"ack"}`, serverFrame{Type: "ack", Seq: 42}},
		{`{"conversationId":"c","seq":7,"turnId":"m1","type":"ack"}`, serverFrame{Type: "ack", Seq: 7}},
		{`{"seq":x,"turnId":"m1","type":"ack"}`, serverFrame{}},
		{`{"type":"error","turnId":"m1","error":{"code":"invalid","message":"no"}}`, func() serverFrame {
			f := serverFrame{Type: "error"}
			f.Error.Code, f.Error.Message = "invalid", "no"
			return f
		}()},
		{`{"type":"prompt","messageId":"p1"}`, serverFrame{Type: "prompt"}},
	} {
		got, err := parseReply([]byte(tc.in))
		var want serverFrame
		werr := json.Unmarshal([]byte(tc.in), &want)
		if (err == nil) != (werr == nil) || got != want || (err == nil && got != tc.want) {
			t.Errorf("parseReply(%s) = %+v, %v; want %+v (encoding/json: %+v, %v)", tc.in, got, err, tc.want, want, werr)
		}
	}
}
