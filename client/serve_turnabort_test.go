package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestServeEndsAnAnswerWhoseTurnWasAborted: an admin aborts the turn a
// served answer is streaming in. The answer ends as a stop ends it: the
// handler's next write is refused (turn_conflict) or its ctx ends, its
// message ends canceled with what it wrote and no error part, and the
// prompt ends canceled, not completed.
func TestServeEndsAnAnswerWhoseTurnWasAborted(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	started, gate := make(chan string, 1), make(chan struct{})
	s := serveConversation(t, c, nil, ctx, client.HandlerFunc(func(hctx context.Context, rp *client.Reply) error {
		if err := rp.Text(hctx, "partial"); err != nil {
			return err
		}
		started <- rp.Prompt.MessageID
		<-gate
		// A handler that writes on without looking at its ctx: the write
		// is refused, and the error it returns must not become the answer.
		return rp.Text(context.Background(), " more")
	}))
	s.ask("p1", "go on", "")
	<-started
	if _, err := c.Abort(ctx, s.id, "human", "taking over"); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if how := s.ended("p1"); !strings.HasPrefix(how, "canceled") {
		t.Fatalf("the prompt whose turn was aborted %s", how)
	}
	ms := s.answers("p1")
	if len(ms) != 1 || ms[0].Status != parley.StatusCanceled || ms[0].Content != "partial" {
		t.Fatalf("the answer whose turn was aborted: %s", contents(ms))
	}
	for _, p := range ms[0].Parts {
		if p.Type == parley.PartError {
			t.Fatalf("the answer has an error part: %+v", ms[0].Parts)
		}
	}
}
