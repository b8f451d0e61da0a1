package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/connlimit"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/protocols"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/retention"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
	"github.com/parleyhq/parley/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	return serve(ctx, args, stderr, nil)
}

// serve runs the server until ctx ends. onReady, if set, is called in its
// own goroutine once the server listens, with its URL.
func serve(ctx context.Context, args []string, stderr io.Writer, onReady func(ctx context.Context, url string, log *slog.Logger)) error {
	fs := newFlags("serve", stderr)
	dbPath := fs.String("db", envOr("PARLEY_DB", "./parley.db"), "SQLite database file")
	addr := fs.String("addr", envOr("PARLEY_ADDR", "127.0.0.1:7700"), "listen address")
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: store there instead of in the SQLite file (several nodes may share it)")
	syncMode := fs.String("sqlite-sync", envOr("PARLEY_SQLITE_SYNC", "full"), "full: an acknowledged write survives power loss (the log is synced at every commit); normal: it survives a crash of the process, and a power loss may take the last commits back")
	allowOpen := fs.Bool("allow-open", false, "run without tokens on a non-loopback address (dangerous)")
	reopen := fs.Bool("reopen", false, "run open although this store has had tokens, when every one of them is revoked")
	var guards api.Guards
	fs.Var((*listFlag)(&guards.OpenHosts), "open-host", "a Host name an open server answers besides localhost, 127.0.0.1 and [::1] (repeatable)")
	fs.Float64Var(&guards.CreateRate, "create-rate", 10, "conversations and tasks one token may create a second, on average (0: no bound)")
	fs.IntVar(&guards.CreateBurst, "create-burst", 100, "conversations and tasks one token may create at once, within -create-rate")
	fs.IntVar(&guards.MaxConnsPerToken, "max-token-connections", 1000, "streams and runner connections one token may have open at once (0: no bound)")
	fs.Float64Var(&guards.RunnerConnectRate, "runner-connect-rate", 10, "runner connections (agent-wide or of a conversation) one token may open a second, on average (0: no bound)")
	fs.IntVar(&guards.RunnerConnectBurst, "runner-connect-burst", 1000, "runner connections one token may open at once, within -runner-connect-rate")
	fs.DurationVar(&guards.BodyTimeout, "body-timeout", 30*time.Second, "how long a request may take to send its body (an import: how long it may send nothing)")
	fs.Int64Var(&guards.MaxBodyMemory, "max-body-memory", api.DefaultMaxBodyMemory, "bytes of request bodies read at once, of every client (each reserves its length, or its endpoint's bound, before it is read; an import 16 MiB while it runs); past it: 503 with Retry-After, the body not read")
	headerTimeout := fs.Duration("header-timeout", 10*time.Second, "how long a connection may take to send a request's headers")
	fdLimit := openFileLimit()
	maxConns := fs.Int("max-conns", defaultMaxConns(fdLimit), "connections open at once, of every client (by default what the open-file limit leaves once the store's files and connections are set aside); past it an idle one is closed to make room")
	maxConnsPerAddr := fs.Int("max-conns-per-addr", 0, "connections one client address (an IPv6 /64) may have open at once; past it its own idle one is closed to make room (default: half of -max-conns)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pprofAddr := fs.String("pprof", "", "serve Go's profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:6060 (keep it on loopback: no token guards it)")
	limits := conv.DefaultLimits
	fs.IntVar(&limits.MaxThreadDepth, "max-thread-depth", limits.MaxThreadDepth, "a reply may have fewer ancestors than this")
	fs.DurationVar(&limits.ClaimTTL, "claim-ttl", limits.ClaimTTL, "how long a claim lasts when the request names no TTL")
	fs.DurationVar(&limits.MaxClaimTTL, "max-claim-ttl", limits.MaxClaimTTL, "the longest TTL a claim may ask for")
	fs.IntVar(&limits.MaxQueuedPrompts, "max-queued-prompts", limits.MaxQueuedPrompts, "the most prompts a conversation's queue holds; past it a prompt is refused (409 busy)")
	fs.IntVar(&limits.MaxDelegates, "max-delegates", limits.MaxDelegates, "the most agents delegated into one turn; past it a delegation is refused (409 busy) until the turn closes")
	fs.IntVar(&limits.MaxMessageBytes, "max-message-bytes", limits.MaxMessageBytes, "the most one message may hold: text, tool calls' args, results and errors, metadata")
	fs.IntVar(&limits.MaxStreaming, "max-streaming", limits.MaxStreaming, "the most messages that may stream at once in one conversation")
	subBuffer := fs.Int("subscriber-buffer", 4096, "live events queued per stream subscriber before it is dropped as too slow")
	subBytes := fs.Int("subscriber-buffer-bytes", 16<<20, "bytes of live events queued per stream subscriber before it is dropped as too slow")
	subMemory := fs.Int64("subscriber-memory", 256<<20, "bytes the server holds at most, across every stream, that their clients have not read (snapshots being sent, queued events, pages of the log); past it the streams that have read nothing for longest are dropped (busy: they resume)")
	collectWindow := fs.Duration("collect-window", 2*time.Second, "how long a prompt in mode collect waits for more collect prompts to merge with before it is dispatched")
	turnLease := fs.Duration("turn-lease", conv.DefaultTurnLease, "how long an open turn whose owner has no runner attached and writes nothing lasts before it is aborted (reason timeout), unless its conversation sets turnLeaseMs; from 1s to 24h")
	grace := fs.Duration("runner-grace", 30*time.Second, "how long a streaming message waits for its runner to come back before it ends canceled")
	runnerLease := fs.Duration("runner-lease", 15*time.Second, "with -postgres: how long other nodes count this node's runners as attached after its last renewal (it renews every third of it)")
	maxImport := fs.Int64("max-import-bytes", 4<<30, "the largest body POST /v1/conversations/import reads")
	spoolDir := fs.String("spool-dir", "", "where exports and backups are written before they are sent, in a directory of the server's own (default: the database file's name with .spool; with -postgres, parley-spool-UID in the system's temporary directory)")
	var spoolLimits spool.Limits
	fs.Int64Var(&spoolLimits.MaxFile, "max-export-bytes", 4<<30, "the largest export the server spools (past it: 413 too_large)")
	fs.Int64Var(&spoolLimits.MaxTotal, "export-spool-bytes", 8<<30, "the bytes all the exports being sent may hold in the spool at once (past it: 409 busy)")
	importLease := fs.Duration("import-lease", time.Minute, "how long an import cut short by a crash holds its id on PostgreSQL before it is removed (on SQLite a restart removes it)")
	maxTasks := fs.Int("max-tasks-per-agent", engine.DefaultMaxTasksPerAgent, "how many scheduled tasks one agent may have")
	var chunkRetention daysFlag
	fs.Var(&chunkRetention, "chunk-retention", "compact the chunk events of messages that ended longer ago than this (7d, 36h; at least 1m), keeping their text in the messages; 0 (the default) keeps every event")
	webhooks := webhookFlag{}
	fs.Var(webhooks, "channel-webhook", "TYPE=URL: post replies to prompts from channels of TYPE to URL (repeatable)")
	giveUp := daysFlag(24 * time.Hour)
	fs.Var(&giveUp, "delivery-give-up", "how long a channel reply whose webhook fails is tried before it is given up (24h, 2d; at least a minute)")
	deliveryRetention := daysFlag(7 * 24 * time.Hour)
	fs.Var(&deliveryRetention, "delivery-retention", "how long a channel reply delivered or given up is kept, to be listed (GET /v1/admin/deliveries), before it is removed (7d; at least a minute)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if limits.MaxThreadDepth < 1 || limits.MaxQueuedPrompts < 1 || limits.MaxDelegates < 1 || limits.ClaimTTL <= 0 || limits.MaxClaimTTL < limits.ClaimTTL || *subBuffer < 1 || *subBytes < 1 ||
		limits.MaxMessageBytes < 1 || limits.MaxStreaming < 1 || *grace <= 0 || *collectWindow <= 0 || *runnerLease < 3*time.Millisecond || *maxImport < 1 || spoolLimits.MaxFile < 1 || spoolLimits.MaxTotal < 1 || *importLease <= 0 || *maxTasks < 1 ||
		guards.BodyTimeout <= 0 || *headerTimeout <= 0 || guards.CreateRate < 0 || guards.CreateBurst < 1 || guards.MaxConnsPerToken < 0 ||
		guards.RunnerConnectRate < 0 || guards.RunnerConnectBurst < 1 {
		return fmt.Errorf("limits must be positive (-create-rate, -runner-connect-rate and -max-token-connections may be 0: no bound), and -max-claim-ttl at least -claim-ttl")
	}
	if guards.MaxBodyMemory < protocols.MaxChatBodyBytes {
		return fmt.Errorf("-max-body-memory %d: at least %d, the largest body an endpoint takes (a chat's)", guards.MaxBodyMemory, protocols.MaxChatBodyBytes)
	}
	if *maxConnsPerAddr == 0 {
		*maxConnsPerAddr = max(1, *maxConns/2)
	}
	if err := checkMaxConns(*maxConns, *maxConnsPerAddr, fdLimit); err != nil {
		return err
	}
	if limits.MaxDelegates > 1024 {
		return fmt.Errorf("-max-delegates %d: at most 1024 (each is in the turn's state, and in every refusal that carries the head)", limits.MaxDelegates)
	}
	if err := conv.CheckTurnLease(*turnLease); err != nil {
		return fmt.Errorf("-turn-lease: %w", err)
	}
	if *collectWindow > 24*time.Hour {
		return fmt.Errorf("-collect-window %s: at most a day (a collect prompt waits that long before it is dispatched)", *collectWindow)
	}
	if time.Duration(giveUp) < time.Minute || time.Duration(deliveryRetention) < time.Minute {
		return fmt.Errorf("-delivery-give-up %s and -delivery-retention %s: each at least a minute", &giveUp, &deliveryRetention)
	}
	if r := time.Duration(chunkRetention); r != 0 && r < time.Minute {
		return fmt.Errorf("-chunk-retention %s: keep chunk events at least a minute (0 keeps them all)", r)
	}
	if *subMemory < minSubscriberMemory {
		return fmt.Errorf("-subscriber-memory %d: at least %d (16 MiB), room for two of the largest snapshots a stream may be sent", *subMemory, minSubscriberMemory)
	}
	if n := limits.MaxMessageJSON(); n > parley.MaxFrameBytes-64<<10 {
		return fmt.Errorf("-max-message-bytes %d lets one message weigh %d bytes in JSON, over what a stream's frame may carry (%d)", limits.MaxMessageBytes, n, parley.MaxFrameBytes)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	sync, err := sqlite.ParseSync(*syncMode)
	if err != nil {
		return fmt.Errorf("-sqlite-sync: %w", err)
	}
	db, where, err := openStore(ctx, *dbPath, *pgURL, sync, log)
	if err != nil {
		return err
	}
	defer db.Close()

	open, err := openMode(ctx, db, *reopen, log)
	if err != nil {
		return err
	}
	if open && !isLoopback(*addr) && !*allowOpen {
		return fmt.Errorf("no tokens exist and %s is not a loopback address: create one with 'parley token create -kind admin', or pass -allow-open", *addr)
	}
	if open {
		log.Warn("running OPEN: no tokens exist, so every request acts as admin (from this machine's names only, and never for another web site); create a token with 'parley token create' to require them", slog.String("addr", *addr))
		if !isLoopback(*addr) && len(guards.OpenHosts) == 0 {
			log.Warn("an open server answers only requests addressed to localhost, 127.0.0.1 or [::1]: name the others it may answer with -open-host")
		}
	}

	// Exports and backups are written here before they are sent; what a
	// server that died left is removed before anything is served.
	sp, swept, err := spool.Open(spoolPath(*spoolDir, *dbPath, *pgURL), spoolLimits)
	if err != nil {
		return fmt.Errorf("-spool-dir: %w", err)
	}
	if swept > 0 {
		log.Info("removed what the last run left in the spool", slog.String("dir", sp.Dir()), slog.Int("files", swept))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s, ok := db.(*sqlite.DB); ok {
		reg.MustRegister(sqlitemetrics.Collectors(s)...)
	}
	eng := engine.New(db, engine.Options{Logger: log, Metrics: engine.NewMetrics(reg), Limits: limits, SubscriberBuffer: *subBuffer, SubscriberBufferBytes: *subBytes,
		SubscriberMemory: *subMemory, ImportLease: *importLease, MaxTasksPerAgent: *maxTasks, CollectWindow: *collectWindow, TurnLease: *turnLease, Shared: *pgURL != ""})
	defer eng.Close()
	// The runners: their connections, the prompts dispatched to them, and
	// the grace period of a runner gone while its message streams.
	rn := runners.New(eng, db, runners.Options{Grace: *grace, PresenceLease: *runnerLease, Logger: log})
	defer rn.Close()
	// Imports that a crash cut short are removed before anything is served,
	// so that their ids can be imported again at once.
	if n, err := eng.SweepImports(ctx); err != nil {
		return fmt.Errorf("removing unfinished imports: %w", err)
	} else if n > 0 {
		log.Info("removed unfinished imports", slog.Int("imports", n))
	}
	go eng.SweepImportsEvery(ctx, *importLease/2)
	if n, err := eng.RecoverStreams(ctx); err != nil {
		return fmt.Errorf("recovering streaming messages: %w", err)
	} else if n > 0 {
		log.Info("streaming messages wait for their runners", slog.Int("conversations", n), slog.Duration("grace", *grace))
	}
	// Other nodes' writes (none with SQLite): the conversations this node
	// follows catch up as they are written, for its subscribers and runners.
	var broker feed.Broker = feed.Local{}
	if *pgURL != "" {
		broker = postgres.Broker{URL: *pgURL}
	}
	go broker.Listen(ctx, eng.HandleNotice, func() { eng.CatchUpAll(ctx) })
	// Beneath the notifications, a look at the heads of what it follows
	// every second: a notification lost costs at most that.
	go eng.KeepCaughtUp(ctx, time.Second)
	// Its runners, for the other nodes (with -postgres): whose streams wait, and guidance.
	go rn.KeepPresence(ctx)
	go eng.Deliver(ctx, engine.DeliveryOptions{Webhooks: webhooks, GiveUp: time.Duration(giveUp), Retention: time.Duration(deliveryRetention)})
	go eng.RunTasks(ctx, time.Second)
	if r := time.Duration(chunkRetention); r > 0 {
		go retention.New(db, retention.Options{Retention: r, Logger: log}).Run(ctx)
	}
	handler := api.New(eng, rn, reads.New(db, eng), api.Options{
		Open:           open,
		Logger:         log,
		Gatherer:       reg,
		Registerer:     reg,
		MaxImportBytes: *maxImport,
		Ready:          func(ctx context.Context) error { _, err := db.CountTokens(ctx); return err },
		Guards:         guards,
		Spool:          sp,
	})
	go handler.WatchTokens(ctx)

	if *pprofAddr != "" {
		if err := servePprof(ctx, *pprofAddr, log); err != nil {
			return err
		}
	}
	tcp, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// The connections are bounded in number, in all and per client
	// address, with idle ones closed to make room (see package connlimit).
	ln := connlimit.New(tcp, connlimit.Options{Max: *maxConns, MaxPerAddr: *maxConnsPerAddr,
		Refusal: api.RawResponse(parley.Errorf(parley.EUNAVAILABLE, "the server holds as many connections as it may (serve -max-conns %d), and none is idle; retry in a moment", *maxConns).
			With("retryAfterSeconds", 1)),
		RefusalPerAddr: api.RawResponse(parley.Errorf(parley.EUNAVAILABLE, "your address holds as many connections as it may (serve -max-conns-per-addr %d), and none is idle; close one, or retry in a moment", *maxConnsPerAddr).
			With("retryAfterSeconds", 1))})
	registerConnMetrics(reg, ln)
	// Headers must come in time and be small; bodies are bounded by the
	// handler (-body-timeout), idle kept-alive connections by IdleTimeout.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: *headerTimeout, MaxHeaderBytes: maxHeaderBytes, IdleTimeout: 2 * time.Minute,
		ConnState: ln.ConnState, ConnContext: ln.ConnContext}
	log.Info("parley serving", slog.String("addr", ln.Addr().String()), slog.String("store", where), slog.Int("max-conns", *maxConns), slog.Int("max-conns-per-addr", *maxConnsPerAddr))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if onReady != nil {
		go onReady(ctx, "http://"+ln.Addr().String(), log)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	eng.Close() // ends streams so that Shutdown need not wait for them
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

// The default -max-conns is what the open-file limit leaves once a
// reserve is set aside for the server's other descriptors (the store's
// files and connections, backups, webhooks' connections, the listeners):
// an eighth of the limit, at least fdReserve; and at most
// maxDefaultConns, for each connection costs memory too (an idle one some
// 10 to 20 KiB). -max-conns may not leave less than minFDReserve, or
// accepting would fail with "too many open files", which stops the server
// accepting anyone for a while.
const (
	fdReserve       = 128
	minFDReserve    = 64
	maxDefaultConns = 50_000
)

// defaultMaxConns is the default -max-conns for an open-file limit (0:
// unknown).
func defaultMaxConns(fdLimit uint64) int {
	if fdLimit == 0 || fdLimit > 1<<40 {
		return maxDefaultConns
	}
	reserve := max(fdReserve, fdLimit/8)
	if fdLimit <= reserve {
		return 1
	}
	return int(min(fdLimit-reserve, maxDefaultConns))
}

// checkMaxConns refuses bounds of connections that leave the server
// without descriptors for the rest.
func checkMaxConns(maxConns, perAddr int, fdLimit uint64) error {
	switch {
	case maxConns < 1 || perAddr < 1:
		return fmt.Errorf("-max-conns and -max-conns-per-addr must be at least 1")
	case perAddr > maxConns:
		return fmt.Errorf("-max-conns-per-addr %d is over -max-conns %d", perAddr, maxConns)
	case fdLimit > 0 && fdLimit < 1<<40 && uint64(maxConns)+minFDReserve > fdLimit:
		return fmt.Errorf("-max-conns %d: this process may have %d files open, and needs %d of them besides its connections (the store's files, backups, the listener): "+
			"lower -max-conns, or raise the limit (ulimit -n)", maxConns, fdLimit, minFDReserve)
	}
	return nil
}

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

// minSubscriberMemory is the least -subscriber-memory may be: room for two
// of the largest snapshots (4 MiB of messages and one more, their
// summaries, and at most 512 KiB of the text v1 runners stream, which
// escaping may make 3 MiB of JSON), so that a stream alone is never
// refused.
const minSubscriberMemory = 16 << 20

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

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty value")
	}
	*l = append(*l, v)
	return nil
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
	return db, "sqlite:" + path + " (synchronous=" + string(sync) + ")", nil
}

// webhookFlag collects -channel-webhook TYPE=URL flags.
type webhookFlag map[string]string

func (w webhookFlag) String() string { return fmt.Sprint(map[string]string(w)) }

func (w webhookFlag) Set(v string) error {
	typ, url, ok := strings.Cut(v, "=")
	if !ok || typ == "" || !strings.HasPrefix(url, "http") {
		return fmt.Errorf("want TYPE=URL (an http or https URL), not %q", v)
	}
	w[typ] = url
	return nil
}
