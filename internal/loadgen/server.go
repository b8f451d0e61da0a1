package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the "sqlite" driver, to checkpoint and measure the files
)

// serverProc is a `parley serve` the run started.
type serverProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *tailWriter
	exited chan struct{}
	err    error // set before exited is closed
}

// startServer runs argv plus args plus -addr on a free loopback port and
// waits until it answers /readyz.
func startServer(ctx context.Context, argv, args []string) (*serverProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(argv[0], append(append(append([]string{}, argv[1:]...), args...), "-addr", addr)...)
	p := &serverProc{cmd: cmd, url: "http://" + addr, stderr: &tailWriter{max: 16 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = nil, p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the server exited before it was ready (%v): %s", p.err, p.stderr.String())
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("the server was not ready after 30s: %s", p.stderr.String())
		}
	}
}

// stop interrupts the server, waits for it to shut down (15 s at most,
// then kills it) and returns how it ended if that was not cleanly.
func (p *serverProc) stop() error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("the server did not stop within 15s after an interrupt; killed")
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// procSample is what /proc says about a process at one moment.
type procSample struct {
	at       time.Time
	cpuTicks int64 // user + system
	rss      int64 // bytes
}

// readProc reads the CPU time and resident set of pid.
func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, errors.New("unexpected /proc stat format")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return s, err
	}
	s.cpuTicks = utime + stime
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return s, err
			}
			s.rss = kb << 10
		}
	}
	return s, nil
}

// cores is the CPU used between two samples, in cores (1.0: one core busy).
func cores(a, b procSample) float64 {
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.cpuTicks-a.cpuTicks) / clockTicks / d
}

// sizer measures how many bytes a store takes.
type sizer interface {
	size(ctx context.Context) (int64, error)
	describe() string
	close()
}

// sqliteSizer measures a SQLite file and its WAL after a TRUNCATE checkpoint
// (which a second connection may run at any time, as SQLite's own
// auto-checkpoint does), so that the figure is the pages in use rather than
// how far the WAL happened to grow.
type sqliteSizer struct {
	path string
	db   *sql.DB
}

func newSQLiteSizer(path string) (*sqliteSizer, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &sqliteSizer{path: path, db: db}, nil
}

func (s *sqliteSizer) size(ctx context.Context) (int64, error) {
	if err := s.truncate(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, p := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// truncate checkpoints the whole WAL into the database file and empties
// it. A checkpoint that meets a reader of an older snapshot, or the
// server's own checkpointer, copies what it can and reports busy, leaving
// the WAL as long as it was: that is tried again, for at most 30 s, since
// a WAL that happened to be long would be counted as stored bytes.
func (s *sqliteSizer) truncate(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var busy, logPages, done int
		err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", s.path, err)
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("checkpoint %s: still busy after 30 s (%d of %d WAL pages copied)", s.path, done, logPages)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *sqliteSizer) describe() string {
	return "growth of the SQLite db+wal files, each measured after wal_checkpoint(TRUNCATE)"
}

func (s *sqliteSizer) close() { s.db.Close() }

// pgSizer measures the tables of one schema (pg_total_relation_size: heap,
// indexes and TOAST), or with no schema the whole database.
type pgSizer struct {
	conn   *pgx.Conn
	schema string
}

func newPGSizer(ctx context.Context, pgURL, schema string) (*pgSizer, error) {
	conn, err := connectPG(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &pgSizer{conn: conn, schema: schema}, nil
}

func (s *pgSizer) size(ctx context.Context) (int64, error) {
	var n int64
	var err error
	if s.schema == "" {
		err = s.conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	} else {
		err = s.conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
			JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind IN ('r', 'm')`, s.schema).Scan(&n)
	}
	return n, err
}

func (s *pgSizer) describe() string {
	if s.schema == "" {
		return "growth of pg_database_size"
	}
	return "growth of pg_total_relation_size of the schema's tables"
}

func (s *pgSizer) close() { s.conn.Close(context.Background()) }

// connectPG opens one connection to the database at pgURL. The URL may
// carry pgxpool's settings (pool_max_conns and the like, for parley
// serve's pool), which a single connection would send the server as
// unknown parameters: they are parsed away.
func connectPG(ctx context.Context, pgURL string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

// randomName returns prefix followed by 8 random hex digits.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// createSchema makes a new schema in the database at pgURL and returns its
// name and a URL whose connections use it.
func createSchema(ctx context.Context, pgURL, prefix string) (schema, schemaURL string, err error) {
	conn, err := connectPG(ctx, pgURL)
	if err != nil {
		return "", "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	schema = randomName(prefix)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", "", err
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return schema, u.String(), nil
}

// dropSchema drops a schema made by createSchema, with everything in it.
func dropSchema(pgURL, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connectPG(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	return err
}
