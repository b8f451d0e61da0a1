package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeFlagErrors: each flag given a value out of its bounds stops
// parley serve before it opens anything, with exit status 2 and a line of
// its own that names the flag and what it may be.
func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]string{}
	for _, c := range []struct {
		args []string
		says string // besides the flag's name
	}{
		{[]string{"-max-thread-depth", "0"}, "at least 1"},
		{[]string{"-max-queued-prompts", "0"}, "limits must be positive"},
		{[]string{"-max-delegates", "0"}, "at least 1"},
		{[]string{"-max-delegates", "1025"}, "at most 1024"},
		{[]string{"-claim-ttl", "0s"}, "above 0s"},
		{[]string{"-max-claim-ttl", "1s"}, "at least -claim-ttl"},
		{[]string{"-max-message-bytes", "0"}, "at least 1"},
		{[]string{"-max-message-bytes", "100000000"}, "over what a stream's frame may carry"},
		{[]string{"-max-streaming", "0"}, "at least 1"},
		{[]string{"-subscriber-buffer", "0"}, "at least 1"},
		{[]string{"-subscriber-buffer-bytes", "0"}, "at least 1"},
		{[]string{"-subscriber-memory", "1048576"}, "at least 16777216"},
		{[]string{"-runner-grace", "0s"}, "above 0s"},
		{[]string{"-collect-window", "0s"}, "limits must be positive"},
		{[]string{"-collect-window", "25h"}, "at most a day"},
		{[]string{"-runner-lease", "1ms"}, "at least 3ms"},
		{[]string{"-turn-lease", "500ms"}, "from 1s to 24h"},
		{[]string{"-turn-lease", "25h"}, "from 1s to 24h"},
		{[]string{"-max-import-bytes", "0"}, "at least 1"},
		{[]string{"-max-export-bytes", "0"}, "at least 1"},
		{[]string{"-export-spool-bytes", "0"}, "at least 1"},
		{[]string{"-import-lease", "0s"}, "above 0s"},
		{[]string{"-max-tasks-per-agent", "0"}, "at least 1"},
		{[]string{"-body-timeout", "0s"}, "above 0s"},
		{[]string{"-header-timeout", "0s"}, "above 0s"},
		{[]string{"-create-rate", "-1"}, "0 for no bound"},
		{[]string{"-create-burst", "0"}, "at least 1"},
		{[]string{"-max-token-connections", "-1"}, "0 for no bound"},
		{[]string{"-runner-connect-rate", "-1"}, "0 for no bound"},
		{[]string{"-runner-connect-burst", "0"}, "at least 1"},
		{[]string{"-sign-in-rate", "-1"}, "0 for no bound"},
		{[]string{"-sign-in-burst", "0"}, "at least 1"},
		{[]string{"-max-body-memory", "1024"}, "at least 16777216"},
		{[]string{"-max-conns", "0"}, "at least 1"},
		{[]string{"-max-conns-per-addr", "-1"}, "at least 1"},
		{[]string{"-max-conns", "10", "-max-conns-per-addr", "11"}, "is over -max-conns 10"},
		{[]string{"-delivery-give-up", "30s"}, "at least a minute"},
		{[]string{"-delivery-retention", "30s"}, "at least a minute"},
		{[]string{"-chunk-retention", "30s"}, "at least a minute"},
		{[]string{"-chunk-retention", "1.5d"}, "whole number of days"},
		{[]string{"-log-level", "loud"}, "debug, info, warn or error"},
		{[]string{"-sqlite-sync", "fast"}, "full or normal"},
		{[]string{"-channel-webhook", "slack"}, "TYPE=URL"},
		{[]string{"-open-host", ""}, "empty value"},
		{[]string{"-max-streaming", "many"}, "invalid value"},
	} {
		name := c.args[len(c.args)-2]
		args := append([]string{"serve", "-db", filepath.Join(dir, "parley.db"), "-addr", "127.0.0.1:0"}, c.args...)
		var stdout, stderr bytes.Buffer
		if status := exitStatus(context.Background(), args, &stdout, &stderr); status != 2 {
			t.Errorf("%v: exit status %d, want 2", c.args, status)
		}
		line := lastLine(stderr.String())
		if !strings.HasPrefix(line, "parley: ") || !strings.Contains(line, name) || !strings.Contains(line, c.says) {
			t.Errorf("%v: said %q; want one line that names %s and says %q", c.args, line, name, c.says)
		}
		if other, ok := seen[line]; ok {
			t.Errorf("%v and %s say the same: %q", c.args, other, line)
		}
		seen[line] = strings.Join(c.args, " ")
	}
	if _, err := os.Stat(filepath.Join(dir, "parley.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused serve made its database (%v)", err)
	}
}

