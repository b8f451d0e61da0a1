package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// writeLoad appends to conversations of db until stop is closed, each
// append a few events and a message row, and returns how many it made.
func writeLoad(t *testing.T, db *sqlite.DB, ids []string, stop <-chan struct{}) func() int64 {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	for w, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(1); ; seq += 2 {
				select {
				case <-stop:
					return
				default:
				}
				m := &parley.Message{ID: fmt.Sprintf("m%d", seq), ConversationID: id, Seq: seq + 1, Role: parley.RoleAssistant, AgentID: "a",
					Parts: []parley.Part{{Type: parley.PartText, Text: fmt.Sprintf("text %d of writer %d", seq, w)}}, Status: parley.StatusComplete}
				events := []parley.Event{trace(id, seq+1), trace(id, seq+2)}
				if err := db.Append(context.Background(), store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: events, Messages: []*parley.Message{m}, State: []byte(`{}`)}); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	return func() int64 { wg.Wait(); return n.Load() }
}

func trace(id string, seq int64) parley.Event {
	return parley.Event{ConversationID: id, Seq: seq, Type: parley.EventTrace, Turn: 1, AgentID: "a", Finality: parley.FinalityNone,
		Time: parley.NewTime(time.Now()), Data: json.RawMessage(fmt.Sprintf(`{"payload":"%0200d"}`, seq))}
}

// newConversations makes n conversations of db (their seq 1 written).
func newConversations(t testing.TB, db store.Store, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		id := uuid.NewString()
		c := parley.Conversation{ID: id, Epoch: "e0000000", Participants: []string{"a"}, CreatedAt: parley.NewTime(time.Now())}
		if err := db.CreateConversation(context.Background(), store.CreateConversationParams{Conversation: c, Events: []parley.Event{trace(id, 1)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestBackupUnderWrites backs up a database while writers append to it:
// the backup is a whole database whose every conversation is a prefix of
// the source's (the same events and rows, as of one moment: its head
// matches its log, and each message row its event), and the progress goes
// up to every page.
func TestBackupUnderWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids := newConversations(t, db, 4)
	stop := make(chan struct{})
	wait := writeLoad(t, db, ids, stop)
	time.Sleep(100 * time.Millisecond)
	var last, total int
	steps := 0
	err = sqlite.Backup(ctx, db.Path(), filepath.Join(dir, "backup.db"), func(phase string, done, all int) {
		if phase != "copying" || done < last || done > all {
			t.Errorf("progress %s %d of %d after %d", phase, done, all, last)
		}
		last, total, steps = done, all, steps+1
	})
	time.Sleep(50 * time.Millisecond)
	close(stop)
	if n := wait(); err != nil || n == 0 {
		t.Fatalf("backup: %v, with %d writes", err, n)
	}
	if steps == 0 || last != total {
		t.Fatalf("progress ended at %d of %d after %d steps", last, total, steps)
	}
	if err := sqlite.Backup(ctx, db.Path(), filepath.Join(dir, "backup.db"), nil); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("a backup over an existing file: %v", err)
	}
	bk, err := sqlite.Open(ctx, filepath.Join(dir, "backup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	for _, id := range ids {
		src, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id})
		if err != nil {
			t.Fatal(err)
		}
		got, err := bk.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id})
		if err != nil {
			t.Fatal(err)
		}
		h, err := bk.Head(ctx, id)
		head := h.Seq
		if err != nil || head != int64(len(got)) || len(got) > len(src) {
			t.Fatalf("backup of %s: head %d, %d events (source %d), err %v", id, head, len(got), len(src), err)
		}
		for i, e := range got {
			if e.Seq != int64(i+1) || string(e.Data) != string(src[i].Data) {
				t.Fatalf("backup of %s: event %d differs", id, i+1)
			}
		}
		ms, err := bk.ListMessages(ctx, store.ListMessagesParams{ConversationID: id})
		if err != nil || int64(len(ms)) != (head-1)/2 {
			t.Fatalf("backup of %s: %d rows for head %d, err %v", id, len(ms), head, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "backup.db-wal")); err == nil {
		if st, _ := os.Stat(filepath.Join(dir, "backup.db-wal")); st.Size() > 0 {
			t.Logf("the backup has a WAL of %d bytes while open", st.Size())
		}
	}
}

