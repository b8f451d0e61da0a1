package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// counters are the run's running totals; the window's figures are the
// difference of two snapshots.
type counters struct {
	deltasSent, deltasAcked, toolAcked, textBytes            atomic.Int64
	events, chunks, deltasDelivered                          atomic.Int64
	prompts, promptsAnswered, promptsSkipped                 atomic.Int64
	runnerErrors, subscriberErrors, promptErrors, procErrors atomic.Int64
}

type snapshot struct {
	deltasAcked, events, deltasDelivered, errors int64
}

func (c *counters) snap() snapshot {
	return snapshot{deltasAcked: c.deltasAcked.Load(), events: c.events.Load(), deltasDelivered: c.deltasDelivered.Load(),
		errors: c.runnerErrors.Load() + c.subscriberErrors.Load() + c.promptErrors.Load()}
}

// bench is one run in progress.
type bench struct {
	cfg    Config
	start  time.Time
	url    string   // the first node's
	urls   []string // every node's
	token  string
	hc     *http.Client
	client *client.Client   // the first node's
	nodes  []*client.Client // one per node
	convs  []*conversation

	// The measured window, in nanoseconds since start (MaxInt64: not yet).
	winStart, winEnd atomic.Int64
	cnt              counters
	lat, ack         latencies // delta → subscriber, delta → ack, for deltas sent in the window
	toolAck          latencies // tool-update → ack, for those sent in the window

	errMu      sync.Mutex
	errSamples []string
}

// maxErrorSamples bounds the distinct error messages a report keeps.
const maxErrorSamples = 10

func (b *bench) now() time.Duration { return time.Since(b.start) }

func (b *bench) inWindow(t time.Duration) bool {
	return int64(t) >= b.winStart.Load() && int64(t) < b.winEnd.Load()
}

// fail counts an error in c and keeps a sample of its message.
func (b *bench) fail(c *atomic.Int64, err error) {
	c.Add(1)
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	b.errMu.Lock()
	defer b.errMu.Unlock()
	for _, s := range b.errSamples {
		if s == msg {
			return
		}
	}
	if len(b.errSamples) < maxErrorSamples {
		b.errSamples = append(b.errSamples, msg)
	}
}

// Run performs one bench run as cfg says and returns its report. It returns
// an error when the run could not be done (no server, a refused
// conversation, ctx canceled); errors during the load are counted in the
// report instead.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, start: time.Now()}
	b.winStart.Store(math.MaxInt64)
	b.winEnd.Store(math.MaxInt64)
	var cleanups []func() error
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			if cerr := cleanups[i](); cerr != nil && err == nil {
				rep, err = nil, cerr
			}
		}
	}()
	rep = newReport(cfg)

	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "parley-bench-"); err != nil {
			return nil, err
		}
		if !cfg.Keep {
			cleanups = append(cleanups, func() error { return os.RemoveAll(dir) })
		}
	}
	var sz sizer
	var proc *serverProc     // the first node, whose RSS and CPU are measured
	var others []*serverProc // the other nodes
	pid := cfg.ServerPID
	ceilingDir := dir
	if cfg.Server == "" {
		args := []string{"-log-level", "warn"}
		if cfg.Postgres != "" {
			schema, schemaURL, err := createSchema(ctx, cfg.Postgres, "parley_bench_")
			if err != nil {
				return nil, err
			}
			if !cfg.Keep {
				cleanups = append(cleanups, func() error { return dropSchema(cfg.Postgres, schema) })
			}
			rep.Store, rep.StoreLocation = "postgres", "schema "+schema
			args = append(args, "-postgres="+schemaURL)
			s, err := newPGSizer(ctx, cfg.Postgres, schema)
			if err != nil {
				return nil, err
			}
			sz = s
		} else {
			dbPath := filepath.Join(dir, randomName("parley-bench-")+".db")
			if !cfg.Keep {
				cleanups = append(cleanups, func() error { return removeSQLite(dbPath) })
			}
			rep.Store, rep.StoreLocation = "sqlite", dbPath
			args = append(args, "-postgres=", "-db", dbPath, "-sqlite-sync", cfg.SQLiteSync)
			s, err := newSQLiteSizer(dbPath)
			if err != nil {
				return nil, err
			}
			sz = s
		}
		cleanups = append(cleanups, func() error { sz.close(); return nil })
		for n := range cfg.Nodes {
			p, err := startServer(ctx, cfg.ServeCommand, args)
			if err != nil {
				return nil, err
			}
			cleanups = append(cleanups, func() error { _ = p.stop(); return nil }) // a failed stop is reported below
			b.urls = append(b.urls, p.url)
			if n == 0 {
				proc, b.url, pid = p, p.url, p.cmd.Process.Pid
			} else {
				others = append(others, p)
			}
		}
	} else {
		b.url, b.token = strings.TrimRight(cfg.Server, "/"), cfg.Token
		b.urls = []string{b.url}
		switch {
		case cfg.Postgres != "":
			s, err := newPGSizer(ctx, cfg.Postgres, "")
			if err != nil {
				return nil, err
			}
			sz, rep.Store, rep.StoreLocation = s, "postgres", "the database of -postgres"
		case cfg.DBPath != "":
			s, err := newSQLiteSizer(cfg.DBPath)
			if err != nil {
				return nil, err
			}
			sz, rep.Store, rep.StoreLocation, ceilingDir = s, "sqlite", cfg.DBPath, filepath.Dir(cfg.DBPath)
		default:
			rep.Store, rep.StoreLocation = "unknown", "not measured (give -db or -postgres)"
		}
		if sz != nil {
			cleanups = append(cleanups, func() error { sz.close(); return nil })
		}
	}
	rep.Server = b.url
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	cleanups = append(cleanups, func() error { tr.CloseIdleConnections(); return nil })
	b.hc = &http.Client{Transport: tr}
	for _, u := range b.urls {
		b.nodes = append(b.nodes, client.New(u, b.token).WithHTTPClient(b.hc))
	}
	b.client = b.nodes[0]

	if err := b.load(ctx, rep, sz, pid); err != nil {
		return nil, err
	}
	for _, p := range append(others, proc) {
		if p == nil {
			continue
		}
		if err := p.stop(); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("a server did not exit cleanly: %v: %s", err, lastLines(p.stderr.String(), 5)))
		}
	}
	if err := b.ceilings(ctx, rep, ceilingDir); err != nil {
		return nil, err
	}
	rep.ratios()
	return rep, nil
}

