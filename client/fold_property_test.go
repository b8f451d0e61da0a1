package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestFoldJoinPointProperty is the join-point invariant as a property:
// over random interleavings of runner frames (deltas, empty deltas, tool
// updates, finalize, aborted, error, a failover and its retry, the
// runner's own reverted frame), reverts over HTTP and subscribers that join at
// random moments (no position, over SSE or WebSocket; a position, after
// folding the log up to it; after=0; a reconnect from the last position),
// every subscriber's Fold of what it was sent holds exactly the server's
// messages after every step, once it fetched the messages its snapshot
// summarized. Snapshots are kept small (6 messages, each of at most 400
// bytes, larger ones summarized) and checkpoints frequent, so that
// streaming messages older than a snapshot's newest, summarized messages
// and rows behind their chunk and part.updated events are the common case.
// PARLEY_FOLD_SEEDS sets how many seeds run (default 4; 2 under -short,
// as in the race pass).
func TestFoldJoinPointProperty(t *testing.T) {
	t.Parallel()
	seeds := 4
	if testing.Short() {
		seeds = 2
	}
	if n, err := strconv.Atoi(os.Getenv("PARLEY_FOLD_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			newFoldRun(t, seed).run(250)
		})
	}
}

// snapshotMessages is how many of the newest messages a snapshot holds
// here, and snapshotMessageBytes the most one may weigh before it is
// summarized.
const (
	snapshotMessages     = 6
	snapshotMessageBytes = 400
)

type foldRun struct {
	t       *testing.T
	ctx     context.Context
	rng     *rand.Rand
	url     string
	c       *client.Client
	id      string
	runners map[string]*client.Runner
	live    map[string]string // streaming messages in the open turn, and their agents
	stale   map[string]string // streaming messages whose turn has closed
	ids     []string          // every message id made
	author  map[string]string // the agent of each
	subs    []*foldSub
	n       int
	joins   map[string]int // subscribers by kind of join, to show the run is not vacuous
	codes   map[string]int // steps by outcome
	done    map[string]int // steps of the kinds that often fail, that succeeded
	owner   string         // the owner of the open turn, if it is a runner's
	newest  *parley.Message
}

// foldSub is one subscriber: its stream, its fold, and the lowest seq its
// snapshot held (0 if it folded the log from the start).
type foldSub struct {
	kind  string
	st    *client.Stream
	fold  client.Fold
	floor int64
}

func newFoldRun(t *testing.T, seed uint64) *foldRun {
	url, ctx, c, id := foldServer(t, snapshotMessages, "fold")
	return &foldRun{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, seed*7919+1)), url: url, c: c, id: id,
		runners: foldRunners(t, ctx, c, id), live: map[string]string{}, stale: map[string]string{}, joins: map[string]int{}, codes: map[string]int{},
		done: map[string]int{}, author: map[string]string{}}
}

// foldServer runs a server whose snapshots hold the newest n messages, of
// at most snapshotMessageBytes each, and whose rows are rewritten often,
// with one conversation (turn policy free) made on it.
func foldServer(t *testing.T, n int, title string) (url string, ctx context.Context, c *client.Client, id string) {
	limits := conv.DefaultLimits
	limits.CheckpointChunks, limits.CheckpointBytes = 4, 64
	_, url, ctx = serve(t, engine.Options{Limits: limits, SnapshotMessages: n, SnapshotMessageBytes: snapshotMessageBytes}, api.Options{Open: true})
	c = client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: title, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	return url, ctx, c, v.Conversation.ID
}

// foldRunners connects the runners of alice and bob, each taking what the
// server pushes it (prompts, aborts, reverts) as it comes.
func foldRunners(t *testing.T, ctx context.Context, c *client.Client, id string) map[string]*client.Runner {
	runners := map[string]*client.Runner{}
	for _, agent := range []string{"alice", "bob"} {
		run, err := c.ConnectRunner(ctx, id, agent)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { run.Close() })
		go func() {
			for {
				if _, err := run.Next(ctx); err != nil {
					return
				}
			}
		}()
		runners[agent] = run
	}
	return runners
}

var foldDeltas = []string{"", "a", "word ", "ünï€ode ", "a longer piece of text that spans a checkpoint on its own. "}

