package client_test

import (
	"context"
	"errors"
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
		started <- rp.Prompt.PromptID
		<-gate
		// A handler that writes on without looking at its ctx: the write
		// is refused, and the error it returns must not become the answer.
		return rp.Text(context.Background(), " more")
	}))
	s.ask("p1", "go on", "")
	<-started
	if _, err := c.AbortTurn(ctx, s.id, "human", "taking over"); err != nil {
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

// TestStopPromptStopsOnlyItsTarget: StopPrompt of a prompt that is not
// being answered is 409 not_answering naming the one that is, and stops
// nothing; of the prompt being answered, it stops it and says what.
func TestStopPromptStopsOnlyItsTarget(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	started := make(chan string, 1)
	s := serveConversation(t, c, nil, ctx, blocking(started))
	s.ask("p1", "block", "")
	<-started
	_, err := c.StopPrompt(ctx, s.id, "p0")
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 409 || parley.ErrorCode(err) != parley.ENOTANSWERING {
		t.Fatalf("a stop of a prompt not being answered: %v", err)
	}
	if ans, _ := se.Err.Details["answering"].(map[string]any); ans["promptId"] != "p1" || ans["messageId"] == nil {
		t.Fatalf("the refusal names %v, want p1 and its message", se.Err.Details)
	}
	st, err := c.StopPrompt(ctx, s.id, "p1")
	if err != nil || st.PromptID != "p1" || st.MessageID == "" {
		t.Fatalf("the stop of p1: %+v, %v", st, err)
	}
	if how := s.ended("p1"); how != "canceled: aborted" {
		t.Fatalf("the stopped prompt %s", how)
	}
	if ms := s.answers("p1"); len(ms) != 1 || ms[0].ID != st.MessageID || ms[0].Status != parley.StatusCanceled {
		t.Fatalf("the stopped answer: %s", contents(ms))
	}
}
