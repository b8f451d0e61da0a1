package main

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/protocols"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/sqlite"
)

// serveFlags are the values of parley serve's flags. docs/operations.md
// has a row for each (a test checks that it does).
type serveFlags struct {
	dbPath, addr, pgURL, syncMode string
	allowOpen, reopen             bool

	guards                    api.Guards
	headerTimeout             time.Duration
	maxConns, maxConnsPerAddr int
	logLevel, pprofAddr       string

	limits                    conv.Limits
	subBuffer, subBytes       int
	subMemory                 int64
	collectWindow, turnLease  time.Duration
	grace, runnerLease        time.Duration
	maxImport                 int64
	spoolDir                  string
	agentCardsPath            string
	agentCards                map[string]protocols.A2ACard
	spoolLimits               spool.Limits
	importLease               time.Duration
	maxTasks                  int
	chunkRetention            daysFlag
	webhooks                  webhookFlag
	giveUp, deliveryRetention daysFlag
	fdLimit                   uint64 // the open-file limit, 0 if unknown
	level                     slog.Level
	sync                      sqlite.Sync
}

// define declares the flags on fs, with their defaults (some from the
// environment, -max-conns from the open-file limit).
func (f *serveFlags) define(fs *flag.FlagSet) {
	f.defineStore(fs)
	f.defineGuards(fs)
	f.defineLimits(fs)
	f.defineStreams(fs)
	f.defineTransfers(fs)
	f.defineDeliveries(fs)
}

func (f *serveFlags) defineStore(fs *flag.FlagSet) {
	fs.StringVar(&f.dbPath, "db", envOr("PARLEY_DB", "./parley.db"), "SQLite database file")
	fs.StringVar(&f.addr, "addr", envOr("PARLEY_ADDR", "127.0.0.1:7700"), "listen address")
	fs.StringVar(&f.pgURL, "postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: store there instead of in the SQLite file (several nodes may share it)")
	fs.StringVar(&f.syncMode, "sqlite-sync", envOr("PARLEY_SQLITE_SYNC", "full"), "full: an acknowledged write survives power loss (the log is synced at every commit); normal: it survives a crash of the process, and a power loss may take the last commits back")
	fs.BoolVar(&f.allowOpen, "allow-open", false, "run without tokens on a non-loopback address (dangerous)")
	fs.BoolVar(&f.reopen, "reopen", false, "run open although this store has had tokens, when every one of them is revoked")
}

