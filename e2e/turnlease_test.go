package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// Agents that die while holding a turn never leave a conversation stuck:
// within the turn lease the floor moves on and every waiting prompt is
// dispatched. Three ways to die, each in its own conversations:
//
//	norunner  the agent wrote with finality none and never had a runner
//	midanswer its runner was streaming an answer and is gone
//	none      its runner finalized with finality none (the turn stays open) and is gone
//
// PARLEY_TURN_CHAOS_N sets how many conversations each way gets (default 1).

// deathWays are the ways an agent dies holding a turn.
var deathWays = []string{"norunner", "midanswer", "none"}

// dieHoldingTurn has agent take the floor of conversation id through c and
// die as way says.
func dieHoldingTurn(t *testing.T, ctx context.Context, c *client.Client, id, agent, way string) {
	t.Helper()
	switch way {
	case "norunner":
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: agent, Content: "half a thought", Finality: parley.FinalityNone}); err != nil {
			t.Fatal(err)
		}
		return
	}
	run, err := c.ConnectRunner(ctx, id, agent)
	if err != nil {
		t.Fatal(err)
	}
	msg := agent + "-msg"
	if _, err := run.Create(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Text(ctx, msg, "working on "); err != nil {
		t.Fatal(err)
	}
	if way == "none" {
		if _, err := run.FinalizeWith(ctx, msg, client.FinalizeOptions{Finality: parley.FinalityNone}); err != nil {
			t.Fatal(err)
		}
	}
	run.Close() // it dies: no runner of it is left
}

// chaosConversations is how many conversations each way of dying gets.
func chaosConversations(t *testing.T) int {
	n := 1
	if s := os.Getenv("PARLEY_TURN_CHAOS_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("PARLEY_TURN_CHAOS_N=%q: want a whole number ≥ 1", s)
		}
		n = v
	}
	return n
}

// deadHolders runs the chaos case: holders is the node through which the
// conversations are made and the dying agents write; once they have died,
// then gives the node the bot's runners and the askers use (killing or
// restarting the holders' node first, as the case may be).
func deadHolders(t *testing.T, ctx context.Context, holders *client.Client, then func() *client.Client) {
	type conv struct{ id, way, prompt string }
	var convs []conv
	n := chaosConversations(t)
	for _, way := range deathWays {
		for i := range n {
			v, err := holders.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human", "holder"}})
			if err != nil {
				t.Fatal(err)
			}
			c := conv{id: v.Conversation.ID, way: way, prompt: fmt.Sprintf("q-%s-%d", way, i)}
			dieHoldingTurn(t, ctx, holders, c.id, "holder", way)
			convs = append(convs, c)
		}
	}
	answerer := then()
	runners := map[string]*client.Runner{}
	for _, c := range convs {
		run, err := answerer.ConnectRunner(ctx, c.id, "bot")
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		runners[c.id] = run
		if _, err := answerer.QueuePrompt(ctx, c.id, client.NewPrompt{ID: c.prompt, AgentID: "human", Content: "still there?"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range convs {
		p, err := runners[c.id].Next(ctx)
		if err != nil || p.Type != "prompt" || p.PromptID != c.prompt {
			t.Fatalf("%s: the bot got %+v, %v; want prompt %s", c.way, p, err, c.prompt)
		}
		events, _, err := answerer.Events(ctx, c.id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ended := ""
		for _, e := range events {
			if e.Turn == 1 && (e.Type == parley.EventTurnAborted || e.Finality == parley.FinalityTurn) {
				var ref parley.TurnRef
				_ = json.Unmarshal(e.Data, &ref)
				ended = e.Type + ":" + ref.Reason
				break
			}
		}
		// The lease ends the turns nothing else would; a runner killed
		// mid-answer has its message ended canceled by the grace period,
		// which closes its turn as well.
		if want := "turn.aborted:timeout"; ended != want && !(c.way == "midanswer" && ended == "message.updated:") {
			t.Fatalf("%s: the holder's turn ended with %q, want %q", c.way, ended, want)
		}
	}
}

// TestDeadTurnHoldersNeverStickAConversation: one server, a one-second
// lease and grace period.
func TestDeadTurnHoldersNeverStickAConversation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startServer(t, filepath.Join(t.TempDir(), "parley.db"), "-turn-lease", "1s", "-runner-grace", "1s")
	c := client.New(srv.url, "")
	deadHolders(t, ctx, c, func() *client.Client { return c })
}

// TestDeadTurnHoldersAcrossNodes: two nodes on PostgreSQL. The agents
// that die hold their turns through node A, which is then killed with
// SIGKILL; the bot's runners and the askers use node B, which ends the
// turns once the lease has passed and A's runners' presence has lapsed.
func TestDeadTurnHoldersAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	unused := filepath.Join(t.TempDir(), "unused.db")
	args := []string{"-postgres", url, "-turn-lease", "1s", "-runner-grace", "1s", "-runner-lease", "600ms"}
	na, nb := startServer(t, unused, args...), startServer(t, unused, args...)
	deadHolders(t, ctx, client.New(na.url, ""), func() *client.Client {
		na.kill()
		return client.New(nb.url, "")
	})
}

// TestTurnLeaseFlagBounds: parley serve refuses a -turn-lease under a
// second or over a day, saying so.
func TestTurnLeaseFlagBounds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "parley.db")
	for _, bad := range []string{"500ms", "25h", "0s", "-1m"} {
		refusesToStart(t, ctx, db, "127.0.0.1:0", "-turn-lease", "-turn-lease", bad)
	}
}

// TestDeadTurnHoldersThroughARestart: the server is killed with SIGKILL
// once the agents died holding their turns; the server that comes back on
// the same file ends those turns within a lease too.
func TestDeadTurnHoldersThroughARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "parley.db")
	args := []string{"-turn-lease", "1s", "-runner-grace", "1s"}
	first := startServer(t, db, args...)
	deadHolders(t, ctx, client.New(first.url, ""), func() *client.Client {
		first.kill()
		return client.New(startServer(t, db, args...).url, "")
	})
}
