package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// served is a conversation whose runner Serve runs in the background.
type served struct {
	t    *testing.T
	c    *client.Client
	ctx  context.Context
	id   string
	st   *client.Stream
	stop func() error // cancels Serve and returns what it returned
	errc chan error
}

// serveConversation makes a conversation with the participant bot and the
// member human, connects bot's runner through rc (c if nil) and runs
// Serve with h until the test ends. A stream follows the log from seq 0.
func serveConversation(t *testing.T, c, rc *client.Client, ctx context.Context, h client.Handler) *served {
	t.Helper()
	if rc == nil {
		rc = c
	}
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := rc.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &served{t: t, c: c, ctx: ctx, id: id, errc: make(chan error, 1)}
	go func() { s.errc <- r.Serve(sctx, h) }()
	s.stop = func() error { cancel(); return <-s.errc }
	t.Cleanup(func() { cancel(); r.Close() })
	s.st = c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}})
	t.Cleanup(s.st.Close)
	return s
}

// ask queues a prompt from human.
func (s *served) ask(id, content, mode string) {
	s.t.Helper()
	if _, err := s.c.QueuePrompt(s.ctx, s.id, client.NewPrompt{ID: id, AgentID: "human", Content: content, Mode: mode}); err != nil {
		s.t.Fatal(err)
	}
}

// ended waits until prompt id ends and says how: "completed", or
// "canceled: " and the reason.
func (s *served) ended(id string) string {
	s.t.Helper()
	for f, err := range s.st.Frames(s.ctx) {
		if err != nil {
			s.t.Fatalf("waiting for prompt %s to end: %v", id, err)
		}
		switch d, _ := f.Decode(); d := d.(type) {
		case *client.PromptCompleted:
			if d.ID == id {
				return "completed"
			}
		case *client.PromptCanceled:
			if d.ID == id {
				return "canceled: " + d.Reason
			}
		}
	}
	panic("unreachable")
}

// answers returns bot's messages that reply to prompt id, by seq.
func (s *served) answers(id string) []*parley.Message {
	s.t.Helper()
	var out []*parley.Message
	for m, err := range s.c.EachMessage(s.ctx, s.id, client.ListMessagesOptions{AgentID: "bot"}) {
		if err != nil {
			s.t.Fatal(err)
		}
		if m.ReplyTo == id {
			out = append(out, m)
		}
	}
	return out
}

// echo answers every prompt with "echo: " and its text, in two deltas,
// with a tool call between them.
var echo = client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
	if err := rp.Text(ctx, "echo: "); err != nil {
		return err
	}
	if err := rp.Tool(ctx, client.ToolUpdate{CallID: "c1", ToolName: "repeat", Status: parley.ToolCompleted}); err != nil {
		return err
	}
	return rp.Text(ctx, rp.Prompt.Content)
})

// TestServeAnswersEachPromptOnce: prompts queued at once are answered one
// after another, each by one complete message that replies to it, with
// its text and tool call; Serve returns ctx's error when ctx ends.
func TestServeAnswersEachPromptOnce(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	s := serveConversation(t, c, nil, ctx, echo)
	for _, p := range []string{"p1", "p2", "p3"} {
		s.ask(p, "say "+p, "")
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		if how := s.ended(p); how != "completed" {
			t.Fatalf("prompt %s %s", p, how)
		}
		ms := s.answers(p)
		if len(ms) != 1 || ms[0].Status != parley.StatusComplete || ms[0].Content != "echo: say "+p || ms[0].TurnID != p ||
			len(ms[0].Parts) != 4 || ms[0].Parts[1].CallID != "c1" {
			t.Fatalf("answers to %s: %s", p, contents(ms))
		}
	}
	if q, err := c.Prompts(ctx, s.id); err != nil || len(q) != 0 {
		t.Fatalf("the queue after the answers: %+v, %v", q, err)
	}
	if err := s.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v, want context.Canceled", err)
	}
}

// blocking answers "block" by writing "partial", saying so on started, and
// waiting for its ctx to end; anything else, as echo does.
func blocking(started chan<- string) client.Handler {
	return client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		if rp.Prompt.Content != "block" {
			return echo(ctx, rp)
		}
		if err := rp.Text(ctx, "partial"); err != nil {
			return err
		}
		started <- rp.Prompt.PromptID
		<-ctx.Done()
		if err := rp.Text(ctx, " more"); !errors.Is(err, context.Canceled) {
			return errors.New("a write after the abort did not fail with the canceled context")
		}
		return ctx.Err()
	})
}

