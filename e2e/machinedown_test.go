package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestMachineDownGivesNewEpochs: on SQLite, subscribers see an event once
// it is committed, a moment before the log's sync makes it durable, so a
// machine that goes down may take back events a subscriber holds. A server
// that opens a database another process had open on an earlier boot (what
// the machine going down leaves, imitated here by that process's file
// beside the database) gives every conversation a new epoch and says so:
// a subscriber resuming from its old position gets a snapshot, not a
// resume over a log that may have lost what it saw.
func TestMachineDownGivesNewEpochs(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "parley.db")
	srv := startServer(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "before", TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id, before := v.Conversation.ID, v.Conversation.Epoch
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: "seen"}); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	if err := os.WriteFile(db+"-open-4194304", []byte("a-boot-before-this-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	srv = startServer(t, db)
	defer srv.stop()
	if log := srv.log(); !strings.Contains(log, "new epoch") || !strings.Contains(log, "conversations=1") {
		t.Fatalf("the server did not say it renewed the epochs:\n%s", log)
	}
	c = client.New(srv.url, "")
	after, err := c.Conversation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.Conversation.Epoch == before {
		t.Fatalf("the conversation kept its epoch %s", before)
	}
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 2, Epoch: before}})
	defer st.Close()
	f, err := st.Next(ctx)
	if err != nil || f.Init == nil || f.Init.Recovered || f.Init.Position.Epoch != after.Conversation.Epoch {
		t.Fatalf("resuming from the old epoch: first frame %+v, %v; want a snapshot in epoch %s", f.Init, err, after.Conversation.Epoch)
	}
	if _, err := os.Stat(db + "-open-4194304"); !os.IsNotExist(err) {
		t.Fatalf("the old process's file is still there (%v)", err)
	}
}