// load sets up the conversations, streams, drains and fills in the Parley
// side of the report.
func (b *bench) load(ctx context.Context, rep *Report, sz sizer, pid int) error {
	cfg := b.cfg
	b.convs = make([]*conversation, cfg.Conversations)
	err := parallel(ctx, cfg.Conversations, 16, func(ctx context.Context, i int) error {
		v, err := b.client.CreateConversation(ctx, client.NewConversation{Title: fmt.Sprintf("parley bench %d", i), TurnPolicy: parley.PolicyFree})
		if err != nil {
			return fmt.Errorf("creating a conversation: %w", err)
		}
		b.convs[i] = &conversation{id: v.Conversation.ID, index: i, promptCh: make(chan struct{}, 1)}
		return nil
	})
	if err != nil {
		return err
	}

	// Subscribers first, so that each sees every delta; 64 connect at a time.
	subCtx, subCancel := context.WithCancel(context.Background())
	var subWG sync.WaitGroup
	defer func() { subCancel(); subWG.Wait() }()
	var all []*subscriber
	for _, c := range b.convs {
		for j := range cfg.Subscribers {
			// On the nodes after its runner's, so that with several nodes
			// what it gets has crossed from one node to another.
			node := (c.index + 1 + j%max(len(b.nodes)-1, 1)) % len(b.nodes)
			s := &subscriber{b: b, c: c, ready: make(chan struct{}), index: len(all), node: b.nodes[node]}
			c.subs = append(c.subs, s)
			all = append(all, s)
		}
	}
	for i := 0; i < len(all); i += 64 {
		batch := all[i:min(i+64, len(all))]
		for _, s := range batch {
			subWG.Go(func() { s.run(subCtx) })
		}
		for _, s := range batch {
			select {
			case <-s.ready:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return errors.New("a subscriber did not get its init frame within 30s")
			}
		}
	}
	if n := b.cnt.subscriberErrors.Load(); n > 0 {
		return fmt.Errorf("%d subscribers failed to connect: %s", n, strings.Join(b.errSamples, "; "))
	}
	err = parallel(ctx, len(b.convs), 16, func(ctx context.Context, i int) error {
		r, err := b.connectRunner(ctx, b.convs[i])
		if err != nil {
			return fmt.Errorf("connecting a runner: %w", err)
		}
		r.index = i
		b.convs[i].runner = r
		return nil
	})
	defer func() {
		for _, c := range b.convs {
			if c.runner != nil {
				c.runner.close()
			}
		}
	}()
	if err != nil {
		return err
	}

	var size0 int64
	if sz != nil {
		if size0, err = sz.size(ctx); err != nil {
			return err
		}
	}
	stop := make(chan struct{})
	var runWG sync.WaitGroup
	for _, c := range b.convs {
		runWG.Go(func() { c.runner.run(stop) })
	}
	if cfg.PromptRate > 0 {
		runWG.Go(func() { b.prompter(stop) })
	}
	progressDone := make(chan struct{})
	peakRSS := &atomic.Int64{}
	go func() { defer close(progressDone); b.progress(stop, pid, peakRSS) }()

	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	err = sleep(cfg.Warmup)
	var p0, p1, self0, self1 procSample
	var s0, s1 snapshot
	var w0, w1 writerSample
	if err == nil {
		w0 = b.sampleWriter(ctx)
		p0, self0, s0 = b.sampleProc(pid), b.sampleProc(os.Getpid()), b.cnt.snap()
		b.winStart.Store(int64(b.now()))
		err = sleep(cfg.Duration)
		b.winEnd.Store(int64(b.now()))
		p1, self1, s1 = b.sampleProc(pid), b.sampleProc(os.Getpid()), b.cnt.snap()
		w1 = b.sampleWriter(ctx)
	}
	close(stop)
	<-progressDone
	waited := make(chan struct{})
	go func() { runWG.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		for _, c := range b.convs {
			c.runner.close()
		}
		<-waited
		rep.Warnings = append(rep.Warnings, "the runners did not finish their messages within 30s of the end; closed")
	}
	if err != nil {
		return err
	}
	drained := b.drain(ctx, 30*time.Second)
	if !drained {
		rep.Warnings = append(rep.Warnings, "the subscribers had not caught up with the runners 30s after the end")
	}
	if sz != nil {
		size1, err := sz.size(ctx)
		if err != nil {
			return err
		}
		rep.Storage = Storage{Method: sz.describe(), Bytes: size1 - size0, TextBytes: b.cnt.textBytes.Load()}
		if rep.Storage.TextBytes > 0 {
			rep.Storage.BytesPerTextByte = float64(rep.Storage.Bytes) / float64(rep.Storage.TextBytes)
		}
	}
	subCancel()
	subWG.Wait()
	b.fillLoad(rep, s0, s1, p0, p1, self0, self1, peakRSS.Load(), pid)
	rep.Writer = writerOver(w0, w1)
	return nil
}

