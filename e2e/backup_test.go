package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// stream answers like a runner: a message of n deltas, then its end.
func stream(ctx context.Context, r *client.Runner, id string, n int) error {
	if _, err := r.Create(ctx, id); err != nil {
		return err
	}
	for i := range n {
		if _, err := r.Text(ctx, id, fmt.Sprintf("%s-%d ", id, i)); err != nil {
			return err
		}
	}
	_, err := r.Finalize(ctx, id, "end_turn", "")
	return err
}

// followTo applies a stream's frames to f until its position reaches seq.
func followTo(t *testing.T, ctx context.Context, s *client.Stream, f *client.Fold, seq int64) *client.Init {
	t.Helper()
	var last *client.Init
	for s.Position() == nil || s.Position().Seq < seq {
		fr, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("following to %d: %v", seq, err)
		}
		if fr.Init != nil {
			last = fr.Init
		}
		if err := f.Apply(fr); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// messagesOf reads a conversation's messages as the server holds them.
func messagesOf(t *testing.T, ctx context.Context, c *client.Client, id string) string {
	t.Helper()
	ms, _, err := c.Messages(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return textsOf(ms)
}

func textsOf(ms []*parley.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %q", m.ID, m.Status, m.Content))
	}
	return strings.Join(out, "\n")
}

// TestRestoreGivesClientsASnapshot: a client follows a conversation; the
// store is backed up while the server runs; more is written (and seen by
// the client); the server stops and the backup is restored, which
// "parley restore" refused while the server ran; once the server is back,
// the client's stream reconnects by itself with its old position, whose
// epoch is gone, and gets a fresh snapshot (recovered: false): it then
// shows exactly the restored messages, with nothing written after the
// backup and no text twice.
func TestRestoreGivesClientsASnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "parley.db")
	srv := startServer(t, db)
	addr := strings.TrimPrefix(srv.url, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "kept", Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id, oldEpoch := v.Conversation.ID, v.Conversation.Epoch
	if _, err := c.PostMessage(ctx, id, client.Message{ID: "q1", AgentID: "human", Role: parley.RoleUser, Content: "first?", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	run, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := stream(ctx, run, "r1", 20); err != nil {
		t.Fatal(err)
	}
	st := c.Subscribe(ctx, id, client.SubscribeOptions{MaxBackoff: 200 * time.Millisecond})
	defer st.Close()
	fold := &client.Fold{}
	head := func() int64 {
		v, err := c.Conversation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v.Head.LastSeq
	}
	followTo(t, ctx, st, fold, head())
	backedUp := messagesOf(t, ctx, c, id)

	backup := filepath.Join(dir, "backup.db")
	// Not on a terminal: a plain line of progress at each tenth.
	if out, stderr := runParleyErr(t, "backup", "-db", db, backup); !strings.Contains(out, "backed up "+db+" to "+backup) ||
		!regexp.MustCompile(`(?m)^backing up: 100% \((\d+) of (\d+) pages\)$`).MatchString(stderr) {
		t.Fatalf("backup said %q, and %q", out, stderr)
	}
	if _, stderr := runParleyFail(t, "backup", "-db", db, backup); !strings.Contains(stderr, "exists") {
		t.Fatalf("a backup over a file: %s", stderr)
	}
	// After the backup: a second exchange, seen by the client.
	if _, err := c.PostMessage(ctx, id, client.Message{ID: "q2", AgentID: "human", Role: parley.RoleUser, Content: "second?", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	if err := stream(ctx, run, "r2", 15); err != nil {
		t.Fatal(err)
	}
	followTo(t, ctx, st, fold, head())
	if got := textsOf(fold.Messages()); !strings.Contains(got, "r2 complete") {
		t.Fatalf("the client does not show r2:\n%s", got)
	}
	if _, stderr := runParleyFail(t, "restore", "-db", db, backup); !strings.Contains(stderr, "in use") {
		t.Fatalf("a restore while the server runs: %s", stderr)
	}

	run.Close()
	srv.kill()
	out := runParley(t, "restore", "-db", db, "-progress", "off", backup)
	if !strings.Contains(out, "1 conversations, each with a new epoch") {
		t.Fatalf("restore said %q", out)
	}
	startServerAt(t, db, addr)
	// Written after the restore, before the client is back: the log grows
	// past the client's position, which only its epoch now tells apart.
	held := *st.Position()
	run, err = c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := c.PostMessage(ctx, id, client.Message{ID: "q3", AgentID: "human", Role: parley.RoleUser, Content: "third?", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	if err := stream(ctx, run, "r3", 40); err != nil {
		t.Fatal(err)
	}
	if h := head(); h <= held.Seq {
		t.Fatalf("the restored log is at %d, not past the client's %d", h, held.Seq)
	}
	want := messagesOf(t, ctx, c, id)
	if strings.Contains(want, "r2") || !strings.Contains(want, "r1 complete") || !strings.Contains(want, "r3 complete") {
		t.Fatalf("the restored conversation:\n%s", want)
	}
	// The client's own stream reconnects by itself; another starts from the
	// position the client held. Both get a snapshot and show what is stored.
	again := c.Subscribe(ctx, id, client.SubscribeOptions{From: &held})
	defer again.Close()
	fresh := &client.Fold{}
	for _, f := range []struct {
		s    *client.Stream
		fold *client.Fold
	}{{st, fold}, {again, fresh}} {
		var in *client.Init
		for in == nil {
			fr, err := f.s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.fold.Apply(fr); err != nil {
				t.Fatal(err)
			}
			in = fr.Init
		}
		if in.Recovered || in.Position.Epoch == oldEpoch || in.Conversation.Epoch != in.Position.Epoch {
			t.Fatalf("after the restore a client resumed: recovered %v, epoch %s (was %s)", in.Recovered, in.Position.Epoch, oldEpoch)
		}
		followTo(t, ctx, f.s, f.fold, head())
		if got := textsOf(f.fold.Messages()); got != want {
			t.Fatalf("after the restore the client shows:\n%s\nthe server holds:\n%s\n(the backup held:\n%s)", got, want, backedUp)
		}
	}
}

// TestBackupUnderLoadRestoresWhole backs up a server's store while runners
// stream into several conversations, once from the file and once through
// the server; each backup is a prefix of the live logs (the same events,
// as of one moment), and restored into a fresh server it exports every
// conversation as the backup itself holds it, but for the epochs.
func TestBackupUnderLoadRestoresWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "parley.db")
	srv := startServer(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	var ids []string
	for i := range 4 {
		v, err := c.CreateConversation(ctx, client.NewConversation{Title: fmt.Sprintf("load %d", i), Participants: []string{"bot"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.Conversation.ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range ids {
		run, err := c.ConnectRunner(ctx, id, "bot")
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := stream(ctx, run, fmt.Sprintf("m%d", i), 25); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	local, remote := filepath.Join(dir, "local.db"), filepath.Join(dir, "remote.db")
	runParley(t, "backup", "-db", db, "-progress", "off", local)
	runParley(t, "backup", "-server", srv.url, "-progress", "off", remote)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	epochRE := regexp.MustCompile(`"epoch":"[0-9a-f]{8}"`)
	live := map[string][]byte{}
	for _, id := range ids {
		live[id] = []byte(runParley(t, "export", "-server", srv.url, "-format", "jsonl", id))
	}
	for _, backup := range []string{local, remote} {
		// The backup as it is, served from a copy of its file.
		plain := backup + ".plain"
		data, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(plain, data, 0o600); err != nil {
			t.Fatal(err)
		}
		asIs := startServer(t, plain)
		restored := filepath.Join(dir, filepath.Base(backup)+".restored")
		if out := runParley(t, "restore", "-db", restored, "-progress", "off", backup); !strings.Contains(out, "4 conversations") {
			t.Fatalf("restore said %q", out)
		}
		back := startServer(t, restored)
		for _, id := range ids {
			a := []byte(runParley(t, "export", "-server", asIs.url, "-format", "jsonl", id))
			b := []byte(runParley(t, "export", "-server", back.url, "-format", "jsonl", id))
			if bytes.Equal(a, b) {
				t.Fatal("the restore kept the epoch")
			}
			a, b = epochRE.ReplaceAll(a, []byte(`"epoch":"-"`)), epochRE.ReplaceAll(b, []byte(`"epoch":"-"`))
			if !bytes.Equal(a, b) {
				t.Fatalf("%s of %s: the restored export differs from the backup's:\n%s\n---\n%s", id, backup, a, b)
			}
			// Its events are the live log's first ones.
			events := 0
			for line := range bytes.SplitSeq(a, []byte("\n")) {
				if bytes.HasPrefix(line, []byte(`{"event":`)) {
					events++
					if !bytes.Contains(epochRE.ReplaceAll(live[id], []byte(`"epoch":"-"`)), line) {
						t.Fatalf("%s of %s: event not in the live log: %s", id, backup, line)
					}
				}
			}
			var head struct{ LastSeq int64 }
			first, _, _ := bytes.Cut(a, []byte("\n"))
			if err := json.Unmarshal(first, &head); err != nil || int64(events) != head.LastSeq || events < 10 {
				t.Fatalf("%s of %s: %d events, header %s", id, backup, events, first)
			}
		}
	}
}

// TestChunkRetentionFlag: serve takes a retention in days, weeks or Go's
// units, and refuses one under a minute or malformed.
func TestChunkRetentionFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, bad := range []string{"30s", "7x", "-1d", "1.5d"} {
		if _, stderr := runParleyFail(t, "serve", "-db", filepath.Join(dir, "bad.db"), "-addr", "127.0.0.1:0", "-chunk-retention", bad); !strings.Contains(stderr, "chunk-retention") {
			t.Fatalf("-chunk-retention %s: %s", bad, stderr)
		}
	}
	srv := startServer(t, filepath.Join(dir, "parley.db"), "-chunk-retention", "7d")
	if _, err := client.New(srv.url, "").CreateConversation(context.Background(), client.NewConversation{Title: "kept a week"}); err != nil {
		t.Fatal(err)
	}
}
