package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/store"
)

// TestRowsWithNULStayReadable: a store written before NUL was refused may
// hold a \u0000 escape in a conversation (its title) and a task (its
// prompt), which jsonb refuses. The reads that look into those rows' JSON
// (the list filtered by title, the scheduler's rounds, the count of an
// agent's tasks, compaction's cursors) still answer, for everyone, not
// only for the rows without one.
func TestRowsWithNULStayReadable(t *testing.T) {
	url := pgtest.Schema(t)
	db := open(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"poisoned", "clean"} {
		title := `a \u0000 title`
		if id == "clean" {
			title = "a clean title"
		}
		data := `{"id":"` + id + `","epoch":"e","title":"` + title + `","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"2026-01-01T00:00:00.000Z"}`
		if _, err := conn.Exec(ctx, `INSERT INTO conversations (id, created_at, data, last_seq, state, epoch, last_event_at) VALUES ($1, $2, $3, 1, '{}', 'e', $2)`, id, at, []byte(data)); err != nil {
			t.Fatal(err)
		}
		task := `{"id":"t-` + id + `","conversationId":"` + id + `","agentId":"a","prompt":"p \u0000","everyMs":60000,"nextRunAt":"2026-01-01T00:00:00.000Z","createdAt":"2026-01-01T00:00:00.000Z"}`
		if _, err := conn.Exec(ctx, `INSERT INTO tasks (id, conversation_id, data, next_run_at, created_at) VALUES ($1, $2, $3, $4, $4)`, "t-"+id, id, task, at); err != nil {
			t.Fatal(err)
		}
	}
	recs, _, err := db.ListConversations(ctx, store.ListConversationsParams{Title: "title", Limit: 10})
	if err != nil || len(recs) != 2 {
		t.Fatalf("the list by title gave %d conversations (%v), want 2", len(recs), err)
	}
	now := parley.NewTime(at.Add(time.Hour))
	due, err := db.TakeDueTasks(ctx, store.TakeDueTasksParams{Now: now, Until: parley.NewTime(now.Add(time.Minute)), Limit: 10})
	if err != nil || len(due) != 2 {
		t.Fatalf("the scheduler's round took %d tasks (%v), want 2", len(due), err)
	}
	err = db.CreateTask(ctx, store.CreateTaskParams{Task: &parley.Task{ID: "t-new", ConversationID: "clean", AgentID: "a", Prompt: "p", EveryMs: 60000, NextRunAt: now, CreatedAt: now},
		MaxPerAgent: 10})
	if err != nil {
		t.Fatalf("creating a task beside one with a NUL: %v", err)
	}
	if _, err := db.CompactionCursors(ctx, store.CompactionCursorsParams{Limit: 10}); err != nil {
		t.Fatalf("compaction's cursors: %v", err)
	}
}
