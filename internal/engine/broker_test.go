package engine_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// gate is a TCP proxy to a database that can be shut: while shut it
// refuses new connections, as a database out of reach for a while does.
type gate struct {
	ln     net.Listener
	target string
	shut   atomic.Bool
}

func newGate(t *testing.T, target string) *gate {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.forward(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return g
}

func (g *gate) forward(c net.Conn) {
	defer c.Close()
	if g.shut.Load() {
		return
	}
	u, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer u.Close()
	go func() { io.Copy(u, c); u.Close() }()
	io.Copy(c, u)
}

// TestListenerReconnectsAndCatchesUp: node B listens for the other nodes'
// appends through a connection of its own. The database ends that
// connection (pg_terminate_backend) and refuses B's next ones for a while,
// during which node A appends: B hears nothing of it. Once B's listener is
// back it catches up every conversation it follows (Engine.CatchUpAll),
// so B's subscriber gets the append made while it was away, with nothing
// written after it. No other catch-up runs on B.
func TestListenerReconnectsAndCatchesUp(t *testing.T) {
	dbURL := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := &bundle{db: db, eng: engine.New(db, engine.Options{Shared: true}), ctx: ctx}
	defer a.eng.Close()
	b := engine.New(db, engine.Options{Shared: true})
	defer b.Close()
	id := a.conversation(t, parley.PolicyFree, "alice")
	sub, err := b.Subscribe(ctx, id, &parley.Position{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// B's listener reaches the database through the gate, under a name of
	// its own (to find its backend).
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, u.Host)
	name := "listener-" + uuid.NewString()[:8]
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery, u.Host = q.Encode(), g.ln.Addr().String()
	caughtUp := make(chan struct{}, 10)
	go postgres.Broker{URL: u.String()}.Listen(ctx, b.HandleNotice, func() {
		b.CatchUpAll(ctx)
		caughtUp <- struct{}{}
	})
	wait := func(what string) {
		t.Helper()
		select {
		case <-caughtUp:
		case <-ctx.Done():
			t.Fatalf("B's listener never %s", what)
		}
	}
	wait("listened")
	heard := a.say(t, id, "alice", "heard", parley.FinalityNone).Seq
	if ev := nextEvent(t, sub, 30*time.Second); ev.Seq != heard {
		t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, heard)
	}

	g.shut.Store(true)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var ended bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&ended); err != nil || !ended {
		t.Fatalf("ending the listener's connection: %v, %v", ended, err)
	}
	missed := a.say(t, id, "alice", "missed", parley.FinalityTurn).Seq
	g.shut.Store(false)
	wait("came back")
	if ev := nextEvent(t, sub, 30*time.Second); ev.Seq != missed {
		t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, missed)
	}
}
