package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/connlimit"
	"github.com/parleyhq/parley/internal/deliveries"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/retention"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tokens"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// runServe is "parley serve": the server, until ctx ends.
func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	return serve(ctx, args, stderr, nil)
}

// serve runs the server until ctx ends. onReady, if set, is called in its
// own goroutine once the server listens, with its URL.
func serve(ctx context.Context, args []string, stderr io.Writer, onReady func(ctx context.Context, url string, log *slog.Logger)) error {
	m := newServeMain(stderr)
	m.onReady = onReady
	if err := m.ParseFlags(args); err != nil {
		return err
	}
	return m.Run(ctx)
}

// serveMain is parley serve: ParseFlags reads and checks its flags, Run
// opens the store, wires the engine, the runners and the API to it,
// starts the background loops and serves until its context ends, and
// Close (which Run calls as it returns) stops it all in a fixed order.
type serveMain struct {
	fs     *flag.FlagSet
	flags  serveFlags
	stderr io.Writer
	// onReady, if set, runs as a loop once the server listens, with its URL.
	onReady func(ctx context.Context, url string, log *slog.Logger)

	// What Run makes, in the order it makes it.
	log     *slog.Logger
	db      store.Store
	where   string // which store, for the log (never the URL: it may hold a password)
	open    bool   // no tokens: every request acts as admin
	spool   *spool.Spool
	reg     *prometheus.Registry
	tokens  *tokens.Keeper
	eng     *engine.Engine
	rn      *runners.Dispatcher
	tasks   *schedule.Scheduler
	handler *api.Server
	ln      *connlimit.Listener
	loops   loops

	closeOnce sync.Once
	closeErr  error
}

// newServeMain returns parley serve with its flags declared, at their
// defaults; usage and errors of the flags go to stderr.
func newServeMain(stderr io.Writer) *serveMain {
	m := &serveMain{fs: newFlags("serve", stderr), stderr: stderr}
	m.flags.define(m.fs)
	return m
}

// ParseFlags reads args and checks each flag's value: an error names the
// flag and what it may be. -h is flag.ErrHelp, with the usage printed.
func (m *serveMain) ParseFlags(args []string) error {
	if err := m.fs.Parse(args); err != nil {
		return err
	}
	if err := m.flags.check(); err != nil {
		return err
	}
	m.log = slog.New(slog.NewTextHandler(m.stderr, &slog.HandlerOptions{Level: m.flags.level}))
	return nil
}