// TestServeAbortCancelsTheHandler: a stop, and a steer, cancel the
// handler's context; its message ends canceled with what it wrote, the
// prompt ends canceled, and the next prompt is answered.
func TestServeAbortCancelsTheHandler(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	started := make(chan string, 1)
	s := serveConversation(t, c, nil, ctx, blocking(started))

	s.ask("p1", "block", "")
	<-started
	if err := c.Stop(ctx, s.id); err != nil {
		t.Fatal(err)
	}
	if how := s.ended("p1"); how != "canceled: aborted" {
		t.Fatalf("the stopped prompt %s", how)
	}
	if ms := s.answers("p1"); len(ms) != 1 || ms[0].Status != parley.StatusCanceled || ms[0].Content != "partial" {
		t.Fatalf("the stopped answer: %s", contents(ms))
	}

	s.ask("p2", "block", "")
	<-started
	s.ask("p3", "now this", client.ModeSteer)
	if how := s.ended("p2"); how != "canceled: aborted" {
		t.Fatalf("the steered prompt %s", how)
	}
	if how := s.ended("p3"); how != "completed" {
		t.Fatalf("the steer %s", how)
	}
	if ms := s.answers("p3"); len(ms) != 1 || ms[0].Content != "echo: now this" || ms[0].Status != parley.StatusComplete {
		t.Fatalf("the steer's answer: %s", contents(ms))
	}
}

// TestServeHandlerErrors: a handler's error ends its answer with an error
// part (in a message of its own when it wrote none), and the next prompt
// is answered.
func TestServeHandlerErrors(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	s := serveConversation(t, c, nil, ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		switch rp.Prompt.Content {
		case "fail late":
			if err := rp.Text(ctx, "half"); err != nil {
				return err
			}
			return errors.New("the model went away")
		case "fail":
			return errors.New("model unavailable")
		}
		return echo(ctx, rp)
	}))
	s.ask("p1", "fail", "")
	s.ask("p2", "fail late", "")
	s.ask("p3", "fine", "")
	for _, want := range []struct{ p, content, err string }{{"p1", "", "model unavailable"}, {"p2", "half", "the model went away"}} {
		p := want.p
		if how := s.ended(p); how != "completed" {
			t.Fatalf("prompt %s %s", p, how)
		}
		ms := s.answers(p)
		if len(ms) != 1 || ms[0].Status != parley.StatusError || ms[0].Content != want.content || !hasError(ms[0], want.err) {
			t.Fatalf("answer to %s: %s", p, contents(ms))
		}
	}
	if how := s.ended("p3"); how != "completed" {
		t.Fatalf("p3 %s", how)
	}
}

func hasError(m *parley.Message, text string) bool {
	for _, p := range m.Parts {
		if p.Type == parley.PartError && p.Message == text {
			return true
		}
	}
	return false
}

// TestReplyOptions: a failover and its retry in one turn, a message that
// leaves the turn open for the next, and the channel of a message (its
// prompt's, and no other).
func TestReplyOptions(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	s := serveConversation(t, c, nil, ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		switch rp.Prompt.Content {
		case "failover":
			if err := rp.Text(ctx, "try 1"); err != nil {
				return err
			}
			if err := rp.Failover(ctx, "rate limited"); err != nil {
				return err
			}
			return rp.Text(ctx, "try 2")
		case "two messages":
			if err := rp.Text(ctx, "first"); err != nil {
				return err
			}
			if err := rp.Finalize(ctx, client.FinalizeOptions{Finality: parley.FinalityNone}); err != nil {
				return err
			}
			return rp.Finalize(ctx, client.FinalizeOptions{FinalText: "second"})
		case "elsewhere":
			// A reply goes only to its prompt's channel: naming another is
			// refused, and the reply is made without it.
			err := rp.Create(ctx, client.CreateOptions{Channel: &parley.Channel{Type: "slack", ID: "C2"}})
			if parley.ErrorCode(err) != parley.EFORBIDDEN {
				return fmt.Errorf("a reply to another channel: %v, want forbidden", err)
			}
			return rp.Text(ctx, "not posted elsewhere")
		}
		return echo(ctx, rp)
	}))
	s.ask("p1", "failover", "")
	s.ask("p2", "two messages", "")
	s.ask("p3", "elsewhere", "")
	if _, err := c.QueuePrompt(ctx, s.id, client.NewPrompt{ID: "p4", AgentID: "human", Content: "from slack", Channel: &parley.Channel{Type: "slack", ID: "C1"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		if how := s.ended(p); how != "completed" {
			t.Fatalf("%s %s", p, how)
		}
	}
	ms := s.answers("p1")
	if len(ms) != 2 || ms[0].Status != parley.StatusError || ms[1].Status != parley.StatusComplete || ms[1].RetryOf != ms[0].ID ||
		ms[1].Content != "try 2" || ms[0].Turn != ms[1].Turn {
		t.Fatalf("failover: %s", contents(ms))
	}
	ms = s.answers("p2")
	if len(ms) != 2 || ms[0].Content != "first" || ms[1].Content != "second" || ms[0].Turn != ms[1].Turn || ms[0].Finality != parley.FinalityNone {
		t.Fatalf("two messages: %s", contents(ms))
	}
	if ms := s.answers("p3"); len(ms) != 1 || ms[0].Channel != nil || ms[0].Content != "not posted elsewhere" {
		t.Fatalf("a message to another channel: %s", contents(ms))
	}
	if ms := s.answers("p4"); len(ms) != 1 || ms[0].Channel == nil || *ms[0].Channel != (parley.Channel{Type: "slack", ID: "C1"}) {
		t.Fatalf("the answer to a prompt from slack: %s", contents(ms))
	}
}

// reverts records the reverts its Serve was told of.
type reverts struct {
	client.HandlerFunc
	got chan string
}

func (r reverts) Revert(_ context.Context, messageID string) { r.got <- messageID }

// TestServeTellsOfRevertsAndEndsWithTheConversation: a Handler that is a
// Reverter hears of each revert; deleting the conversation ends Serve
// with not_found.
func TestServeTellsOfRevertsAndEndsWithTheConversation(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	h := reverts{HandlerFunc: echo, got: make(chan string, 1)}
	s := serveConversation(t, c, nil, ctx, h)
	s.ask("p1", "hi", "")
	if how := s.ended("p1"); how != "completed" {
		t.Fatalf("p1 %s", how)
	}
	answer := s.answers("p1")[0].ID
	if _, err := c.Revert(ctx, s.id, answer, "human"); err != nil {
		t.Fatal(err)
	}
	if got := <-h.got; got != answer {
		t.Fatalf("the handler heard of a revert from %s, want %s", got, answer)
	}
	if err := c.DeleteConversation(ctx, s.id); err != nil {
		t.Fatal(err)
	}
	if err := <-s.errc; parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("Serve after the delete: %v, want not_found", err)
	}
}