func (r *foldRun) run(steps int) {
	for range steps {
		r.step()
		r.check()
	}
	types := map[string]int{}
	for after := int64(0); ; {
		evs, next, err := r.c.Events(r.ctx, r.id, after, 1000)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, e := range evs {
			types[e.Type]++
		}
		if next == 0 {
			break
		}
		after = next
	}
	r.t.Logf("joins %v; events %v; steps by outcome %v; done %v", r.joins, types, r.codes, r.done)
	for _, kind := range []string{"none/sse", "none/ws", "position", "after0", "reconnect", "summarized"} {
		if r.joins[kind] == 0 {
			r.t.Errorf("no subscriber joined by %s", kind)
		}
	}
	for _, kind := range []string{"failover", "runner reverted"} {
		if r.done[kind] == 0 {
			r.t.Errorf("no %s step succeeded", kind)
		}
	}
}

// streaming picks a message the driver believes streams, and its runner;
// with ending, also one whose turn has closed (it can still be ended).
func (r *foldRun) streaming(ending bool) (string, *client.Runner, bool) {
	from := maps.Clone(r.live)
	if ending {
		maps.Copy(from, r.stale)
	}
	if len(from) == 0 {
		return "", nil, false
	}
	ids := slices.Sorted(maps.Keys(from))
	id := ids[r.rng.IntN(len(ids))]
	return id, r.runners[from[id]], true
}

// step does one random thing: a runner frame, an HTTP write, or a
// subscriber joining or reconnecting.
func (r *foldRun) step() {
	ctx := r.ctx
	agent := []string{"alice", "bob"}[r.rng.IntN(2)]
	if r.owner != "" && r.rng.IntN(4) > 0 {
		agent = r.owner // mostly the agent that holds the floor
	}
	var err error
	k := r.rng.IntN(100)
	if len(r.live) == 0 && k < 70 {
		k = 0 // nothing streams: mostly start something
	}
	op := fmt.Sprint(k / 10 * 10)
	switch {
	case k < 12:
		r.n++
		id := fmt.Sprintf("m%d", r.n)
		if _, err = r.runners[agent].Create(ctx, id); err == nil {
			r.live[id], r.ids, r.author[id] = agent, append(r.ids, id), agent
		}
	case k < 52:
		if id, run, ok := r.streaming(false); ok {
			_, err = run.Text(ctx, id, foldDeltas[r.rng.IntN(len(foldDeltas))])
		}
	case k < 61:
		if id, run, ok := r.streaming(false); ok {
			args, _ := json.Marshal(map[string]int{"step": r.n})
			_, err = run.Tool(ctx, id, client.ToolUpdate{CallID: fmt.Sprintf("c%d", r.rng.IntN(3)), ToolName: "search",
				Status: []string{parley.ToolRunning, parley.ToolCompleted, parley.ToolError}[r.rng.IntN(3)], Args: args})
		}
	case k < 67:
		if id, run, ok := r.streaming(true); ok {
			reason := []string{parley.FinishEndTurn, parley.FinishCanceled, parley.FinishError}[r.rng.IntN(3)]
			if _, err = run.Finalize(ctx, id, reason, ""); err == nil {
				delete(r.live, id)
			}
		}
	case k < 70:
		_, err = r.runners[agent].Aborted(ctx) // the runner's last message, if it still streams
	case k < 73:
		if id, run, ok := r.streaming(true); ok {
			if _, err = run.Fail(ctx, id, "the model failed"); err == nil {
				delete(r.live, id)
			}
		}
	case k < 76:
		err = r.failover()
	case k < 78:
		if len(r.ids) > 0 {
			err = r.revert(r.ids[r.rng.IntN(len(r.ids))])
		}
	case k < 80:
		err = r.runnerReverted(agent)
	case k < 85:
		_, err = r.c.PostMessage(ctx, r.id, client.Message{AgentID: "carol", Content: fmt.Sprintf("carol %d", r.n), Finality: parley.FinalityTurn})
	case k < 92:
		r.join()
	default:
		if len(r.subs) > 0 {
			s := r.subs[r.rng.IntN(len(r.subs))]
			s.st.Close() // its next read reconnects from its last position
			r.joins["reconnect"]++
		}
	}
	var pe *parley.Error
	if err != nil && !errors.As(err, &pe) {
		r.t.Fatalf("step: %v", err)
	}
	if err != nil {
		r.codes[op+":"+parley.ErrorCode(err)]++
	}
}

