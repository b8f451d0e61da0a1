package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestRecordStreams records, from a real server, streams of random runner
// and prompt activity as JSON Lines fixtures for the TypeScript client's
// property test (web/client/testdata). It runs only when
// PARLEY_RECORD_STREAMS names the directory to write them to:
//
//	PARLEY_RECORD_STREAMS=$PWD/web/client/testdata go test ./client -run TestRecordStreams -v
//
// Each fixture holds a "meta" line, then every frame a subscriber that
// joined at seq 0 received ("frame" lines, as sent), then a "sample" line
// for each moment the server stood still: its seq, the ids of its messages
// in order and those of its messages that changed since the previous
// sample (without updatedSeq and updatedAt, given apart as "updatedSeq"
// for every message), its prompt queue, head and guidance, and the init a subscriber
// joining then without a position got (a snapshot of the newest 4 messages,
// those over 400 bytes summarized).
func TestRecordStreams(t *testing.T) {
	dir := os.Getenv("PARLEY_RECORD_STREAMS")
	if dir == "" {
		t.Skip("PARLEY_RECORD_STREAMS is not set: the fixtures in web/client/testdata are kept as recorded")
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rec := newRecorder(t, seed)
			rec.run(80)
			rec.write(filepath.Join(dir, fmt.Sprintf("stream-%d.jsonl", seed)))
		})
	}
}

// recordSnapshotMessages is how many of the newest messages a recorded
// snapshot holds (besides older streaming ones): few, so that joins by
// snapshot miss most of the history and the fixtures stay small.
const recordSnapshotMessages = 4

type recorder struct {
	t       *testing.T
	ctx     context.Context
	rng     *rand.Rand
	url     string
	c       *client.Client
	id      string
	seed    uint64
	runners map[string]*client.Runner
	ids     []string
	n       int

	mu     sync.Mutex
	frames []json.RawMessage
	lastSq int64
	subErr error

	samples []json.RawMessage
	prev    map[string]string // each message's JSON at the previous sample
	prevSeq int64
	counts  map[string]int
}