// cutter dials the connections of a client, and cuts them when the test
// says: all of them at once, or the next one to write (the frame is lost)
// or to read (the frame was applied; its answer is lost).
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	next  atomic.Int32 // 0: nothing, cutWrite, cutRead
}

const (
	cutWrite = 1
	cutRead  = 2
)

func (d *cutter) client(base string) *client.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.conns = append(d.conns, conn)
		d.mu.Unlock()
		return &cutConn{Conn: conn, d: d}, nil
	}}
	return client.New(base, "").WithHTTPClient(&http.Client{Transport: tr})
}

func (d *cutter) cutAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}

type cutConn struct {
	net.Conn
	d *cutter
}

func (c *cutConn) Write(b []byte) (int, error) {
	if c.d.next.CompareAndSwap(cutWrite, 0) {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == nil && c.d.next.CompareAndSwap(cutRead, 0) {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return n, err
}

// TestServeReconnectsAndGoesOn: the runner's connection is lost between
// two deltas of an answer, or with a delta unsent, or with a delta applied
// and its ack lost. Each time the answer goes on in the same message after
// a reconnect, with every delta once, and the prompt is answered once; the
// next prompt is answered on the new connection.
func TestServeReconnectsAndGoesOn(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true})
	c := client.New(url, "")
	for _, cut := range []struct {
		name string
		do   func(d *cutter)
	}{
		{"between two frames", (*cutter).cutAll},
		{"a frame unsent", func(d *cutter) { d.next.Store(cutWrite) }},
		{"a frame's ack lost", func(d *cutter) { d.next.Store(cutRead) }},
	} {
		t.Run(cut.name, func(t *testing.T) {
			d := &cutter{}
			step, goOn := make(chan struct{}), make(chan struct{})
			s := serveConversation(t, c, d.client(url), ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
				if rp.Prompt.Content != "cut" {
					return echo(ctx, rp)
				}
				if err := rp.Text(ctx, "one "); err != nil {
					return err
				}
				step <- struct{}{}
				<-goOn
				if err := rp.Text(ctx, "two "); err != nil {
					return err
				}
				return rp.Text(ctx, "three")
			}))
			s.ask("p1", "cut", "")
			<-step
			cut.do(d)
			close(goOn)
			if how := s.ended("p1"); how != "completed" {
				t.Fatalf("p1 %s", how)
			}
			if ms := s.answers("p1"); len(ms) != 1 || ms[0].Content != "one two three" || ms[0].Status != parley.StatusComplete {
				t.Fatalf("the answer across the cut: %s", contents(ms))
			}
			s.ask("p2", "after", "")
			if how := s.ended("p2"); how != "completed" {
				t.Fatalf("p2 %s", how)
			}
			if ms := s.answers("p2"); len(ms) != 1 || ms[0].Content != "echo: after" {
				t.Fatalf("the answer after the cut: %s", contents(ms))
			}
		})
	}
}
