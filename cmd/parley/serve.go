package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/postgres"
	"github.com/parleyhq/parley/sqlite"
	"github.com/parleyhq/parley/store"
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
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: store there instead of in the SQLite file (one node at a time, for now)")
	allowOpen := fs.Bool("allow-open", false, "run without tokens on a non-loopback address (dangerous)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	limits := conv.DefaultLimits
	fs.IntVar(&limits.MaxThreadDepth, "max-thread-depth", limits.MaxThreadDepth, "a reply may have fewer ancestors than this")
	fs.DurationVar(&limits.ClaimTTL, "claim-ttl", limits.ClaimTTL, "how long a claim lasts when the request names no TTL")
	fs.DurationVar(&limits.MaxClaimTTL, "max-claim-ttl", limits.MaxClaimTTL, "the longest TTL a claim may ask for")
	subBuffer := fs.Int("subscriber-buffer", 4096, "live events queued per stream subscriber before it is dropped as too slow")
	grace := fs.Duration("runner-grace", 30*time.Second, "how long a streaming message waits for its runner to come back before it ends canceled")
	maxImport := fs.Int64("max-import-bytes", 4<<30, "the largest body POST /v1/conversations/import reads")
	webhooks := webhookFlag{}
	fs.Var(webhooks, "channel-webhook", "TYPE=URL: post replies to prompts from channels of TYPE to URL (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if limits.MaxThreadDepth < 1 || limits.ClaimTTL <= 0 || limits.MaxClaimTTL < limits.ClaimTTL || *subBuffer < 1 || *grace <= 0 || *maxImport < 1 {
		return fmt.Errorf("limits must be positive, and -max-claim-ttl at least -claim-ttl")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	db, where, err := openStore(ctx, *dbPath, *pgURL, log)
	if err != nil {
		return err
	}
	defer db.Close()

	tokens, err := db.CountTokens(ctx)
	if err != nil {
		return err
	}
	open := tokens == 0
	if open && !isLoopback(*addr) && !*allowOpen {
		return fmt.Errorf("no tokens exist and %s is not a loopback address: create one with 'parley token create -kind admin', or pass -allow-open", *addr)
	}
	if open {
		log.Warn("running OPEN: no tokens exist, so every request acts as admin; create a token with 'parley token create' to require them", slog.String("addr", *addr))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	eng := engine.New(db, engine.Options{Logger: log, Metrics: engine.NewMetrics(reg), Limits: limits, SubscriberBuffer: *subBuffer, RunnerGrace: *grace})
	defer eng.Close()
	if n, err := eng.RecoverStreams(ctx); err != nil {
		return fmt.Errorf("recovering streaming messages: %w", err)
	} else if n > 0 {
		log.Info("streaming messages wait for their runners", slog.Int("conversations", n), slog.Duration("grace", *grace))
	}
	go eng.Deliver(ctx, engine.DeliveryOptions{Webhooks: webhooks})
	go eng.RunTasks(ctx, time.Second)
	handler := api.New(eng, api.Options{
		Open:           open,
		Logger:         log,
		Gatherer:       reg,
		Registerer:     reg,
		MaxImportBytes: *maxImport,
		Ready:          func(ctx context.Context) error { _, err := db.CountTokens(ctx); return err },
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Info("parley serving", slog.String("addr", ln.Addr().String()), slog.String("store", where))
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
func openStore(ctx context.Context, path, pgURL string, log *slog.Logger) (store.Store, string, error) {
	if pgURL != "" {
		db, err := postgres.Open(ctx, pgURL)
		if err != nil {
			return nil, "", fmt.Errorf("open PostgreSQL: %w", err)
		}
		return db, "postgres", nil
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log})
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", path, err)
	}
	return db, "sqlite:" + path, nil
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
