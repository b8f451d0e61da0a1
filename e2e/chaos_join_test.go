package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// joiner is a subscriber of the chaos test that joins with no position,
// mid-stream, and folds what it is sent with the Go SDK's Fold (which
// reconnects and resumes by itself across the kills). At the end its fold
// must show exactly the stored messages: the join-point invariant.
type joiner struct {
	conv      string
	transport client.Transport
	mu        sync.Mutex
	fold      client.Fold
	pos       int64
	floor     int64 // the lowest seq of the newest messages its snapshot held
	snapshot  int   // how many messages its snapshot held, of which streaming
	streaming int
	// joinedAt is its first position, and atJoin what it showed there.
	joinedAt int64
	atJoin   []*parley.Message
	err      error
	stop     context.CancelFunc
	done     chan struct{}
}

// start follows the conversation in the background until halt (or ctx).
func (j *joiner) start(ctx context.Context, c *client.Client) {
	ctx, j.stop = context.WithCancel(ctx)
	j.done = make(chan struct{})
	go func() {
		defer close(j.done)
		j.run(ctx, c)
	}()
}

// halt stops the joiner and waits until it has.
func (j *joiner) halt() {
	j.stop()
	<-j.done
}

// run follows the conversation until ctx ends.
func (j *joiner) run(ctx context.Context, c *client.Client) {
	st := c.Subscribe(ctx, j.conv, client.SubscribeOptions{Transport: j.transport, MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	defer st.Close()
	first := true
	for {
		f, err := st.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				j.setErr(fmt.Errorf("%s joiner of %s: %v", j.transport, j.conv, err))
			}
			return
		}
		j.mu.Lock()
		if in := f.Init; in != nil && !in.Recovered {
			if !first {
				j.mu.Unlock()
				j.setErr(fmt.Errorf("%s joiner of %s: a reconnect got a snapshot, not the events it missed", j.transport, j.conv))
				return
			}
			j.snapshot, j.streaming, j.floor = len(in.Messages), 0, 0
			for _, m := range in.Messages {
				if m.Status == parley.StatusStreaming {
					j.streaming++
				}
			}
			if n := len(in.Messages); n >= snapshotMessages {
				j.floor = in.Messages[n-snapshotMessages].Seq
			}
		}
		err = j.fold.Apply(f)
		if p := st.Position(); p != nil {
			j.pos = p.Seq
		}
		if first {
			first = false
			j.joinedAt = j.pos
			j.atJoin = j.fold.Messages() // copies
		}
		j.mu.Unlock()
		if err != nil {
			j.setErr(err)
			return
		}
	}
}

// snapshotMessages is how many of the newest messages a snapshot holds (the
// server's default).
const snapshotMessages = 100

func (j *joiner) setErr(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = err
	}
}

func (j *joiner) position() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pos
}

// checkJoiner checks what a joiner showed where it joined and where it
// left against the stored log folded up to each of those seqs.
func checkJoiner(t *testing.T, j *joiner, log []parley.Event) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		t.Fatal(j.err)
	}
	who := fmt.Sprintf("the %s joiner of %s", j.transport, j.conv)
	compareFold(t, fmt.Sprintf("%s where it joined (seq %d)", who, j.joinedAt), j.atJoin, foldLog(t, log[:j.joinedAt]), j.floor)
	compareFold(t, fmt.Sprintf("%s where it left (seq %d)", who, j.pos), j.fold.Messages(), foldLog(t, log[:j.pos]), j.floor)
}

// foldLog returns the messages of a log's events folded from the start.
func foldLog(t *testing.T, events []parley.Event) []*parley.Message {
	t.Helper()
	var f client.Fold
	for _, e := range events {
		if err := f.ApplyEvent(e); err != nil {
			t.Fatal(err)
		}
	}
	return f.Messages()
}

// compareFold checks that every message shown is the one the server has
// (there: the log folded up to the same seq), and that every message the
// server has at or after floor is shown.
func compareFold(t *testing.T, who string, shown, server []*parley.Message, floor int64) {
	t.Helper()
	byID := map[string]*parley.Message{}
	for _, m := range server {
		byID[m.ID] = m
	}
	held := map[string]bool{}
	for _, m := range shown {
		held[m.ID] = true
		want := byID[m.ID]
		if want == nil {
			t.Fatalf("%s shows message %s, which the server does not have", who, m.ID)
		}
		if got, w := visible(m), visible(want); got != w {
			t.Fatalf("%s shows %s as\n%s\nwhere the server has\n%s", who, m.ID, got, w)
		}
	}
	for _, m := range server {
		if !held[m.ID] && m.Seq >= floor {
			t.Fatalf("%s (snapshot from seq %d) lacks message %s", who, floor, m.ID)
		}
	}
}

// visible is a message as JSON without updatedSeq and updatedAt, which say
// when its row was last written.
func visible(m *parley.Message) string {
	c := *m
	c.UpdatedSeq, c.UpdatedAt = 0, parley.Time{}
	b, _ := json.Marshal(c)
	return string(b)
}