func newRecorder(t *testing.T, seed uint64) *recorder {
	url, ctx, c, id := foldServer(t, recordSnapshotMessages, "recorded")
	r := &recorder{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, seed*7919+1)), url: url, c: c, id: id, seed: seed,
		prev: map[string]string{}, counts: map[string]int{}}
	// The subscriber whose frames are recorded: from seq 0, raw.
	conn, _, err := websocket.Dial(ctx, r.wsURL("?after=0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(parley.MaxFrameBytes)
	t.Cleanup(func() { conn.CloseNow() })
	go r.record(conn)
	r.runners = foldRunners(t, ctx, c, id) // Complete answers the last prompt a runner took
	return r
}

// record keeps every frame the recorded subscriber gets, and the seq of the last event.
func (r *recorder) record(conn *websocket.Conn) {
	for {
		_, data, err := conn.Read(r.ctx)
		r.mu.Lock()
		if err != nil {
			r.subErr = err
			r.mu.Unlock()
			return
		}
		r.frames = append(r.frames, json.RawMessage(data))
		var e struct {
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Type != "init" && e.Type != "guidance" && e.Type != "error" {
			r.lastSq = e.Seq
		}
		r.mu.Unlock()
	}
}

func (r *recorder) wsURL(query string) string {
	return "ws" + strings.TrimPrefix(r.url, "http") + "/v1/conversations/" + r.id + "/ws" + query
}

func (r *recorder) run(steps int) {
	r.sample()
	for range steps {
		r.step()
		r.sample()
	}
	r.t.Logf("seed %d: steps by kind and outcome %v", r.seed, r.counts)
}

// step does one random thing: a runner frame, a prompt command or an HTTP write.
func (r *recorder) step() {
	ctx := r.ctx
	streaming, all, owner := r.streaming()
	agent := []string{"alice", "bob"}[r.rng.IntN(2)]
	if owner != "" && r.rng.IntN(4) > 0 {
		agent = owner // mostly the agent that holds the floor
	}
	run := r.runners[agent]
	var err error
	var kind string
	k := r.rng.IntN(100)
	if len(streaming) == 0 && k >= 12 && k < 76 {
		k = r.rng.IntN(12) // nothing streams: mostly start something
	}
	pick := func() string { // a message of the open turn
		if len(streaming) == 0 {
			return ""
		}
		return streaming[r.rng.IntN(len(streaming))]
	}
	pickAny := func() string { // any streaming message: one whose turn closed can still end
		if len(all) == 0 {
			return ""
		}
		return all[r.rng.IntN(len(all))]
	}
	switch {
	case k < 12:
		kind = "create"
		r.n++
		id := fmt.Sprintf("m%d", r.n)
		if _, err = run.Create(ctx, id); err == nil {
			r.ids = append(r.ids, id)
		}
	case k < 45:
		kind = "delta"
		if id := pick(); id != "" {
			_, err = r.owner(id).Text(ctx, id, foldDeltas[r.rng.IntN(len(foldDeltas))])
		}
	case k < 54:
		kind = "tool"
		if id := pick(); id != "" {
			args, _ := json.Marshal(map[string]int{"step": r.n})
			u := client.ToolUpdate{CallID: fmt.Sprintf("c%d", r.rng.IntN(3)), ToolName: "search",
				Status: []string{parley.ToolRunning, parley.ToolCompleted, parley.ToolError}[r.rng.IntN(3)]}
			if r.rng.IntN(2) == 0 {
				u.Args = args
			}
			if u.Status == parley.ToolCompleted {
				u.Result = json.RawMessage(`{"hits":2}`)
			}
			if u.Status == parley.ToolError {
				u.Error = "timed out"
			}
			_, err = r.owner(id).Tool(ctx, id, u)
		}
	case k < 62:
		kind = "finalize"
		if id := pickAny(); id != "" {
			reason := []string{parley.FinishEndTurn, parley.FinishCanceled, parley.FinishError}[r.rng.IntN(3)]
			_, err = r.owner(id).Finalize(ctx, id, reason, "")
		}
	case k < 66:
		kind = "aborted"
		_, err = run.Aborted(ctx)
	case k < 70:
		kind = "error"
		if id := pickAny(); id != "" {
			_, err = r.owner(id).Fail(ctx, id, "the model failed")
		}
	case k < 73:
		kind = "revert"
		if len(r.ids) > 0 {
			err = r.http(http.MethodPost, "/revert", map[string]string{"agentId": "human", "messageId": r.ids[r.rng.IntN(len(r.ids))]})
		}
	case k < 77:
		kind = "post"
		_, err = r.c.PostMessage(ctx, r.id, client.Message{AgentID: "carol", Content: fmt.Sprintf("carol %d", r.n), Finality: parley.FinalityTurn})
	case k < 86:
		mode := []string{"followup", "followup", "steer", "collect"}[r.rng.IntN(4)]
		kind = "prompt." + mode
		r.n++
		_, err = r.c.Ask(ctx, r.id, "human", fmt.Sprintf("question %d, ünï€ode", r.n), mode)
	case k < 91:
		kind = "complete"
		_, err = run.Complete(ctx)
	case k < 94:
		kind = "stop"
		err = r.http(http.MethodPost, "/abort", nil)
	default:
		kind = "withdraw/promote"
		var q struct {
			Prompts []parley.QueuedPrompt `json:"prompts"`
		}
		if err = r.get("/prompts", &q); err == nil && len(q.Prompts) > 0 {
			p := q.Prompts[r.rng.IntN(len(q.Prompts))]
			if r.rng.IntN(2) == 0 {
				kind = "withdraw"
				err = r.http(http.MethodDelete, "/prompts/"+p.ID, map[string]string{"agentId": "human"})
			} else {
				kind = "promote"
				err = r.http(http.MethodPost, "/prompts/"+p.ID+"/promote", map[string]string{"agentId": "human"})
			}
		}
	}
	if err != nil {
		kind += ":" + parley.ErrorCode(err)
	}
	r.counts[kind]++
}

// streaming returns the ids of the messages that stream in the open turn
// and of every message that streams, as the server has them, and the
// runner's agent that owns the open turn.
func (r *recorder) streaming() (live, all []string, owner string) {
	v, err := r.c.Conversation(r.ctx, r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	o := v.Head.OpenTurn
	if o != nil && r.runners[o.Owner] != nil {
		owner = o.Owner
	}
	for _, m := range r.messages() {
		if m.Status != parley.StatusStreaming {
			continue
		}
		all = append(all, m.ID)
		if owner != "" && m.Turn == o.Turn {
			live = append(live, m.ID)
		}
	}
	return live, all, owner
}

// owner returns the runner of the agent that writes a message.
func (r *recorder) owner(id string) *client.Runner {
	m, err := r.c.Message(r.ctx, r.id, id)
	if err != nil || r.runners[m.AgentID] == nil {
		return r.runners["alice"]
	}
	return r.runners[m.AgentID]
}

func (r *recorder) messages() []*parley.Message { return allMessages(r.t, r.ctx, r.c, r.id) }

// http sends one request with a JSON body (none if nil) and returns the
// server's error, if any.
func (r *recorder) http(method, path string, body any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(r.ctx, method, r.url+"/v1/conversations/"+r.id+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return parley.Errorf(e.Error.Code, "HTTP %d", resp.StatusCode)
	}
	return nil
}

func (r *recorder) get(path string, out any) error {
	resp, err := http.Get(r.url + "/v1/conversations/" + r.id + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// sample records the server's state once it stands still: its head is the
// same before and after reading its messages, queue and a snapshot.
func (r *recorder) sample() {
	for try := 0; ; try++ {
		if try == 50 {
			r.t.Fatal("the server never stood still")
		}
		before, err := r.c.Conversation(r.ctx, r.id)
		if err != nil {
			r.t.Fatal(err)
		}
		msgs := r.messages()
		var q struct {
			Prompts []json.RawMessage `json:"prompts"`
		}
		if err := r.get("/prompts", &q); err != nil {
			r.t.Fatal(err)
		}
		init := r.snapshot()
		after, err := r.c.Conversation(r.ctx, r.id)
		if err != nil {
			r.t.Fatal(err)
		}
		var pos struct {
			Position parley.Position `json:"position"`
		}
		_ = json.Unmarshal(init, &pos)
		if before.Head.LastSeq != after.Head.LastSeq || pos.Position.Seq != after.Head.LastSeq {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if after.Head.LastSeq == r.prevSeq && r.prevSeq != 0 {
			return // nothing changed
		}
		ids := make([]string, len(msgs))
		var changed []*parley.Message
		updated := map[string]int64{}
		next := map[string]string{}
		for i, m := range msgs {
			ids[i] = m.ID
			updated[m.ID] = m.UpdatedSeq
			c := *m
			c.UpdatedSeq, c.UpdatedAt = 0, parley.Time{} // kept apart: they change at every sample while it streams
			b, _ := json.Marshal(c)
			next[m.ID] = string(b)
			if r.prev[m.ID] != string(b) {
				changed = append(changed, &c)
			}
		}
		line, err := json.Marshal(map[string]any{"kind": "sample", "seq": after.Head.LastSeq, "messageIds": ids, "changed": changed, "updatedSeq": updated,
			"queue": q.Prompts, "head": after.Head, "guidance": after.Guidance, "init": init})
		if err != nil {
			r.t.Fatal(err)
		}
		r.samples = append(r.samples, line)
		r.prev, r.prevSeq = next, after.Head.LastSeq
		return
	}
}

// snapshot returns the init frame of a subscriber that joins now without a position.
func (r *recorder) snapshot() json.RawMessage {
	conn, _, err := websocket.Dial(r.ctx, r.wsURL(""), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(parley.MaxFrameBytes)
	_, data, err := conn.Read(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return data
}

// write waits until the recorded subscriber has every event (and the
// guidance after the last), checks that it got them once each and in
// order, and writes the fixture.
func (r *recorder) write(path string) {
	head := r.prevSeq
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		last, n, err := r.lastSq, len(r.frames), r.subErr
		r.mu.Unlock()
		if err != nil {
			r.t.Fatalf("the recorded subscriber failed: %v", err)
		}
		if last >= head {
			time.Sleep(300 * time.Millisecond) // a guidance after the last event
			r.mu.Lock()
			quiet := len(r.frames) == n
			r.mu.Unlock()
			if quiet {
				break
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the recorded subscriber is at seq %d of %d", last, head)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		r.t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	meta, _ := json.Marshal(map[string]any{"kind": "meta", "seed": r.seed, "conversationId": r.id, "snapshotMessages": recordSnapshotMessages,
		"snapshotMessageBytes": snapshotMessageBytes, "frames": len(r.frames), "samples": len(r.samples)})
	w.Write(append(meta, '\n'))
	seq := int64(0)
	for _, fr := range r.frames {
		var e struct {
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		}
		_ = json.Unmarshal(fr, &e)
		if e.Type != "init" && e.Type != "guidance" {
			if e.Seq != seq+1 {
				r.t.Fatalf("the recorded subscriber got seq %d after %d", e.Seq, seq)
			}
			seq = e.Seq
		}
		line, _ := json.Marshal(map[string]any{"kind": "frame", "frame": fr})
		w.Write(append(line, '\n'))
	}
	for _, s := range r.samples {
		w.Write(append(s, '\n'))
	}
	if err := w.Flush(); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("wrote %s: %d frames (to seq %d), %d samples", path, len(r.frames), seq, len(r.samples))
}