// TestServeHelp: parley serve -h prints every flag with its default and
// nothing else, as the flag package does (exit status 2, as ever); parley
// -h prints the commands.
func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := exitStatus(context.Background(), []string{"serve", "-h"}, &stdout, &stderr); status != 2 {
		t.Errorf("serve -h: exit status %d, want 2", status)
	}
	help := stderr.String()
	if !strings.HasPrefix(help, "Usage of parley serve:") || strings.Contains(help, "parley: ") ||
		!strings.Contains(help, "-max-conns-per-addr int") || !strings.Contains(help, `(default "127.0.0.1:7700")`) {
		t.Errorf("serve -h printed:\n%s", help)
	}
	stdout.Reset()
	if status := exitStatus(context.Background(), []string{"-h"}, &stdout, io.Discard); status != 0 || !strings.Contains(stdout.String(), "parley serve") {
		t.Errorf("-h: exit status %d, printed:\n%s", status, stdout.String())
	}
}

// TestServeShutdown: Run serves /healthz on a free loopback port; once its
// context ends it returns having stopped every background loop and closed
// the store, so that nothing else holds the database file and a second
// Run on the same directory starts and serves.
func TestServeShutdown(t *testing.T) {
	t.Setenv("PARLEY_POSTGRES_URL", "")
	db := filepath.Join(t.TempDir(), "parley.db")
	for round := range 2 {
		m, base, stop := startServeMain(t, db)
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: /healthz: %s", round, resp.Status)
		}
		if err := lockExclusively(db); err == nil {
			t.Fatalf("round %d: the database could be locked while the server runs", round)
		}
		if err := stop(); err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
		if running := m.loops.Running(); len(running) > 0 {
			t.Fatalf("round %d: loops still running after Run returned: %v", round, running)
		}
		if started := m.loops.Started(); len(started) < 5 {
			t.Fatalf("round %d: only %v were started", round, started)
		}
		if err := lockExclusively(db); err != nil {
			t.Fatalf("round %d: the store is still open after Run returned: %v", round, err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("round %d: Close after Run: %v", round, err)
		}
	}
}

// startServeMain runs parley serve on db and a free loopback port until
// stop is called; stop returns what Run returned.
func startServeMain(t *testing.T, db string) (m *serveMain, base string, stop func() error) {
	t.Helper()
	m = newServeMain(io.Discard)
	if err := m.ParseFlags([]string{"-db", db, "-addr", "127.0.0.1:0", "-log-level", "error"}); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	m.onReady = func(_ context.Context, url string, _ *slog.Logger) { ready <- url }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5 s of its context's end")
			return nil
		}
	}
	select {
	case base = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		_ = stop()
		t.Fatal("the server did not listen within 5 s")
	}
	t.Cleanup(func() { cancel() })
	return m, base, stop
}

// lockExclusively takes and lets go of a lock on the SQLite file at path
// that no other connection may share: it fails while a store has it open.
func lockExclusively(path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`SELECT count(*) FROM sqlite_schema`)
	return err
}

// lastLine is the last line of text.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}