// backedUp makes a database (dir/parley.db, open) of n conversations and
// a backup of it (dir/backup.db).
func backedUp(t *testing.T, n int) (string, *sqlite.DB, []string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := newConversations(t, db, n)
	if err := sqlite.Backup(context.Background(), db.Path(), filepath.Join(dir, "backup.db"), nil); err != nil {
		t.Fatal(err)
	}
	return dir, db, ids
}

// TestRestore restores a backup into a new file and over a database: the
// conversations are the backup's, each with a new epoch in its record and
// its first event, and everything else as it was.
func TestRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, db, ids := backedUp(t, 3)
	// Written after the backup: gone once it is restored.
	later := newConversations(t, db, 1)[0]
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	epoch := func() string { n++; return fmt.Sprintf("f%07d", n) }
	for _, dst := range []string{filepath.Join(dir, "parley.db"), filepath.Join(dir, "new.db")} {
		var phases []string
		res, err := sqlite.Restore(ctx, filepath.Join(dir, "backup.db"), dst, epoch, func(phase string, done, total int) {
			if len(phases) == 0 || phases[len(phases)-1] != phase {
				phases = append(phases, phase)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Conversations != 3 || res.Version != sqlite.LatestVersion() || fmt.Sprint(phases) != "[copying restoring]" {
			t.Fatalf("restore into %s: %+v, phases %v", dst, res, phases)
		}
		back, err := sqlite.Open(ctx, dst, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			rec, err := back.GetConversation(ctx, id)
			if err != nil || rec.Conversation.Epoch[0] != 'f' {
				t.Fatalf("%s in %s: %+v, err %v", id, dst, rec, err)
			}
		}
		if _, err := back.GetConversation(ctx, later); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("a conversation made after the backup is in the restored %s: %v", dst, err)
		}
		back.Close()
	}
}

// TestRestoreRefusals: a restore into a database in use, from something
// that is not a whole backup of Parley, from a newer schema, or onto the
// backup itself is refused, and leaves the database as it was.
func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, db, ids := backedUp(t, 1)
	backup := filepath.Join(dir, "backup.db")
	epoch := func() string { return "f0000000" }
	if _, err := sqlite.Restore(ctx, backup, db.Path(), epoch, nil); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("restore into a database in use: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database at all, but long enough to look like one maybe"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if e, err := sql.Open("sqlite", empty); err == nil {
		e.Exec(`CREATE TABLE t (x)`)
		e.Close()
	}
	newer := filepath.Join(dir, "newer.db")
	if err := sqlite.Backup(ctx, backup, newer, nil); err != nil {
		t.Fatal(err)
	}
	if nw, err := sql.Open("sqlite", newer); err == nil {
		_, err = nw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)`)
		nw.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]struct {
		src  string
		code string
	}{
		"missing":       {filepath.Join(dir, "none.db"), parley.ENOTFOUND},
		"junk":          {junk, parley.EINVALIDVALUE},
		"not parley's":  {empty, parley.EINVALIDVALUE},
		"newer schema":  {newer, parley.EINVALIDVALUE},
		"the same file": {db.Path(), parley.EINVALIDVALUE},
	} {
		if _, err := sqlite.Restore(ctx, c.src, db.Path(), epoch, nil); parley.ErrorCode(err) != c.code {
			t.Fatalf("%s: %v, want %s", name, err, c.code)
		}
	}
	db, err := sqlite.Open(ctx, db.Path(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rec, err := db.GetConversation(ctx, ids[0]); err != nil || rec.Conversation.Epoch != "e0000000" {
		t.Fatalf("after the refusals: %+v, err %v", rec, err)
	}
}