// failover ends a streaming message with an error part, its turn left
// open, and retries it in a new message (RetryOf naming it), as a runner
// whose model failed does.
func (r *foldRun) failover() error {
	id, run, ok := r.streaming(false)
	if !ok {
		return nil
	}
	if _, err := run.Failover(r.ctx, id, "the model failed over"); err != nil {
		return err
	}
	delete(r.live, id)
	r.n++
	retry := fmt.Sprintf("m%d", r.n)
	if _, err := run.CreateWith(r.ctx, retry, client.CreateOptions{RetryOf: id}); err != nil {
		return err
	}
	r.live[retry], r.ids, r.author[retry] = r.author[id], append(r.ids, retry), r.author[id]
	r.done["failover"]++
	return nil
}

// runnerReverted has a runner report that it reverted messages on its
// side (the reverted frame): mostly the newest message when it is that
// runner's (its agent may remove only its own), else one of its agent's.
func (r *foldRun) runnerReverted(agent string) error {
	if m := r.newest; m != nil && r.runners[m.AgentID] != nil && r.rng.IntN(2) == 0 {
		agent = m.AgentID
		if _, err := r.runners[agent].Reverted(r.ctx, m.ID); err != nil {
			return err
		}
		r.done["runner reverted"]++
		return nil
	}
	var own []string
	for _, id := range r.ids {
		if r.author[id] == agent {
			own = append(own, id)
		}
	}
	if len(own) == 0 {
		return nil
	}
	if _, err := r.runners[agent].Reverted(r.ctx, own[r.rng.IntN(len(own))]); err != nil {
		return err
	}
	r.done["runner reverted"]++
	return nil
}

// revert removes a message and every one after it, over HTTP.
func (r *foldRun) revert(id string) error {
	body, _ := json.Marshal(map[string]string{"agentId": "human", "messageId": id})
	resp, err := http.Post(r.url+"/v1/conversations/"+r.id+"/revert", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("revert %s: HTTP %d", id, resp.StatusCode)
	}
	return nil
}

// join adds a subscriber of a random kind.
func (r *foldRun) join() {
	s := &foldSub{}
	opts := client.SubscribeOptions{Transport: client.SSE, MinBackoff: time.Millisecond}
	switch r.rng.IntN(4) {
	case 0:
		s.kind = "none/sse"
	case 1:
		s.kind, opts.Transport = "none/ws", client.WebSocket
	case 2:
		// A client that read the log up to k, then follows from k.
		s.kind = "position"
		head := r.lastSeq()
		k := r.rng.Int64N(head + 1)
		for after := int64(0); after < k; {
			evs, _, err := r.c.Events(r.ctx, r.id, after, int(min(1000, k-after)))
			if err != nil {
				r.t.Fatal(err)
			}
			for _, e := range evs {
				if err := s.fold.ApplyEvent(e); err != nil {
					r.t.Fatal(err)
				}
			}
			after = evs[len(evs)-1].Seq
		}
		v, _ := r.c.Conversation(r.ctx, r.id)
		opts.From = &parley.Position{Seq: k, Epoch: v.Conversation.Epoch}
	default:
		s.kind, opts.From = "after0", &parley.Position{Seq: 0}
	}
	if r.rng.IntN(2) == 0 {
		opts.Transport = client.WebSocket
	}
	s.st = r.c.Subscribe(r.ctx, r.id, opts)
	r.t.Cleanup(s.st.Close)
	r.subs = append(r.subs, s)
	r.joins[s.kind]++
}

func (r *foldRun) lastSeq() int64 { return r.head().LastSeq }

