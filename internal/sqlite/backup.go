package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
	sqlite "modernc.org/sqlite"
)

// Progress is told, as a backup or a restore goes, what it is doing (a
// word: "copying", "restoring") and how many pages of how many it did.
type Progress func(phase string, done, total int)

// backupStep is how many pages one step of SQLite's online backup copies
// (16 MiB of 4 KiB pages): the progress is told after each.
const backupStep = 4096

// pageCopier is what the driver's connections offer for SQLite's online
// backup API.
type pageCopier interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
	NewRestore(srcURI string) (*sqlite.Backup, error)
}

var _ store.Backuper = (*DB)(nil)

// Backup implements store.Backuper: Backup of the database's own file.
func (db *DB) Backup(ctx context.Context, dst string, progress func(phase string, done, total int)) error {
	return Backup(ctx, db.path, dst, progress)
}

// Backup writes a copy of the database at src, as it is at one moment, to a
// new file dst, while the database stays open to readers and writers (of
// this process or another): it reads one snapshot of it (WAL mode lets
// writers go on meanwhile) and copies its pages with SQLite's online backup
// API, a step at a time, into a file beside dst that becomes dst once whole
// and synced. dst must not exist. It returns ENOTFOUND if src does not.
func Backup(ctx context.Context, src, dst string, progress Progress) error {
	if progress == nil {
		progress = func(string, int, int) {}
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return parley.Errorf(parley.ENOTFOUND, "there is no database at %s", src)
	}
	if _, err := os.Stat(dst); err == nil {
		return parley.Errorf(parley.EBUSY, "%s exists: back up to a new file", dst)
	}
	part, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".partial-*")
	if err != nil {
		return err
	}
	tmp := part.Name()
	part.Close()
	defer os.Remove(tmp) // once renamed, there is nothing to remove
	r, err := sql.Open("sqlite", readOnly(src))
	if err != nil {
		return err
	}
	defer r.Close()
	if err := copyPages(ctx, r, tmp, false, "copying", progress); err != nil {
		return err
	}
	if err := singleFile(ctx, tmp); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncFile(filepath.Dir(dst))
}

// copyPages copies, with SQLite's online backup API, the main database of
// one connection of db into the file at path (restore false), or the file
// at path into it (restore true), in steps. A backup holds one read
// transaction on db for the whole copy, so that it is one snapshot: a
// step would otherwise start again from the first page whenever another
// connection wrote in between, which under a steady write load could be
// forever.
func copyPages(ctx context.Context, db *sql.DB, path string, restore bool, phase string, progress Progress) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !restore {
		if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
			return err
		}
		defer conn.ExecContext(context.Background(), `ROLLBACK`)
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			return err
		}
	}
	uri := "file:" + (&url.URL{Path: path}).EscapedPath()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(pageCopier)
		if !ok {
			return fmt.Errorf("the SQLite driver has no online backup")
		}
		var b *sqlite.Backup
		var err error
		if restore {
			b, err = c.NewRestore(uri)
		} else {
			b, err = c.NewBackup(uri)
		}
		if err != nil {
			return err
		}
		for more := true; more; {
			if err := ctx.Err(); err != nil {
				return errors.Join(err, b.Finish())
			}
			if more, err = b.Step(backupStep); err != nil {
				return errors.Join(err, b.Finish())
			}
			total := b.PageCount()
			progress(phase, total-b.Remaining(), total)
		}
		return b.Finish()
	})
}

// singleFile turns the database at path from WAL mode (a copy of a
// database in WAL mode is in WAL mode) to a rollback journal, so that it
// is one file, which readers open without making a -wal and -shm beside
// it. The server puts it back in WAL mode when it opens it.
func singleFile(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return err
	}
	var mode string
	err = db.QueryRowContext(ctx, `PRAGMA journal_mode = DELETE`).Scan(&mode)
	return errors.Join(err, db.Close())
}

// readOnly is the connection string of a database read and never written,
// whatever its journal mode.
func readOnly(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(10000)"
}

// syncFile flushes a file (or a directory's entries) to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	// Version is the schema version of the backup, before it was brought
	// up to date.
	Version int64
	// Conversations counts the conversations restored, each with a new
	// epoch.
	Conversations int
}