// Run serves until ctx ends or the server fails, then stops everything it
// started (see Close) and returns. Each step below starts only if the
// ones before it succeeded.
func (m *serveMain) Run(ctx context.Context) (err error) {
	defer func() { err = errors.Join(err, m.Close()) }()
	for _, step := range []func(context.Context) error{
		m.openStore,
		m.decideOpen,
		m.openSpool,
		m.newEngine,
		m.sweepImports,
		m.recoverStreams,
		m.startLoops,
		m.newHandler,
		m.startPprof,
		m.listen,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return m.serve(ctx)
}

// Close stops what Run started, in a fixed order: the background loops
// (the last started first, each waited for), the runners, the engine,
// then the store. Run calls it as it returns; calling it again does
// nothing.
func (m *serveMain) Close() error {
	m.closeOnce.Do(func() {
		m.loops.Stop()
		if m.rn != nil {
			m.rn.Close()
		}
		if m.eng != nil {
			m.eng.Close()
		}
		if m.db != nil {
			m.closeErr = m.db.Close()
		}
	})
	return m.closeErr
}

// openStore opens the PostgreSQL database, or else the SQLite file.
func (m *serveMain) openStore(ctx context.Context) error {
	db, where, err := openStore(ctx, m.flags.dbPath, m.flags.pgURL, m.flags.sync, m.log)
	m.db, m.where = db, where
	return err
}

// decideOpen decides whether the server runs open (no tokens), and
// refuses to run open off loopback unless told to.
func (m *serveMain) decideOpen(ctx context.Context) error {
	f := &m.flags
	open, err := openMode(ctx, m.db, f.reopen, m.log)
	if err != nil {
		return err
	}
	m.open = open
	switch {
	case !open:
		return nil
	case !isLoopback(f.addr) && !f.allowOpen:
		return fmt.Errorf("no tokens exist and %s is not a loopback address: create one with 'parley token create -kind admin', or pass -allow-open", f.addr)
	}
	m.log.Warn("running OPEN: no tokens exist, so every request acts as admin (from this machine's names only, and never for another web site); create a token with 'parley token create' to require them", slog.String("addr", f.addr))
	if !isLoopback(f.addr) && len(f.guards.OpenHosts) == 0 {
		m.log.Warn("an open server answers only requests addressed to localhost, 127.0.0.1 or [::1]: name the others it may answer with -open-host")
	}
	return nil
}

// openSpool opens the directory exports and backups are written to
// before they are sent; what a server that died left there is removed
// before anything is served.
func (m *serveMain) openSpool(context.Context) error {
	f := &m.flags
	sp, swept, err := spool.Open(spoolPath(f.spoolDir, f.dbPath, f.pgURL), f.spoolLimits)
	if err != nil {
		return fmt.Errorf("-spool-dir: %w", err)
	}
	m.spool = sp
	if swept > 0 {
		m.log.Info("removed what the last run left in the spool", slog.String("dir", sp.Dir()), slog.Int("files", swept))
	}
	return nil
}

// newEngine makes the metrics' registry, the tokens, the engine (the one
// write path), the scheduled tasks and the runners: their connections, the prompts dispatched to them, and
// the grace period of a runner gone while its message streams.
func (m *serveMain) newEngine(context.Context) error {
	f := &m.flags
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s, ok := m.db.(*sqlite.DB); ok {
		m.reg.MustRegister(sqlitemetrics.Collectors(s)...)
	}
	m.tokens = tokens.New(m.db, tokens.Options{})
	m.eng = engine.New(m.db, engine.Options{Logger: m.log, Metrics: engine.NewMetrics(m.reg), Limits: f.limits, SubscriberBuffer: f.subBuffer, SubscriberBufferBytes: f.subBytes,
		SubscriberMemory: f.subMemory, ImportLease: f.importLease, Connections: m.tokens, CollectWindow: f.collectWindow, TurnLease: f.turnLease, Shared: f.pgURL != ""})
	m.rn = runners.New(m.eng, m.db, runners.Options{Grace: f.grace, PresenceLease: f.runnerLease, Logger: m.log})
	m.tasks = schedule.New(m.db, m.eng, schedule.Options{MaxTasksPerAgent: f.maxTasks, Logger: m.log})
	return nil
}

// sweepImports removes the imports that a crash cut short before
// anything is served, so that their ids can be imported again at once;
// then a loop removes those of servers that die later (on PostgreSQL,
// once their lease ends).
func (m *serveMain) sweepImports(ctx context.Context) error {
	n, err := m.eng.SweepImports(ctx)
	if err != nil {
		return fmt.Errorf("removing unfinished imports: %w", err)
	}
	if n > 0 {
		m.log.Info("removed unfinished imports", slog.Int("imports", n))
	}
	m.loops.Go(ctx, "import sweeper", func(ctx context.Context) { m.eng.SweepImportsEvery(ctx, m.flags.importLease/2) })
	return nil
}

// recoverStreams has the messages that were streaming when the server
// stopped wait for their runners (a grace period).
func (m *serveMain) recoverStreams(ctx context.Context) error {
	n, err := m.eng.RecoverStreams(ctx)
	if err != nil {
		return fmt.Errorf("recovering streaming messages: %w", err)
	}
	if n > 0 {
		m.log.Info("streaming messages wait for their runners", slog.Int("conversations", n), slog.Duration("grace", m.flags.grace))
	}
	return nil
}

// startLoops starts the background loops of the engine and the runners.
func (m *serveMain) startLoops(ctx context.Context) error {
	f := &m.flags
	// Other nodes' writes (none with SQLite): the conversations this node
	// follows catch up as they are written, for its subscribers and runners.
	var broker feed.Broker = feed.Local{}
	if f.pgURL != "" {
		broker = postgres.Broker{URL: f.pgURL}
	}
	m.loops.Go(ctx, "broker", func(ctx context.Context) { broker.Listen(ctx, m.eng.HandleNotice, func() { m.eng.CatchUpAll(ctx) }) })
	// Beneath the notifications, a look at the heads of what it follows
	// every second: a notification lost costs at most that.
	m.loops.Go(ctx, "catch-up", func(ctx context.Context) { m.eng.KeepCaughtUp(ctx, time.Second) })
	// Its runners, for the other nodes (with -postgres): whose streams wait, and guidance.
	m.loops.Go(ctx, "runner presence", m.rn.KeepPresence)
	m.loops.Go(ctx, "deliveries", deliveries.New(m.db, deliveries.Options{Webhooks: f.webhooks, GiveUp: time.Duration(f.giveUp), Retention: time.Duration(f.deliveryRetention),
		Logger: m.log, Metrics: deliveries.NewMetrics(m.reg)}).Deliver)
	m.loops.Go(ctx, "tasks", func(ctx context.Context) { m.tasks.RunTasks(ctx, time.Second) })
	if r := time.Duration(f.chunkRetention); r > 0 {
		m.loops.Go(ctx, "chunk retention", retention.New(m.db, retention.Options{Retention: r, Logger: m.log}).Run)
	}
	return nil
}

// newHandler makes the HTTP API, and the loop that ends the connections
// of tokens revoked elsewhere.
func (m *serveMain) newHandler(ctx context.Context) error {
	db := m.db
	m.handler = api.New(m.eng, m.rn, reads.New(m.db, m.eng), m.tokens, m.tasks, api.Options{
		Open:           m.open,
		Logger:         m.log,
		Gatherer:       m.reg,
		Registerer:     m.reg,
		MaxImportBytes: m.flags.maxImport,
		Ready:          func(ctx context.Context) error { return ready(ctx, db) },
		Guards:         m.flags.guards,
		Spool:          m.spool,
		A2ACards:       m.flags.agentCards,
	})
	m.loops.Go(ctx, "token watcher", m.handler.WatchTokens)
	return nil
}

// ready is /readyz: the store answers a read, and one that can tell its
// health (SQLite: a log that syncs) is healthy.
func ready(ctx context.Context, db store.Store) error {
	if h, ok := db.(interface{ Health() error }); ok {
		if err := h.Health(); err != nil {
			return err
		}
	}
	_, err := db.CountTokens(ctx)
	return err
}

// startPprof serves Go's profiles with -pprof.
func (m *serveMain) startPprof(ctx context.Context) error {
	if m.flags.pprofAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", m.flags.pprofAddr)
	if err != nil {
		return err
	}
	m.loops.Go(ctx, "pprof", func(ctx context.Context) { servePprof(ctx, ln) })
	m.log.Info("profiles served", slog.String("addr", ln.Addr().String()))
	return nil
}

// listen opens the API's listener. Its connections are bounded in number,
// in all and per client address, with idle ones closed to make room (see
// package connlimit).
func (m *serveMain) listen(context.Context) error {
	f := &m.flags
	tcp, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	m.ln = connlimit.New(tcp, connlimit.Options{Max: f.maxConns, MaxPerAddr: f.maxConnsPerAddr,
		Refusal: api.RawResponse(parley.Errorf(parley.EUNAVAILABLE, "the server holds as many connections as it may (serve -max-conns %d), and none is idle; retry in a moment", f.maxConns).
			With("retryAfterSeconds", 1)),
		RefusalPerAddr: api.RawResponse(parley.Errorf(parley.EUNAVAILABLE, "your address holds as many connections as it may (serve -max-conns-per-addr %d), and none is idle; close one, or retry in a moment", f.maxConnsPerAddr).
			With("retryAfterSeconds", 1))})
	registerConnMetrics(m.reg, m.ln)
	return nil
}

// serve serves the API until ctx ends or the listener fails, then shuts
// the HTTP server down: the engine's streams end first, so that Shutdown
// need not wait for them.
func (m *serveMain) serve(ctx context.Context) error {
	f := &m.flags
	// Headers must come in time and be small; bodies are bounded by the
	// handler (-body-timeout), idle kept-alive connections by IdleTimeout.
	srv := &http.Server{Handler: m.handler, ReadHeaderTimeout: f.headerTimeout, MaxHeaderBytes: maxHeaderBytes, IdleTimeout: 2 * time.Minute,
		ConnState: m.ln.ConnState, ConnContext: m.ln.ConnContext}
	m.log.Info("parley serving", slog.String("addr", m.ln.Addr().String()), slog.String("store", m.where), slog.Int("max-conns", f.maxConns), slog.Int("max-conns-per-addr", f.maxConnsPerAddr))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(m.ln) }()
	if m.onReady != nil {
		url := "http://" + m.ln.Addr().String()
		m.loops.Go(ctx, "ready", func(ctx context.Context) { m.onReady(ctx, url, m.log) })
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	m.log.Info("shutting down")
	m.eng.Close() // ends streams so that Shutdown need not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// spoolPath is the directory exports and backups are written to before
// they are sent: dir if given, else beside the SQLite file, on its file
// system (the system's temporary directory may be small), with a name of
// its own (a server sweeps its spool as it starts, and another database
// in the same directory has another server); with PostgreSQL, in the
// system's temporary directory.
func spoolPath(dir, dbPath, pgURL string) string {
	switch {
	case dir != "":
		return dir
	case pgURL != "":
		return filepath.Join(os.TempDir(), "parley-spool-"+strconv.Itoa(os.Getuid()))
	}
	return dbPath + ".spool"
}

// maxHeaderBytes bounds a request's headers (and its URL); past it: 431.
const maxHeaderBytes = 64 << 10

// registerConnMetrics exports the counts of the server's connections.
func registerConnMetrics(reg prometheus.Registerer, ln *connlimit.Listener) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "parley_connections_open", Help: "HTTP connections open (streams and runners included)."},
			func() float64 { return float64(ln.Stats().Open) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "parley_connections_idle", Help: "HTTP connections open and idle: waiting for a request, or for its headers."},
			func() float64 { return float64(ln.Stats().Idle) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_connections_shed_total", Help: "Idle connections closed to make room for new ones (-max-conns, -max-conns-per-addr)."},
			func() float64 { return float64(ln.Stats().Shed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_connections_refused_total", Help: "Connections refused (503) because the server or their address held as many as it may, none idle."},
			func() float64 { return float64(ln.Stats().Refused) }),
	)
}

// openMode decides whether the server runs open: only a store that never
// had a token does, or with -reopen one whose tokens are all revoked. A
// store whose tokens are all revoked otherwise stays closed (nobody can
// get in until an admin token is made on its file), since running open
// again would give anyone on this machine an admin.
func openMode(ctx context.Context, db store.Store, reopen bool, log *slog.Logger) (bool, error) {
	tokens, err := db.ListTokens(ctx)
	if err != nil {
		return false, err
	}
	live := 0
	for _, t := range tokens {
		if t.RevokedAt.IsZero() {
			live++
		}
	}
	switch {
	case live > 0 && reopen:
		return false, fmt.Errorf("-reopen: %d tokens are not revoked; revoke them first ('parley token list', 'parley token revoke ID')", live)
	case len(tokens) > 0 && live == 0 && !reopen:
		log.Warn("every token of this store is revoked, so every request is refused: create one with 'parley token create -kind admin' (it works at once), or start with -reopen to run open again")
	}
	return live == 0 && (len(tokens) == 0 || reopen), nil
}

// isLoopback reports whether a listen address only accepts local connections.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openStore opens the PostgreSQL store if a URL is given, else the SQLite
// file. It says which, without the URL (it may hold a password).
func openStore(ctx context.Context, path, pgURL string, sync sqlite.Sync, log *slog.Logger) (store.Store, string, error) {
	if pgURL != "" {
		db, err := postgres.Open(ctx, pgURL)
		if err != nil {
			return nil, "", fmt.Errorf("open PostgreSQL: %w", err)
		}
		return db, "postgres", nil
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log, Sync: sync})
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", path, err)
	}
	if n := db.Renewed(); n > 0 {
		log.Warn("the machine went down (or a sync failed) while the database was open: every conversation has a new epoch, and its clients start over",
			"conversations", n)
	}
	return db, "sqlite:" + path + " (synchronous=" + string(sync) + ")", nil
}
