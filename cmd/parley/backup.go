package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// runBackup copies a running (or stopped) server's SQLite store into a new
// file: from the file itself (-db), or downloaded from a server's
// GET /v1/admin/backup (-server).
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", stderr)
	dbPath := fs.String("db", envOr("PARLEY_DB", "./parley.db"), "the SQLite database file to back up (a server may be running on it)")
	server := fs.String("server", "", "download the backup from this server instead (GET /v1/admin/backup; an admin token)")
	token := fs.String("token", envOr("PARLEY_TOKEN", ""), "with -server: a bearer token (admin)")
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: refused, back it up with pg_dump")
	progress := fs.String("progress", "auto", "auto (a bar on a terminal, else a line at each tenth), on (a bar), off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("backup: give the file to write (it must not exist)")
	}
	if *pgURL != "" {
		return fmt.Errorf("backup: the store is in PostgreSQL; back it up with pg_dump or point-in-time recovery (docs/operations.md)")
	}
	dst := fs.Arg(0)
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("backup: %s exists; back up to a new file", dst)
	}
	bar, err := newMeter(stderr, *progress)
	if err != nil {
		return err
	}
	start := time.Now()
	if *server != "" {
		err = download(ctx, *server, *token, dst, bar)
	} else {
		err = sqlite.Backup(ctx, *dbPath, dst, bar.pages("backing up"))
	}
	bar.finish()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	from := *dbPath
	if *server != "" {
		from = *server
	}
	size := int64(0)
	if st, err := os.Stat(dst); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %s in %s\n", from, dst, bytesOf(size), time.Since(start).Round(time.Millisecond))
	return nil
}

// download saves a server's backup into dst, through a file beside it that
// becomes dst once whole and checked.
func download(ctx context.Context, server, token, dst string, bar *meter) error {
	u, err := url.JoinPath(server, "/v1/admin/backup")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	part, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(part.Name())
	var in io.Reader = resp.Body
	if bar.bar != nil {
		bar.start("downloading", resp.ContentLength, bytesOf)
		in = bar.bar.reader(in)
	}
	n, err := io.Copy(part, in)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("the download ended after %d of %d bytes", n, resp.ContentLength)
	}
	if err == nil {
		err = part.Sync()
	}
	if cerr := part.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, err := sqlite.CheckBackup(ctx, part.Name()); err != nil {
		return err
	}
	return os.Rename(part.Name(), dst)
}

// runRestore replaces a stopped server's store with a backup, each
// conversation with a new epoch; with -postgres and no file, it only gives
// every conversation of the database a new epoch, after a restore made with
// PostgreSQL's own tools.
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("restore", stderr)
	dbPath := fs.String("db", envOr("PARLEY_DB", "./parley.db"), "the SQLite database file to replace (no server may be running on it)")
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL, restored with its own tools: give every conversation a new epoch (no file)")
	progress := fs.String("progress", "auto", "auto (a bar on a terminal, else a line at each tenth), on (a bar), off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pgURL != "" {
		if fs.NArg() != 0 {
			return fmt.Errorf("restore: with -postgres, restore the database with pg_restore or point-in-time recovery first (docs/operations.md), then run this without a file")
		}
		n, err := renewPostgresEpochs(ctx, *pgURL)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		fmt.Fprintf(stdout, "gave %d conversations a new epoch: clients holding a position of the history before reload\n", n)
		return nil
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("restore: give the backup file")
	}
	bar, err := newMeter(stderr, *progress)
	if err != nil {
		return err
	}
	res, err := sqlite.Restore(ctx, fs.Arg(0), *dbPath, parley.NewEpoch, bar.pages(""))
	bar.finish()
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored %s into %s: %d conversations, each with a new epoch (clients holding a position reload); schema %d brought to %d\n",
		fs.Arg(0), *dbPath, res.Conversations, res.Version, sqlite.LatestVersion())
	return nil
}

// renewPostgresEpochs gives every conversation of a PostgreSQL database a
// new epoch, refusing while a server listens on it.
func renewPostgresEpochs(ctx context.Context, url string) (int, error) {
	if n, err := postgres.Listeners(ctx, url); err != nil {
		return 0, err
	} else if n > 0 {
		return 0, fmt.Errorf("servers are running on this database (%d listening for its appends): stop them first, since each holds the epochs it read", n)
	}
	db, err := postgres.Open(ctx, url)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return db.RenewEpochs(ctx, store.RenewEpochsParams{Epoch: parley.NewEpoch})
}

// meter is the progress of a backup or a restore on stderr.
type meter struct {
	w     io.Writer
	mode  string
	bar   *progressBar // of the current phase; nil when off
	phase string
}

func newMeter(w io.Writer, mode string) (*meter, error) {
	switch mode {
	case "auto", "on", "off":
	default:
		return nil, errors.New("-progress: want auto, on or off")
	}
	m := &meter{w: w, mode: mode}
	if mode != "off" {
		m.bar = newProgressBar(w, "", 0, bytesOf, false) // replaced at the first phase
		m.bar.done = true
	}
	return m, nil
}

// start begins showing a phase.
func (m *meter) start(phase string, size int64, unit func(int64) string) {
	if m.bar == nil {
		return
	}
	m.bar.stop()
	m.phase = phase
	m.bar = newProgressBar(m.w, phase, size, unit, m.mode == "on" || isTerminal(m.w))
}

// pages is a sqlite.Progress that shows each phase's pages under its
// name, or under label when it is set.
func (m *meter) pages(label string) sqlite.Progress {
	return func(phase string, done, total int) {
		if label != "" {
			phase = label
		}
		if m.bar == nil {
			return
		}
		if phase != m.phase {
			m.start(phase, int64(total), pagesOf)
			m.bar.suffix = " pages"
		}
		m.bar.set(int64(done), int64(total))
	}
}

// finish ends the last phase's line.
func (m *meter) finish() {
	if m.bar != nil {
		m.bar.stop()
	}
}

// pagesOf writes a number of pages: the bar's line says "pages" once.
func pagesOf(n int64) string { return strconv.FormatInt(n, 10) }
