package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRefusesToRunOpenOffLoopback: with no tokens, the server starts only on
// a loopback address unless told otherwise.
func TestRefusesToRunOpenOffLoopback(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	refusesToStart(t, ctx, db, "0.0.0.0:0", "not a loopback address")
	// With a token it starts; and -allow-open is the explicit way out. Both
	// listen on a loopback port here, so nothing is exposed by the test.
	srv := startServer(t, db, "-allow-open")
	if !strings.Contains(srv.log(), "running OPEN") {
		t.Fatalf("open server did not warn:\n%s", srv.log())
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	first := runParley(t, "migrate", "-db", db)
	m := regexp.MustCompile(`schema version 0 -> (\d+)$`).FindStringSubmatch(first)
	if m == nil || m[1] == "0" {
		t.Fatalf("first migrate: %q", first)
	}
	if again := runParley(t, "migrate", "-db", db); !strings.HasSuffix(again, "schema version "+m[1]+" -> "+m[1]) {
		t.Fatalf("second migrate: %q, want nothing to do at version %s", again, m[1])
	}
	runParley(t, "token", "create", "-db", db, "-kind", "viewer", "-name", "ci")
	if out := runParley(t, "token", "list", "-db", db); !strings.Contains(out, "viewer") || !strings.Contains(out, "ci") || strings.Contains(out, "pk_") {
		t.Fatalf("token list: %q", out)
	}
}

// TestMigrateConcurrently: "parley migrate" run twice at once on a fresh
// database, beside a "parley serve" starting on it, all succeed (they take
// turns), and the server serves.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		db := filepath.Join(t.TempDir(), "parley.db")
		var wg sync.WaitGroup
		errs := make(chan string, 2)
		for range 2 {
			wg.Go(func() {
				if out, errOut, err := runParleyRaw("migrate", "-db", db); err != nil {
					errs <- fmt.Sprintf("migrate: %v: %s %s", err, out, errOut)
				}
			})
		}
		srv := startServer(t, db)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("round %d: %s", round, e)
		}
		if out := runParley(t, "migrate", "-db", db); !regexp.MustCompile(`schema version (\d+) -> (\d+)$`).MatchString(out) {
			t.Fatalf("round %d: migrating again: %q", round, out)
		}
		srv.stop()
	}
}

// TestTokenCreateNamesItsFlags: "parley token create" with a flag missing
// or misplaced names the flag to give, and creates nothing.
func TestTokenCreateNamesItsFlags(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-kind", "agent"}, "-agent"},
		{[]string{"-kind", "agent", "-agent", "bad id"}, "-agent"},
		{[]string{}, "-kind"},
		{[]string{"-kind", "robot"}, "-kind"},
		{[]string{"-kind", "viewer", "-agent", "alice"}, "-agent"},
	} {
		_, stderr := runParleyFail(t, append([]string{"token", "create", "-db", db}, c.args...)...)
		if !strings.Contains(stderr, c.says) {
			t.Errorf("token create %v said %q; want it to name %s", c.args, stderr, c.says)
		}
	}
	if out := runParley(t, "token", "list", "-db", db); strings.Contains(out, "agent") || strings.Contains(out, "viewer") {
		t.Fatalf("a refused token create made a token:\n%s", out)
	}
}

// TestCLIErrorsAreReadable: a command the server refuses prints the
// server's message in one line, never the raw JSON of the error body.
func TestCLIErrorsAreReadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "parley.db")
	viewer := runParley(t, "token", "create", "-db", db, "-kind", "viewer")
	srv := startServer(t, db)
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"backup as a viewer", []string{"backup", "-server", srv.url, "-token", viewer, filepath.Join(dir, "b1.db")}, "forbidden"},
		{"backup with no token", []string{"backup", "-server", srv.url, filepath.Join(dir, "b2.db")}, "unauthorized"},
		{"export of nothing", []string{"export", "-server", srv.url, "-token", viewer, "nothing-here"}, "not_found"},
		{"import as a viewer", []string{"import", "-server", srv.url, "-token", viewer, db}, "forbidden"},
	} {
		_, stderr := runParleyFail(t, c.args...)
		if !strings.Contains(stderr, c.says) || strings.Contains(stderr, "{") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: said %q; want one line that says %q, and no JSON", c.name, stderr, c.says)
		}
	}
}