// drain waits until every subscriber has seen the last seq acked to its
// conversation's runner.
func (b *bench) drain(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		behind := false
		for _, c := range b.convs {
			for _, s := range c.subs {
				if s.lastSeq.Load() < c.lastSeq.Load() {
					behind = true
				}
			}
		}
		if !behind {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) sampleProc(pid int) procSample {
	if pid <= 0 {
		return procSample{at: time.Now()}
	}
	s, err := readProc(pid)
	if err != nil {
		b.fail(&b.cnt.procErrors, fmt.Errorf("reading /proc/%d: %w", pid, err))
	}
	return s
}

// progress prints a line a second until stop closes, and tracks the
// server's peak RSS in the window.
func (b *bench) progress(stop <-chan struct{}, pid int, peakRSS *atomic.Int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := b.cnt.snap()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cur := b.cnt.snap()
		phase := "warmup"
		if b.winStart.Load() != math.MaxInt64 {
			phase = "measure"
			if pid > 0 {
				if s, err := readProc(pid); err == nil && s.rss > peakRSS.Load() {
					peakRSS.Store(s.rss)
				}
			}
		}
		if b.cfg.Progress != nil {
			fmt.Fprintf(b.cfg.Progress, "%6.1fs %-7s  deltas/s %9s  events/s %9s  errors %d\n", b.now().Seconds(), phase,
				commas(float64(cur.deltasAcked-last.deltasAcked)), commas(float64(cur.events-last.events)), cur.errors)
		}
		last = cur
	}
}

// prompter queues prompts at cfg.PromptRate, each to a conversation that
// has none outstanding, 16 requests in flight at most.
func (b *bench) prompter(stop <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 16)
	pace := newPacer(b.cfg.PromptRate)
	next := 0
	for pace.wait(stop) {
		var c *conversation
		for range len(b.convs) {
			cand := b.convs[next%len(b.convs)]
			next++
			if cand.promptBusy.CompareAndSwap(false, true) {
				c = cand
				break
			}
		}
		if c == nil {
			b.cnt.promptsSkipped.Add(1)
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.promptBusy.Store(false)
			b.cnt.promptsSkipped.Add(1)
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := b.client.Ask(ctx, c.id, "bench-user", "How is the load test going?", "followup"); err != nil {
				b.fail(&b.cnt.promptErrors, fmt.Errorf("prompt: %w", err))
				c.promptBusy.Store(false)
				return
			}
			c.promptsSent.Add(1)
			b.cnt.prompts.Add(1)
		})
	}
}

// parallel runs fn for 0..n-1 with at most width at once; the first error
// stops the others.
func parallel(ctx context.Context, n, width int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// removeSQLite removes a database file and its WAL and shared-memory files.
func removeSQLite(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
