// Package spool holds what the server writes to disk before it sends it:
// an export, read from the store at its pace and sent at the client's,
// and a backup. The files live in one directory the server owns (made
// 0700, beside its database). Each is made 0600 and leaves the directory
// as soon as it is open: the server reads it through its descriptor, and
// if the server dies the system frees it, so that nothing of it is left
// behind. What must keep a name while it is made (a backup: the store
// writes it by name) is removed when the server starts again (Open).
//
// Spooled exports are bounded in bytes, each and all of them together: a
// write past a bound fails, so that no client, nor many at once, fills the
// disk.
package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/parleyhq/parley"
)

// Limits bound the files of a Spool.
type Limits struct {
	// MaxFile bounds one file (default 4 GiB).
	MaxFile int64
	// MaxTotal bounds all the files open at once (default 8 GiB).
	MaxTotal int64
}

// Spool is a directory of files being sent, and what they hold in all.
// It is safe for concurrent use.
type Spool struct {
	dir    string
	limits Limits

	mu   sync.Mutex
	used int64
}

// New returns the spool over dir, which it does not touch until a file
// is made: Open is what a server calls as it starts. A dir of "" is the
// system's temporary directory, which the spool does not own: files made
// there leave it at once too, but nothing is swept from it.
func New(dir string, l Limits) *Spool {
	if l.MaxFile <= 0 {
		l.MaxFile = 4 << 30
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = 8 << 30
	}
	return &Spool{dir: dir, limits: l}
}

// Open makes dir if need be (0700), checks that it is a directory of this
// user's that nobody else may enter, removes what a server that died left
// in it (the entries named parley-…: backups it was making), and returns
// the spool over it with how many entries it removed.
func Open(dir string, l Limits) (*Spool, int, error) {
	if dir == "" {
		return nil, 0, errors.New("spool: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, err
	}
	if err := private(dir); err != nil {
		return nil, 0, err
	}
	left, err := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if err != nil {
		return nil, 0, err
	}
	for _, p := range left {
		if err := os.RemoveAll(p); err != nil {
			return nil, 0, err
		}
	}
	return New(dir, l), len(left), nil
}

// prefix begins the name of everything the spool makes.
const prefix = "parley-"

// private returns an error unless dir is a directory (not a link to one)
// of this process's user that no other user may enter.
func private(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("spool %s is not a directory", dir)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("spool %s belongs to another user (uid %d): give the server a directory of its own", dir, st.Uid)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("spool %s may be read by other users (mode %o): give the server a directory of its own, or chmod 700 it", dir, perm)
	}
	return nil
}

// Dir is the spool's directory ("" for the system's temporary one).
func (s *Spool) Dir() string { return s.dir }

// Used is how many bytes the spool's open files hold.
func (s *Spool) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Create makes a file, open for writing and then reading, that has no
// name: only the returned File reaches it, and closing it (or the process
// ending) frees its bytes. Writes past Limits fail: ETOOLARGE past
// MaxFile, EBUSY past MaxTotal. Close it.
func (s *Spool) Create(what string) (*File, error) {
	f, err := os.CreateTemp(s.dir, prefix+what+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, s: s, what: what}, nil
}

// Name returns a new name in the spool, for what must be made by name (a
// backup, which the store writes): nothing is there yet. Remove what is
// made under it once it is open (Unlink); a server that dies before is
// swept by the next Open.
func (s *Spool) Name(what, ext string) (string, error) {
	f, err := os.CreateTemp(s.dir, prefix+what+"-*"+ext)
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	return name, os.Remove(name)
}

// Unlink removes path and the files SQLite keeps beside a database of
// that name, if they are there.
func Unlink(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// File is a spooled file: written first, then read from its start.
type File struct {
	f    *os.File
	s    *Spool
	what string
	size int64
}

// Write implements io.Writer, within the spool's limits.
func (f *File) Write(p []byte) (int, error) {
	if err := f.s.reserve(f, int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.f.Write(p)
	if n < len(p) {
		f.s.release(int64(len(p) - n))
		f.size -= int64(len(p) - n)
	}
	return n, err
}

// reserve counts n more bytes of f, or refuses them.
func (s *Spool) reserve(f *File, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case f.size+n > s.limits.MaxFile:
		return parley.Errorf(parley.ETOOLARGE, "the %s is over %d bytes, the most the server spools for one (serve -max-export-bytes)", f.what, s.limits.MaxFile)
	case s.used+n > s.limits.MaxTotal:
		return parley.Errorf(parley.EBUSY, "the server is sending other exports, which hold %d bytes of its spool (serve -export-spool-bytes): try again once they are sent", s.used)
	}
	s.used += n
	f.size += n
	return nil
}

func (s *Spool) release(n int64) {
	s.mu.Lock()
	s.used -= n
	s.mu.Unlock()
}

// Size is how many bytes were written to f.
func (f *File) Size() int64 { return f.size }

// Reader reads what was written to f, from its start.
func (f *File) Reader() io.Reader { return io.NewSectionReader(f.f, 0, f.size) }

// Close frees f and its bytes.
func (f *File) Close() error {
	f.s.release(f.size)
	f.size = 0
	return f.f.Close()
}
