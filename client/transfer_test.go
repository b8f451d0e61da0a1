package client_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// TestBackupStreamsTheStore: Backup writes an SQLite file that holds what
// the server held; a token that is not an admin's is
// refused with its code, and nothing is written.
func TestBackupStreamsTheStore(t *testing.T) {
	t.Parallel()
	sv, url, ctx := serve(t, engine.Options{}, api.Options{})
	admin, _, err := sv.tokens.CreateToken(ctx, parley.TokenAdmin, "", "")
	if err != nil {
		t.Fatal(err)
	}
	alice, _, err := sv.tokens.CreateToken(ctx, parley.TokenAgent, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	ac := client.New(url, admin)
	v, err := ac.CreateConversation(ctx, client.NewConversation{ID: "kept", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "alice", Content: "worth keeping"}); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "parley-backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ac.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != n || n == 0 {
		t.Fatalf("Backup returned %d bytes; the file: %v, %v", n, st, err)
	}
	if _, err := sqlite.CheckBackup(ctx, path); err != nil {
		t.Fatalf("the backup is not a Parley store: %v", err)
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := db.ListMessages(ctx, store.ListMessagesParams{ConversationID: "kept", Limit: 10})
	if err != nil || len(ms) != 1 || ms[0].Content != "worth keeping" {
		t.Fatalf("the backup's messages: %+v, %v", ms, err)
	}

	var none bytes.Buffer
	if n, err := client.New(url, alice).Backup(ctx, &none); parley.ErrorCode(err) != parley.EFORBIDDEN || n != 0 || none.Len() != 0 {
		t.Fatalf("an agent's backup: %d bytes (%d written), %v", n, none.Len(), err)
	}
}