func (r *foldRun) head() parley.Head {
	v, err := r.c.Conversation(r.ctx, r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return v.Head
}

// check brings every subscriber up to the head and compares its fold with
// the server's messages.
func (r *foldRun) check() {
	h := r.head()
	head := h.LastSeq
	r.owner = ""
	if o := h.OpenTurn; o != nil && r.runners[o.Owner] != nil {
		r.owner = o.Owner
	}
	server := allMessages(r.t, r.ctx, r.c, r.id)
	r.newest = nil
	for _, m := range server {
		if r.newest == nil || m.Seq > r.newest.Seq {
			r.newest = m
		}
	}
	byID := map[string]*parley.Message{}
	r.live, r.stale = map[string]string{}, map[string]string{}
	for _, m := range server {
		byID[m.ID] = m
		if m.Status == parley.StatusStreaming {
			if h.OpenTurn != nil && h.OpenTurn.Turn == m.Turn {
				r.live[m.ID] = m.AgentID // it may still grow: its turn is open
			} else {
				r.stale[m.ID] = m.AgentID // its turn closed: it can only end
			}
		}
	}
	for i, s := range r.subs {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		for p := s.st.Position(); p == nil || p.Seq < head; p = s.st.Position() {
			f, err := s.st.Next(ctx)
			if err != nil {
				r.t.Fatalf("subscriber %d (%s): %v", i, s.kind, err)
			}
			if in := f.Init; in != nil && !in.Recovered {
				// The snapshot is the newest snapshotMessages messages and,
				// before them, any older one still streaming.
				s.floor = 0
				if n := len(in.Messages); n >= snapshotMessages {
					s.floor = in.Messages[n-snapshotMessages].Seq
				}
				for _, m := range in.Messages {
					if m.Summarized != nil {
						r.joins["summarized"]++
						if m.Content != "" || len(m.Parts) > 0 || m.Summarized.Bytes <= snapshotMessageBytes {
							r.t.Fatalf("summary of %s holds %q %v (%d bytes)", m.ID, m.Content, m.Parts, m.Summarized.Bytes)
						}
					}
				}
			}
			if err := s.fold.Apply(f); err != nil {
				r.t.Fatal(err)
			}
		}
		// What the snapshot summarized is read whole, as a client shows it;
		// now or (a third of the time) after more frames, which the summary
		// ignores and the copy read has.
		if r.rng.IntN(3) > 0 {
			if err := r.c.FetchMissing(ctx, r.id, &s.fold); err != nil {
				r.t.Fatalf("subscriber %d (%s): %v", i, s.kind, err)
			}
		}
		cancel()
		r.compare(i, s, server, byID)
	}
}

// allMessages lists a conversation's messages, 1000 to a page.
func allMessages(t *testing.T, ctx context.Context, c *client.Client, id string) []*parley.Message {
	t.Helper()
	ms, err := c.AllMessages(ctx, id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// compare checks one fold against the server's messages: every message it
// holds is the server's, as the server shows it; it holds every message
// still streaming and every message at or after its snapshot's floor.
func (r *foldRun) compare(i int, s *foldSub, server []*parley.Message, byID map[string]*parley.Message) {
	held := map[string]bool{}
	for _, m := range s.fold.Messages() {
		held[m.ID] = true
		want, ok := byID[m.ID]
		if !ok {
			r.t.Fatalf("subscriber %d (%s) shows %s, which the server does not have", i, s.kind, m.ID)
		}
		if m.Summarized != nil { // not fetched yet: what it shows is the server's
			m, want = m.Summarize(0), want.Summarize(0)
		}
		if got, w := visible(m), visible(want); got != w {
			r.t.Fatalf("subscriber %d (%s) shows %s as\n%s\nthe server has\n%s", i, s.kind, m.ID, got, w)
		}
	}
	for _, m := range server {
		if !held[m.ID] && (m.Status == parley.StatusStreaming || m.Seq >= s.floor) {
			r.t.Fatalf("subscriber %d (%s, snapshot from seq %d) lacks message %s (seq %d, %s)", i, s.kind, s.floor, m.ID, m.Seq, m.Status)
		}
	}
}

// visible is a message as JSON without updatedSeq and updatedAt: when its
// row was last written is the server's business.
func visible(m *parley.Message) string {
	c := *m
	c.UpdatedSeq, c.UpdatedAt = 0, parley.Time{}
	b, _ := json.Marshal(c)
	return string(b)
}