// Restore replaces the database at dst (made if there is none) with the
// backup at src, which it checks first (SQLite's quick_check, and a schema
// this build knows): dst must not be in use, so a server must be stopped
// (ErrInUse otherwise). The backup is copied beside dst, brought up to this
// build's schema, and every conversation in it gets a new epoch (epoch, for
// each), so that a client holding a position of the history it replaces
// reloads instead of resuming; then its pages replace dst's in one
// transaction, holding dst's lock from the start, so that no server opens
// dst half restored.
func Restore(ctx context.Context, src, dst string, epoch func() string, progress Progress) (RestoreResult, error) {
	var res RestoreResult
	if progress == nil {
		progress = func(string, int, int) {}
	}
	if same, err := samePath(src, dst); err != nil || same {
		return res, errors.Join(err, parley.Errorf(parley.EINVALIDVALUE, "the backup and the database are the same file"))
	}
	version, err := CheckBackup(ctx, src)
	if err != nil {
		return res, err
	}
	res.Version = version
	// dst, held from now on: in WAL mode with exclusive locking, the first
	// read takes a lock no other connection, of any process, can share.
	target, err := sql.Open("sqlite", "file:"+(&url.URL{Path: dst}).EscapedPath()+"?_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return res, err
	}
	defer target.Close()
	target.SetMaxOpenConns(1)
	target.SetConnMaxIdleTime(0)
	if _, err := target.ExecContext(ctx, `SELECT count(*) FROM sqlite_schema`); err != nil {
		if isBusy(err) {
			return res, ErrInUse(dst)
		}
		return res, err
	}
	part, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".restore-*")
	if err != nil {
		return res, err
	}
	tmp := part.Name()
	part.Close()
	os.Remove(tmp)
	defer func() {
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
			os.Remove(p)
		}
	}()
	if err := Backup(ctx, src, tmp, progress); err != nil {
		return res, err
	}
	staged, err := Open(ctx, tmp, Options{})
	if err != nil {
		return res, fmt.Errorf("bringing the backup up to date: %w", err)
	}
	res.Conversations, err = staged.RenewEpochs(ctx, store.RenewEpochsParams{Epoch: epoch})
	if err = errors.Join(err, staged.Close()); err != nil {
		return res, err
	}
	if err := copyPages(ctx, target, tmp, true, "restoring", progress); err != nil {
		return res, err
	}
	_, err = target.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return res, err
}

// ErrInUse is the EBUSY of a restore into a database that is open
// elsewhere.
func ErrInUse(path string) error {
	return parley.Errorf(parley.EBUSY, "%s is in use (is a server running on it?): stop the server, then restore", path)
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var se interface{ Code() int }
	return errors.As(err, &se) && se.Code()&0xff == 5 // SQLITE_BUSY and its extended codes
}

// samePath reports whether a and b name the same existing file.
func samePath(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, parley.Errorf(parley.ENOTFOUND, "there is no backup at %s", a)
		}
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil && os.SameFile(sa, sb), err
}

// CheckBackup checks that the file at path is a whole SQLite database of
// Parley whose schema this build knows, and returns its schema version.
func CheckBackup(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", readOnly(path))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	bad := func(why string, err error) error {
		if err != nil {
			why += ": " + err.Error()
		}
		return parley.Errorf(parley.EINVALIDVALUE, "%s is not a backup of a Parley database: %s", path, why)
	}
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
		return 0, bad("SQLite's quick_check says "+strconv.Quote(check), err)
	}
	var version int64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&version); err != nil {
		return 0, bad("it has no schema version", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM conversations`).Scan(&n); err != nil {
		return 0, bad("it has no conversations table", err)
	}
	if latest := LatestVersion(); version > latest {
		return 0, parley.Errorf(parley.EINVALIDVALUE, "%s has schema version %d, newer than this build's %d: restore it with a newer parley", path, version, latest)
	}
	return version, nil
}

// LatestVersion is the schema version of this build's last migration.
func LatestVersion() int64 {
	names, _ := fs.Glob(Migrations(), "*.sql")
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err == nil && v > latest {
			latest = v
		}
	}
	return latest
}