func (f *serveFlags) defineGuards(fs *flag.FlagSet) {
	g := &f.guards
	fs.Var((*listFlag)(&g.OpenHosts), "open-host", "a Host name an open server answers besides localhost, 127.0.0.1 and [::1] (repeatable)")
	fs.Float64Var(&g.CreateRate, "create-rate", 10, "conversations and tasks one token may create a second, on average (0: no bound)")
	fs.IntVar(&g.CreateBurst, "create-burst", 100, "conversations and tasks one token may create at once, within -create-rate")
	fs.IntVar(&g.MaxConnsPerToken, "max-token-connections", 1000, "streams and runner connections one token may have open at once (0: no bound)")
	fs.Float64Var(&g.RunnerConnectRate, "runner-connect-rate", 10, "runner connections (agent-wide or of a conversation) one token may open a second, on average (0: no bound)")
	fs.IntVar(&g.RunnerConnectBurst, "runner-connect-burst", 1000, "runner connections one token may open at once, within -runner-connect-rate")
	fs.Float64Var(&g.SignInRate, "sign-in-rate", 1, "sign-ins to the web UI (POST /v1/session, good or bad) one client address may make a second, on average (0: no bound)")
	fs.IntVar(&g.SignInBurst, "sign-in-burst", 10, "sign-ins one client address may make at once, within -sign-in-rate")
	fs.DurationVar(&g.BodyTimeout, "body-timeout", 30*time.Second, "how long a request may take to send its body (an import: how long it may send nothing)")
	fs.Int64Var(&g.MaxBodyMemory, "max-body-memory", api.DefaultMaxBodyMemory, "bytes of request bodies read at once, of every client (each reserves its length, or its endpoint's bound, before it is read; an import 16 MiB while it runs); past it: 503 with Retry-After, the body not read")
	fs.DurationVar(&f.headerTimeout, "header-timeout", 10*time.Second, "how long a connection may take to send a request's headers")
	f.fdLimit = openFileLimit()
	fs.IntVar(&f.maxConns, "max-conns", defaultMaxConns(f.fdLimit), "connections open at once, of every client (by default what the open-file limit leaves once the store's files and connections are set aside); past it an idle one is closed to make room")
	fs.IntVar(&f.maxConnsPerAddr, "max-conns-per-addr", 0, "connections one client address (an IPv6 /64) may have open at once; past it its own idle one is closed to make room (default: half of -max-conns)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.pprofAddr, "pprof", "", "serve Go's profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:6060 (keep it on loopback: no token guards it)")
}

func (f *serveFlags) defineLimits(fs *flag.FlagSet) {
	l := &f.limits
	*l = conv.DefaultLimits
	fs.IntVar(&l.MaxThreadDepth, "max-thread-depth", l.MaxThreadDepth, "a reply may have fewer ancestors than this")
	fs.DurationVar(&l.ClaimTTL, "claim-ttl", l.ClaimTTL, "how long a claim lasts when the request names no TTL")
	fs.DurationVar(&l.MaxClaimTTL, "max-claim-ttl", l.MaxClaimTTL, "the longest TTL a claim may ask for")
	fs.IntVar(&l.MaxQueuedPrompts, "max-queued-prompts", l.MaxQueuedPrompts, "the most prompts a conversation's queue holds; past it a prompt is refused (409 busy)")
	fs.IntVar(&l.MaxDelegates, "max-delegates", l.MaxDelegates, "the most agents delegated into one turn; past it a delegation is refused (409 busy) until the turn closes")
	fs.IntVar(&l.MaxMessageBytes, "max-message-bytes", l.MaxMessageBytes, "the most one message may hold: text, tool calls' args, results and errors, metadata")
	fs.IntVar(&l.MaxStreaming, "max-streaming", l.MaxStreaming, "the most messages that may stream at once in one conversation")
}

func (f *serveFlags) defineStreams(fs *flag.FlagSet) {
	fs.IntVar(&f.subBuffer, "subscriber-buffer", 4096, "live events queued per stream subscriber before it is dropped as too slow")
	fs.IntVar(&f.subBytes, "subscriber-buffer-bytes", 16<<20, "bytes of live events queued per stream subscriber before it is dropped as too slow")
	fs.Int64Var(&f.subMemory, "subscriber-memory", 256<<20, "bytes the server holds at most, across every stream, that their clients have not read (snapshots being sent, queued events, pages of the log); past it the streams that have read nothing for longest are dropped (busy: they resume)")
	fs.DurationVar(&f.collectWindow, "collect-window", 2*time.Second, "how long a prompt in mode collect waits for more collect prompts to merge with before it is dispatched")
	fs.DurationVar(&f.turnLease, "turn-lease", conv.DefaultTurnLease, "how long an open turn whose owner has no runner attached and writes nothing lasts before it is aborted (reason timeout), unless its conversation sets turnLeaseMs; from 1s to 24h")
	fs.DurationVar(&f.grace, "runner-grace", 30*time.Second, "how long a streaming message waits for its runner to come back before it ends canceled")
	fs.DurationVar(&f.runnerLease, "runner-lease", 15*time.Second, "with -postgres: how long other nodes count this node's runners as attached after its last renewal (it renews every third of it)")
}

func (f *serveFlags) defineTransfers(fs *flag.FlagSet) {
	fs.Int64Var(&f.maxImport, "max-import-bytes", 4<<30, "the largest body POST /v1/conversations/import reads")
	fs.StringVar(&f.spoolDir, "spool-dir", "", "where exports and backups are written before they are sent, in a directory of the server's own (default: the database file's name with .spool; with -postgres, parley-spool-UID in the system's temporary directory)")
	fs.Int64Var(&f.spoolLimits.MaxFile, "max-export-bytes", 4<<30, "the largest export the server spools (past it: 413 too_large)")
	fs.Int64Var(&f.spoolLimits.MaxTotal, "export-spool-bytes", 8<<30, "the bytes all the exports being sent may hold in the spool at once (past it: 409 busy)")
	fs.DurationVar(&f.importLease, "import-lease", time.Minute, "how long an import cut short by a crash holds its id on PostgreSQL before it is removed (on SQLite a restart removes it)")
	fs.IntVar(&f.maxTasks, "max-tasks-per-agent", schedule.DefaultMaxTasksPerAgent, "how many scheduled tasks one agent may have")
	fs.StringVar(&f.agentCardsPath, "agent-cards", "", "a JSON file mapping an agent id to its A2A card's {name, description, skills}; an agent it does not name gets a default card")
	fs.Var(&f.chunkRetention, "chunk-retention", "compact the chunk events of messages that ended longer ago than this (7d, 36h; at least 1m), keeping their text in the messages; 0 (the default) keeps every event")
}

func (f *serveFlags) defineDeliveries(fs *flag.FlagSet) {
	f.webhooks = webhookFlag{}
	fs.Var(f.webhooks, "channel-webhook", "TYPE=URL: post replies to prompts from channels of TYPE to URL (repeatable)")
	f.giveUp = daysFlag(24 * time.Hour)
	fs.Var(&f.giveUp, "delivery-give-up", "how long a channel reply whose webhook fails is tried before it is given up (24h, 2d; at least a minute)")
	f.deliveryRetention = daysFlag(7 * 24 * time.Hour)
	fs.Var(&f.deliveryRetention, "delivery-retention", "how long a channel reply delivered or given up is kept, to be listed (GET /v1/admin/deliveries), before it is removed (7d; at least a minute)")
}

// check refuses values the server cannot run with, naming the flag and
// what it may be. It fills in the defaults that depend on other flags.
func (f *serveFlags) check() error {
	if f.maxConnsPerAddr == 0 {
		f.maxConnsPerAddr = max(1, f.maxConns/2)
	}
	return firstError(
		f.checkLimits(),
		f.checkStreams(),
		f.checkTransfers(),
		f.checkGuards(),
		checkMaxConns(f.maxConns, f.maxConnsPerAddr, f.fdLimit),
		f.checkDeliveries(),
		f.parseLevels(),
		f.readAgentCards(),
	)
}

// readAgentCards reads -agent-cards, if given.
func (f *serveFlags) readAgentCards() error {
	if f.agentCardsPath == "" {
		return nil
	}
	cards, err := protocols.ReadA2ACards(f.agentCardsPath)
	if err != nil {
		return fmt.Errorf("-agent-cards: %w", err)
	}
	f.agentCards = cards
	return nil
}

// checkLimits checks the limits of conversations and their messages.
func (f *serveFlags) checkLimits() error {
	l := f.limits
	if err := firstError(
		atLeastOne("max-thread-depth", l.MaxThreadDepth),
		atLeastOne("max-queued-prompts", l.MaxQueuedPrompts),
		atLeastOne("max-delegates", l.MaxDelegates),
		positive("claim-ttl", l.ClaimTTL),
		atLeastOne("max-message-bytes", l.MaxMessageBytes),
		atLeastOne("max-streaming", l.MaxStreaming),
	); err != nil {
		return err
	}
	switch {
	case l.MaxClaimTTL < l.ClaimTTL:
		return fmt.Errorf("-max-claim-ttl %s: limits must be positive, and -max-claim-ttl at least -claim-ttl (%s)", l.MaxClaimTTL, l.ClaimTTL)
	case l.MaxDelegates > 1024:
		return fmt.Errorf("-max-delegates %d: at most 1024 (each is in the turn's state, and in every refusal that carries the head)", l.MaxDelegates)
	case l.MaxMessageJSON() > parley.MaxFrameBytes-64<<10:
		return fmt.Errorf("-max-message-bytes %d lets one message weigh %d bytes in JSON, over what a stream's frame may carry (%d)", l.MaxMessageBytes, l.MaxMessageJSON(), parley.MaxFrameBytes)
	}
	return nil
}

// checkStreams checks the bounds of subscribers, prompts and runners.
func (f *serveFlags) checkStreams() error {
	if err := firstError(
		atLeastOne("subscriber-buffer", f.subBuffer),
		atLeastOne("subscriber-buffer-bytes", f.subBytes),
		positive("runner-grace", f.grace),
		positive("collect-window", f.collectWindow),
	); err != nil {
		return err
	}
	switch {
	case f.runnerLease < 3*time.Millisecond:
		return fmt.Errorf("-runner-lease %s: limits must be positive, at least 3ms (it is renewed every third of it)", f.runnerLease)
	case f.collectWindow > 24*time.Hour:
		return fmt.Errorf("-collect-window %s: at most a day (a collect prompt waits that long before it is dispatched)", f.collectWindow)
	case f.subMemory < minSubscriberMemory:
		return fmt.Errorf("-subscriber-memory %d: at least %d (16 MiB), room for two of the largest snapshots a stream may be sent", f.subMemory, minSubscriberMemory)
	}
	if err := conv.CheckTurnLease(f.turnLease); err != nil {
		return fmt.Errorf("-turn-lease: %w", err)
	}
	return nil
}

// checkTransfers checks the bounds of imports, exports and tasks.
func (f *serveFlags) checkTransfers() error {
	return firstError(
		atLeastOne("max-import-bytes", f.maxImport),
		atLeastOne("max-export-bytes", f.spoolLimits.MaxFile),
		atLeastOne("export-spool-bytes", f.spoolLimits.MaxTotal),
		positive("import-lease", f.importLease),
		atLeastOne("max-tasks-per-agent", f.maxTasks),
	)
}

// checkGuards checks the bounds of what one client may do.
func (f *serveFlags) checkGuards() error {
	g := f.guards
	if err := firstError(
		positive("body-timeout", g.BodyTimeout),
		positive("header-timeout", f.headerTimeout),
		zeroOrMore("create-rate", g.CreateRate),
		atLeastOne("create-burst", g.CreateBurst),
		zeroOrMore("max-token-connections", g.MaxConnsPerToken),
		zeroOrMore("runner-connect-rate", g.RunnerConnectRate),
		atLeastOne("runner-connect-burst", g.RunnerConnectBurst),
		zeroOrMore("sign-in-rate", g.SignInRate),
		atLeastOne("sign-in-burst", g.SignInBurst),
	); err != nil {
		return err
	}
	if g.SignInRate == 0 {
		f.guards.SignInRate = -1 // api.Guards: negative is no bound, 0 the default
	}
	if g.MaxBodyMemory < protocols.MaxChatBodyBytes {
		return fmt.Errorf("-max-body-memory %d: at least %d, the largest body an endpoint takes (a chat's)", g.MaxBodyMemory, protocols.MaxChatBodyBytes)
	}
	return nil
}

// checkDeliveries checks how long channel replies and chunk events are kept.
func (f *serveFlags) checkDeliveries() error {
	switch {
	case time.Duration(f.giveUp) < time.Minute:
		return fmt.Errorf("-delivery-give-up %s: at least a minute", &f.giveUp)
	case time.Duration(f.deliveryRetention) < time.Minute:
		return fmt.Errorf("-delivery-retention %s: at least a minute", &f.deliveryRetention)
	}
	if r := time.Duration(f.chunkRetention); r != 0 && r < time.Minute {
		return fmt.Errorf("-chunk-retention %s: keep chunk events at least a minute (0 keeps them all)", r)
	}
	return nil
}

// parseLevels reads -log-level and -sqlite-sync.
func (f *serveFlags) parseLevels() error {
	if err := f.level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w (debug, info, warn or error)", err)
	}
	sync, err := sqlite.ParseSync(f.syncMode)
	if err != nil {
		return fmt.Errorf("-sqlite-sync: %w", err)
	}
	f.sync = sync
	return nil
}

