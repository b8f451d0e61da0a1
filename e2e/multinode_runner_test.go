package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestRunnerAcrossNodes: three nodes on one database. A prompt posted
// through node B is answered by a runner attached to node A; a subscriber
// that joins through node C mid-answer folds exactly the stored text. The
// runner pauses longer than the grace period, and no node ends its
// message: they see its runner in the database. Then node A is killed
// with SIGKILL mid-answer; the runner reconnects to node B and finishes
// the same message, and C's subscriber gets every event once, in order.
func TestRunnerAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3, "-runner-grace", "1s", "-runner-lease", "600ms")
	na, nb := nodes[0], nodes[1]
	a, b, c := na.client(), nb.client(), nodes[2].client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, run := assistantAnswersThrough(ctx, t, b, a)

	// answer streams an answer to the next prompt through run, pausing
	// past the grace period between its deltas; mid is called after the
	// first delta and may hand back another runner to go on with.
	answer := func(run *client.Runner, turnID string, deltas []string, mid func() *client.Runner) *client.Runner {
		t.Helper()
		p, err := run.Next(ctx)
		if err != nil || p.Type != "prompt" {
			t.Fatalf("runner on A: %+v, %v, want a prompt", p, err)
		}
		if _, err := run.Create(ctx, turnID); err != nil {
			t.Fatal(err)
		}
		for i, d := range deltas {
			if i == 1 {
				if r := mid(); r != nil {
					run = r
				}
			}
			if _, err := run.Text(ctx, turnID, d); err != nil {
				t.Fatalf("delta %d of %s: %v", i, turnID, err)
			}
		}
		if _, err := run.Finalize(ctx, turnID, string(parley.FinishEndTurn), ""); err != nil {
			t.Fatalf("finalize %s: %v", turnID, err)
		}
		if _, err := run.Complete(ctx); err != nil {
			t.Fatalf("complete after %s: %v", turnID, err)
		}
		return run
	}

	// 1. Asked through B, answered from A, watched from C (joining mid-answer).
	if _, err := b.Ask(ctx, id, "human", "What is 2 + 2?", "followup"); err != nil {
		t.Fatal(err)
	}
	var st *client.Stream
	fold := &client.Fold{}
	run = answer(run, "answer-1", []string{"The answer ", "is 4."}, func() *client.Runner {
		st = c.Subscribe(ctx, id, client.SubscribeOptions{})
		f, err := st.Next(ctx)
		if err != nil || f.Init == nil {
			t.Fatalf("no init from node C: %v", err)
		}
		if err := fold.Apply(f); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // past the grace period, and A's lease renewed meanwhile
		return nil
	})
	defer st.Close()
	want(t, ctx, c, id, "answer-1", "The answer is 4.")

	// 2. Node A dies mid-answer; the runner goes on through B.
	if _, err := b.Ask(ctx, id, "human", "And 3 + 3?", "followup"); err != nil {
		t.Fatal(err)
	}
	run = answer(run, "answer-2", []string{"Six, ", "as ", "ever."}, func() *client.Runner {
		na.kill()
		r, err := b.ConnectRunner(ctx, id, "assistant")
		if err != nil {
			t.Fatalf("the runner reconnects to B: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	})
	want(t, ctx, b, id, "answer-2", "Six, as ever.")

	// C's subscriber: every event once, in order, folding to the stored answers.
	head, err := c.Conversation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for seq < head.Head.LastSeq {
		f, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("node C's subscriber after seq %d of %d: %v", seq, head.Head.LastSeq, err)
		}
		if err := fold.Apply(f); err != nil {
			t.Fatal(err)
		}
		if f.Event == nil {
			continue
		}
		if seq != 0 && f.Event.Seq != seq+1 {
			t.Fatalf("node C's subscriber got seq %d after %d", f.Event.Seq, seq)
		}
		seq = f.Event.Seq
	}
	for id, text := range map[string]string{"answer-1": "The answer is 4.", "answer-2": "Six, as ever."} {
		if m := fold.Message(id); m == nil || m.Content != text || m.Status != parley.StatusComplete {
			t.Fatalf("node C's fold of %s: %+v, want %q complete", id, m, text)
		}
	}

	// 3. Node B dies mid-answer too, and its runner does not come back:
	// once B's lease and the grace period are over, node C ends the answer.
	if _, err := c.Ask(ctx, id, "human", "And 4 + 4?", "followup"); err != nil {
		t.Fatal(err)
	}
	if p, err := run.Next(ctx); err != nil || p.Type != "prompt" {
		t.Fatalf("runner on B: %+v, %v, want a prompt", p, err)
	}
	if _, err := run.Create(ctx, "answer-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Text(ctx, "answer-3", "Eight"); err != nil {
		t.Fatal(err)
	}
	nb.kill()
	within(t, 15*time.Second, "node C did not end the answer of a dead node's runner", func() bool {
		m, err := c.Message(ctx, id, "answer-3")
		return err == nil && m.Status == parley.StatusCanceled && m.Content == "Eight"
	})
}

// want checks that a message is stored complete with the given text.
func want(t *testing.T, ctx context.Context, c *client.Client, conversationID, messageID, text string) {
	t.Helper()
	m, err := c.Message(ctx, conversationID, messageID)
	if err != nil || m.Content != text || m.Status != parley.StatusComplete {
		t.Fatalf("message %s: %+v, %v, want %q complete", messageID, m, err, text)
	}
}

// TestEveryAppendIsHeardOnOtherNodes: a text delta alone (an append with no
// message row) reaches a subscriber on another node, with nothing written
// after it to carry it along.
func TestEveryAppendIsHeardOnOtherNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := a.CreateConversation(ctx, client.NewConversation{Participants: []string{"assistant"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	st := b.Subscribe(ctx, id, client.SubscribeOptions{})
	defer st.Close()
	if f, err := st.Next(ctx); err != nil || f.Init == nil {
		t.Fatalf("no init from node B: %v", err)
	}
	run, err := a.ConnectRunner(ctx, id, "assistant")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	seq, err := run.Text(ctx, "m1", "only this")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	for {
		f, err := st.Next(wait)
		if err != nil {
			t.Fatalf("node B's subscriber never got the delta at seq %d: %v", seq, err)
		}
		if f.Event != nil && f.Event.Seq == seq {
			if f.Event.Type != parley.EventChunk {
				t.Fatalf("seq %d is a %s, want a chunk", seq, f.Event.Type)
			}
			return
		}
	}
}

// TestSubscribersOfAKilledNodeResume: three subscribers follow a
// conversation through node A: the Go SDK's stream (SSE), and by hand an
// SSE stream and a WebSocket. Each reaches the nodes through a balancer of
// its own, whose first connection goes to A. Messages are written through
// node B without pause; node A is killed with SIGKILL mid-stream. Each
// subscriber's next connection goes to B, and resumes from its last event
// (recovered, no snapshot): every subscriber gets the whole log, each
// event once, in order, byte for byte.
func TestSubscribersOfAKilledNodeResume(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 2)
	na, nb := nodes[0], nodes[1]
	addrs := []string{strings.TrimPrefix(na.url, "http://"), strings.TrimPrefix(nb.url, "http://")}
	b := nb.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := b.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID

	l := &ledger{}
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var subs sync.WaitGroup
	var byHand []*subscriber
	for _, tr := range []string{"sse", "ws"} {
		s := &subscriber{l: l, base: newBalancer(t, addrs).url(), conv: id, transport: tr}
		byHand = append(byHand, s)
		subs.Go(func() { s.run(subCtx) })
	}
	sdk := &sdkSubscriber{st: client.New(newBalancer(t, addrs).url(), "").Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}})}
	defer sdk.st.Close()
	subs.Go(func() { sdk.run(subCtx) })

	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	var written atomic.Int64
	var writing sync.WaitGroup
	writing.Go(func() {
		for i := 0; writeCtx.Err() == nil; i++ {
			if _, err := b.PostMessage(writeCtx, id, client.Message{AgentID: "alice", Content: fmt.Sprint("message ", i)}); err != nil {
				if writeCtx.Err() == nil {
					l.fail("writing through node B: %v", err)
				}
				return
			}
			written.Add(1)
		}
	})
	// atLeast waits until every subscriber has seen seq n.
	atLeast := func(n int64) {
		t.Helper()
		for _, s := range byHand {
			catchUp(t, "the "+s.transport+" subscriber", s.last, n)
		}
		catchUp(t, "the Go SDK's subscriber", func() int64 {
			seen, err := sdk.last()
			if err != nil {
				t.Fatalf("the Go SDK's subscriber: %v", err)
			}
			return seen
		}, n)
	}
	atLeast(20) // all three streaming through node A
	na.kill()
	from := written.Load()
	for written.Load() < from+40 {
		l.mu.Lock()
		errs := l.errs
		l.mu.Unlock()
		if len(errs) > 0 || ctx.Err() != nil {
			t.Fatalf("%d messages written through node B after node A was killed: %v %v", written.Load()-from, errs, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopWriting()
	writing.Wait()
	log, head := readLog(t, ctx, b, id)
	atLeast(head)
	stopSubs()
	subs.Wait()
	if len(l.errs) > 0 {
		t.Fatalf("%v", l.errs)
	}
	for _, s := range byHand {
		checkSubscriber(t, s, log, 2) // through A, then B
	}
	if sdk.inits < 2 || len(sdk.events) != len(log) {
		t.Fatalf("the Go SDK's subscriber connected %d times and saw %d events; want 2 and the log's %d", sdk.inits, len(sdk.events), len(log))
	}
	for i, e := range sdk.events {
		if got, want := e.AppendJSON(nil), log[i].AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("the Go SDK's subscriber saw\n%s\nwhere the log holds\n%s", got, want)
		}
	}
}

// sdkSubscriber follows a conversation with the Go SDK's Stream, which
// resumes by itself, and records what it yields: every resume must be
// recovered, and the events dense from seq 1.
type sdkSubscriber struct {
	st     *client.Stream
	mu     sync.Mutex
	events []parley.Event
	inits  int
	err    error
}

func (s *sdkSubscriber) run(ctx context.Context) {
	for {
		f, err := s.st.Next(ctx)
		s.mu.Lock()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.err = err
			}
		case f.Init != nil:
			s.inits++
			if !f.Init.Recovered || f.Init.Position.Seq != int64(len(s.events)) {
				s.err = fmt.Errorf("connection %d began with %+v after seq %d: not a resume", s.inits, f.Init.Position, len(s.events))
			}
		case f.Event != nil:
			if f.Event.Seq != int64(len(s.events))+1 {
				s.err = fmt.Errorf("seq %d after %d: a gap or a duplicate", f.Event.Seq, len(s.events))
			}
			s.events = append(s.events, *f.Event)
		}
		stop := s.err != nil || err != nil
		s.mu.Unlock()
		if stop {
			return
		}
	}
}

// last returns the seq of the last event seen, and what went wrong.
func (s *sdkSubscriber) last() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.events)), s.err
}
