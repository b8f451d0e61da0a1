package spool_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/spool"
)

// TestOpenSweepsAndRefuses: Open makes its directory private, removes what
// a server left there (and nothing else), and refuses a directory that
// other users may enter or that is not a directory.
func TestOpenSweepsAndRefuses(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "spool")
	if _, _, err := spool.Open(dir, spool.Limits{}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("made %v, %v; want mode 0700", info.Mode(), err)
	}
	for _, name := range []string{"parley-backup-1.db", "parley-export-2", "kept"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, n, err := spool.Open(dir, spool.Limits{}); err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want 2", n, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 || left[0].Name() != "kept" {
		t.Fatalf("left %v, want only what is not the server's", left)
	}

	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := spool.Open(open, spool.Limits{}); err == nil || !strings.Contains(err.Error(), "other users") {
		t.Fatalf("a directory others may read: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, _, err := spool.Open(file, spool.Limits{}); err == nil {
		t.Fatal("a file was taken for a spool")
	}
}

// TestFilesAreNamelessAndBounded: a file of the spool has no name once
// made, reads back what was written, and writes past the bounds fail:
// too_large past one file's, busy past all of them together; closing a
// file frees its bytes.
func TestFilesAreNamelessAndBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := spool.New(dir, spool.Limits{MaxFile: 10, MaxTotal: 15})
	a, err := s.Create("export")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a spooled file has a name: %v", left)
	}
	if _, err := a.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); parley.ErrorCode(err) != parley.ETOOLARGE {
		t.Fatalf("past one file's bound: %v", err)
	}
	b, err := s.Create("export")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("012345")); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("past the bound of all: %v", err)
	}
	if got, _ := io.ReadAll(a.Reader()); string(got) != "0123456789" || s.Used() != 10 {
		t.Fatalf("read back %q; the spool counts %d", got, s.Used())
	}
	a.Close()
	if _, err := b.Write([]byte("012345")); err != nil || s.Used() != 6 {
		t.Fatalf("once the other is closed: %v, %d bytes counted", err, s.Used())
	}
	b.Close()
	name, err := s.Name("backup", ".db")
	if err != nil || !strings.HasPrefix(filepath.Base(name), "parley-backup-") || filepath.Dir(name) != dir {
		t.Fatalf("a name for a backup: %q %v", name, err)
	}
	for _, p := range []string{name, name + "-wal"} {
		os.WriteFile(p, nil, 0o600)
	}
	if err := spool.Unlink(name); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left after Unlink: %v", left)
	}
}