// firstError returns the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// atLeastOne refuses a count or a size under 1.
func atLeastOne[T ~int | ~int64](name string, v T) error {
	if v < 1 {
		return fmt.Errorf("-%s %d: limits must be positive (at least 1)", name, v)
	}
	return nil
}

// positive refuses a duration that is not above 0.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("-%s %s: limits must be positive (above 0s)", name, d)
	}
	return nil
}

// zeroOrMore refuses a negative bound (0 is no bound).
func zeroOrMore[T ~int | ~float64](name string, v T) error {
	if v < 0 {
		return fmt.Errorf("-%s %v: limits must be positive, or 0 for no bound", name, v)
	}
	return nil
}

// minSubscriberMemory is the least -subscriber-memory may be: room for two
// of the largest snapshots (4 MiB of messages and one more, their
// summaries, and at most 512 KiB of the text v1 runners stream, which
// escaping may make 3 MiB of JSON), so that a stream alone is never
// refused.
const minSubscriberMemory = 16 << 20

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
	case maxConns < 1:
		return fmt.Errorf("-max-conns %d: -max-conns and -max-conns-per-addr must be at least 1", maxConns)
	case perAddr < 1:
		return fmt.Errorf("-max-conns-per-addr %d: -max-conns and -max-conns-per-addr must be at least 1", perAddr)
	case perAddr > maxConns:
		return fmt.Errorf("-max-conns-per-addr %d is over -max-conns %d", perAddr, maxConns)
	case fdLimit > 0 && fdLimit < 1<<40 && uint64(maxConns)+minFDReserve > fdLimit:
		return fmt.Errorf("-max-conns %d: this process may have %d files open, and needs %d of them besides its connections (the store's files, backups, the listener): "+
			"lower -max-conns, or raise the limit (ulimit -n)", maxConns, fdLimit, minFDReserve)
	}
	return nil
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
