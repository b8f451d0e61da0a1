package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// The chaos test: under load from runners, HTTP writers and resuming
// subscribers (chaos_load_test.go), the server is killed with SIGKILL at
// random moments and restarted on the same database and port. Afterwards
// the log must hold every acknowledged write at its acknowledged seq with
// its content, seq must be dense, every message a runner was streaming must
// have been continued by it or ended canceled, and every subscriber must
// have seen exactly the log: no gap, no duplicate, the same bytes.
//
//	PARLEY_CHAOS_CYCLES  kill cycles (default 3; docs/reliability.md has a run of 20)
//	PARLEY_CHAOS_SEED    repeat a run's kill moments
func TestChaos(t *testing.T) {
	t.Parallel()
	runChaos(t, filepath.Join(t.TempDir(), "parley.db"), chaosCycles(t, 3), 1)
}

// TestChaosOnPostgres is the chaos test on PostgreSQL, in a short form.
func TestChaosOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	runChaos(t, filepath.Join(t.TempDir(), "unused.db"), chaosCycles(t, 2), 1, "-postgres", url)
}

// TestChaosManyNodes is the chaos test with three nodes on one PostgreSQL
// database behind a load balancer that spreads every new connection over
// the nodes that are up: a node killed at random is restarted while the
// others serve, and runners and subscribers move between nodes as they
// reconnect. Runner leases are short (-runner-lease), so that a killed
// node's runners lapse within the test.
func TestChaosManyNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	runChaos(t, filepath.Join(t.TempDir(), "unused.db"), chaosCycles(t, 3), 3, "-postgres", url, "-runner-lease", "900ms")
}

func chaosCycles(t *testing.T, def int) int {
	if s := os.Getenv("PARLEY_CHAOS_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PARLEY_CHAOS_CYCLES=%q: want a whole number ≥ 1", s)
		}
		return n
	}
	return def
}

// The load, in conversations of four kinds (one agent streams at a time,
// so runners do not share a conversation): each chaosConvs conversations
// with a steady runner, with a flaky one, with two HTTP writers, and with
// two claimers racing for turns, each through its own node
// (chaos_turns_test.go). Every conversation has a WebSocket and an SSE
// subscriber.
const chaosConvs = 2

// The kinds of the load's conversations: conversation i is of kind i %
// chaosKinds.
const (
	kindSteady = iota
	kindFlaky
	kindWriters
	kindClaimers
	chaosKinds
)

// runChaos runs the chaos test on nodes servers (more than one: on one
// PostgreSQL database, behind a balancer), killing one at random each cycle.
func runChaos(t *testing.T, db string, cycles, nodes int, args ...string) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PARLEY_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PARLEY_CHAOS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("%d kill cycles; PARLEY_CHAOS_SEED=%d repeats the kill moments", cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	// One port for every run of a node, so that clients find it again.
	var addrs []string
	for range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	// A short grace, so that abandoned messages end canceled within the test.
	args = append([]string{"-runner-grace", "1s"}, args...)
	var servers, up []*server // every run of a node; the run of each node now
	for _, addr := range addrs {
		srv := startServerAt(t, db, addr, args...)
		servers, up = append(servers, srv), append(up, srv)
	}
	base := "http://" + addrs[0]
	if nodes > 1 {
		base = newBalancer(t, addrs).url()
	}
	logs := func() string {
		var b strings.Builder
		for i, s := range up {
			fmt.Fprintf(&b, "node %d:\n%s", i, s.log())
		}
		return b.String()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := client.New(base, "")
	var ids []string
	for range chaosKinds * chaosConvs {
		v, err := c.CreateConversation(ctx, client.NewConversation{TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.Conversation.ID)
	}

	l := &ledger{flaky: map[string]int{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var load, subs sync.WaitGroup
	var subscribers []*subscriber
	for i, id := range ids {
		for _, tr := range []string{"ws", "sse"} {
			s := &subscriber{l: l, base: base, conv: id, transport: tr}
			subscribers = append(subscribers, s)
			subs.Go(func() { s.run(subCtx) })
		}
		switch i % chaosKinds {
		case kindSteady, kindFlaky:
			steady := i%chaosKinds == kindSteady
			name := fmt.Sprintf("flaky-%d", i)
			if steady {
				name = fmt.Sprintf("steady-%d", i)
			}
			r := &runner{l: l, c: c, conv: id, name: name, steady: steady}
			load.Go(func() { r.run(loadCtx) })
		case kindWriters:
			for w := range 2 {
				load.Go(func() { writer(loadCtx, l, base, id, fmt.Sprintf("writer-%d-%d", i, w)) })
			}
		case kindClaimers:
			for w := range 2 {
				node := "http://" + addrs[(i+w)%nodes] // with several nodes, the two on two
				load.Go(func() { claimer(loadCtx, l, node, id, fmt.Sprintf("claimer-%d-%d", i, w)) })
			}
		}
	}

	// progress waits until n more writes were acknowledged and every flaky
	// runner streams again (its successor waits for the grace period to
	// end the message it abandoned), so that each kill catches messages
	// under way.
	progress := func(n int) {
		t.Helper()
		l.mu.Lock()
		want, flaky := len(l.acks)+n, maps.Clone(l.flaky)
		l.mu.Unlock()
		for deadline := time.Now().Add(30 * time.Second); ; {
			l.mu.Lock()
			got, errs := len(l.acks), l.errs
			streaming := len(l.flaky) == chaosConvs
			for conv, n := range flaky {
				streaming = streaming && l.flaky[conv] > n
			}
			l.mu.Unlock()
			if len(errs) > 0 {
				t.Fatalf("the load failed: %s", strings.Join(errs, "\n"))
			}
			if got >= want && streaming {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d acknowledged writes after 30s; server logs:\n%s", got, want, logs())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Joiners subscribe with no position while messages stream, one per
	// cycle in each runner's conversation, and fold what they are sent. Each
	// lives through one kill and is stopped when the next one joins, so
	// that they add one subscriber to each conversation, not one per cycle.
	var joiners []*joiner
	live := map[string]*joiner{}
	join := func() {
		for i, id := range ids {
			if k := i % chaosKinds; k == kindWriters || k == kindClaimers {
				continue // the HTTP writers' and claimers' conversations stream nothing
			}
			if j := live[id]; j != nil {
				j.halt()
			}
			j := &joiner{conv: id, transport: []client.Transport{client.SSE, client.WebSocket}[len(joiners)%2]}
			joiners, live[id] = append(joiners, j), j
			j.start(subCtx, c)
		}
	}
	// resumed waits until every subscriber has connected to the server run
	// now up (with one node, where each kill ends every subscriber's
	// connection: so that each kill ends one, and the check below that
	// every subscriber resumed after every kill holds).
	resumed := func(runs int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			waiting := 0
			for _, s := range subscribers {
				s.mu.Lock()
				if s.resumes < runs {
					waiting++
				}
				s.mu.Unlock()
			}
			if waiting == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d subscribers did not connect to server run %d within 30s; server logs:\n%s", waiting, runs, logs())
			}
		}
	}
	for cycle := range cycles {
		// Kill at a random moment once the load is running again.
		if nodes == 1 {
			resumed(cycle + 1)
		}
		progress(50)
		join()
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		k := rng.IntN(nodes)
		up[k].kill()
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		up[k] = startServerAt(t, db, addrs[k], args...)
		servers = append(servers, up[k])
	}
	progress(200)
	stopLoad()
	load.Wait()

	logged := waitSettled(t, ctx, c, ids)
	// Every subscriber catches up with the log, then stops.
	for _, s := range subscribers {
		catchUp(t, "the "+s.transport+" subscriber of "+s.conv, s.last, int64(len(logged[s.conv])))
	}
	for _, j := range live {
		catchUp(t, "the "+string(j.transport)+" joiner of "+j.conv, j.position, int64(len(logged[j.conv])))
		j.halt()
	}
	stopSubs()
	subs.Wait()
	streamingJoins := 0
	for _, j := range joiners {
		checkJoiner(t, j, logged[j.conv])
		if j.streaming > 0 {
			streamingJoins++
		}
	}
	if streamingJoins == 0 {
		t.Errorf("none of %d joiners joined while a message streamed", len(joiners))
	}

	if len(l.errs) > 0 {
		t.Fatalf("the load failed:\n%s", strings.Join(l.errs, "\n"))
	}
	checkAcks(t, l, logged)
	messages := checkMessages(t, l, logged)
	turns, claims := 0, 0
	for i, id := range ids {
		tu, cl := checkTurns(t, id, logged[id])
		if i%chaosKinds == kindClaimers {
			turns, claims = turns+tu, claims+cl
		}
	}
	if claims == 0 {
		t.Errorf("the claimers claimed no turn")
	}
	// With one node every subscriber resumes after every kill; with
	// several, those on the node killed move to another.
	connects := cycles + 1
	if nodes > 1 {
		connects = 1
		if resumes(subscribers) == 0 {
			t.Errorf("no subscriber moved to another node over %d kills", cycles)
		}
	}
	for _, s := range subscribers {
		checkSubscriber(t, s, logged[s.conv], connects)
	}
	for i, s := range servers {
		if strings.Contains(s.log(), "level=ERROR") {
			t.Errorf("server run %d logged an error:\n%s", i, s.log())
		}
	}
	events := 0
	for _, evs := range logged {
		events += len(evs)
	}
	kinds := map[string]int{}
	for _, a := range l.acks {
		kinds[a.kind]++
	}
	t.Logf("%d nodes, %d kills: %d acknowledged writes (%d deltas, %d tool updates, %d creates, %d finalizes, %d HTTP messages, %d claims), all in the log; "+
		"%d events; %d messages, %d continued after a crash, %d abandoned and ended canceled; %d subscribers resumed %d times with no gap or duplicate; "+
		"%d joined with no position (%d while a message streamed) and showed the stored messages where they joined and where they left; "+
		"%d turns taken by racing claimers (%d claims), none with two owners",
		nodes, cycles, len(l.acks), kinds["chunk"], kinds["tool"], kinds["create"], kinds["finalize"], kinds["message"], kinds["claim"],
		events, messages, l.continued, len(l.abandoned), len(subscribers), resumes(subscribers), len(joiners), streamingJoins, turns, claims)
}

// catchUp waits up to 30 s until at() reaches seq want.
func catchUp(t *testing.T, who string, at func() int64, want int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); at() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s saw up to seq %d of %d", who, at(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resumes counts the subscribers' reconnections: their connections after
// the first.
func resumes(subs []*subscriber) int {
	n := 0
	for _, s := range subs {
		n += s.resumes - 1
	}
	return n
}

// waitSettled waits until no message is streaming any more (abandoned ones
// end canceled after the grace period) and returns each conversation's
// whole log, checked dense and agreeing with the head.
func waitSettled(t *testing.T, ctx context.Context, c *client.Client, ids []string) map[string][]parley.Event {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		logs := map[string][]parley.Event{}
		streaming := ""
		for _, id := range ids {
			evs, head := readLog(t, ctx, c, id)
			logs[id] = evs
			if head != int64(len(evs)) {
				// A write (an abandoned message ending canceled) came
				// between the two reads: the log is read from the store,
				// the head from the engine, which updates it just after.
				streaming = fmt.Sprintf("%s (%d events, head %d)", id, len(evs), head)
			}
			for mid, m := range lastVersions(t, evs) {
				if m.Status == parley.StatusStreaming {
					streaming = mid
				}
			}
		}
		if streaming == "" {
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the load stopped, %s is still changing", streaming)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastVersions returns each message as the last event that carried it
// whole (message or message.updated) left it.
func lastVersions(t *testing.T, evs []parley.Event) map[string]*parley.Message {
	t.Helper()
	out := map[string]*parley.Message{}
	for _, e := range evs {
		if e.Type == parley.EventMessage || e.Type == parley.EventMessageUpdated {
			var m parley.Message
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatalf("event %d: %v", e.Seq, err)
			}
			out[m.ID] = &m
		}
	}
	return out
}

// checkAcks checks that the event at each acknowledged seq is the write
// that was acknowledged, and that no two acks share a seq but deltas that
// share a chunk (they came while a commit was under way).
func checkAcks(t *testing.T, l *ledger, logs map[string][]parley.Event) {
	t.Helper()
	type key struct {
		conv string
		seq  int64
	}
	seen := map[key]ack{}
	for _, a := range l.acks {
		evs := logs[a.conv]
		if a.seq < 1 || a.seq > int64(len(evs)) {
			t.Fatalf("acknowledged %+v is not in the log of %d events: it was lost", a, len(evs))
		}
		if b, dup := seen[key{a.conv, a.seq}]; dup && (a.kind != "chunk" || b.kind != "chunk" || a.text == b.text) {
			t.Fatalf("two writes were acknowledged at seq %d: %+v and %+v", a.seq, a, b)
		}
		seen[key{a.conv, a.seq}] = a
		e := evs[a.seq-1]
		var m parley.Message
		var ch parley.Chunk
		ok := false
		switch a.kind {
		case "message", "create":
			ok = e.Type == parley.EventMessage && json.Unmarshal(e.Data, &m) == nil && m.ID == a.msgID &&
				(a.kind == "create" && m.Status == parley.StatusStreaming || a.kind == "message" && m.Content == a.text)
		case "chunk":
			ok = e.Type == parley.EventChunk && json.Unmarshal(e.Data, &ch) == nil && ch.MessageID == a.msgID &&
				slices.Contains(strings.SplitAfter(ch.Content, ";"), a.text)
		case "tool":
			var u parley.PartUpdate
			ok = e.Type == parley.EventPartUpdated && json.Unmarshal(e.Data, &u) == nil && u.MessageID == a.msgID &&
				u.Part.Type == parley.PartToolCall && u.Part.CallID == a.callID && u.Part.Status == a.status
		case "finalize":
			ok = e.Type == parley.EventMessageUpdated && json.Unmarshal(e.Data, &m) == nil && m.ID == a.msgID && m.Status == parley.StatusComplete
		case "claim":
			ok = claimAcked(a, e)
		}
		if !ok {
			t.Fatalf("acknowledged %s of %s at seq %d, but the log holds %s %s", a.kind, a.msgID, a.seq, e.Type, e.Data)
		}
	}
}

// checkMessages checks every runner message: it ended complete (its
// runner finished it, across crashes) or canceled (its runner never came
// back), its text is its chunks in log order and is whole deltas, and an
// abandoned one ended canceled. It returns how many messages there are.
func checkMessages(t *testing.T, l *ledger, logs map[string][]parley.Event) int {
	t.Helper()
	n := 0
	for conv, evs := range logs {
		last := lastVersions(t, evs)
		text := map[string]*strings.Builder{}
		for _, e := range evs {
			if e.Type == parley.EventChunk {
				var ch parley.Chunk
				_ = json.Unmarshal(e.Data, &ch)
				if text[ch.MessageID] == nil {
					text[ch.MessageID] = &strings.Builder{}
				}
				text[ch.MessageID].WriteString(ch.Content)
			}
		}
		for id, m := range last {
			n++
			if strings.HasPrefix(id, "writer-") || strings.HasPrefix(id, "claimer-") {
				continue // an HTTP message: checked by its ack
			}
			chunks := ""
			if text[id] != nil {
				chunks = text[id].String()
			}
			if m.Content != chunks || m.Content != deltas(strings.Count(m.Content, ";")) {
				t.Errorf("%s/%s: content %q, chunks %q: not its deltas in order", conv, id, m.Content, chunks)
			}
			switch {
			case m.Status == parley.StatusComplete:
				for _, p := range m.Parts {
					if p.Type == parley.PartToolCall && p.Status != parley.ToolCompleted {
						t.Errorf("%s/%s is complete with tool call %s %s", conv, id, p.CallID, p.Status)
					}
				}
			case m.Status == parley.StatusCanceled && strings.HasPrefix(id, "flaky-"):
			default:
				t.Errorf("%s/%s ended %s", conv, id, m.Status)
			}
		}
	}
	for _, a := range l.abandoned {
		m := lastVersions(t, logs[a.conv])[a.msgID]
		if m == nil || m.Status != parley.StatusCanceled {
			t.Errorf("abandoned message %s/%s is %+v, want canceled", a.conv, a.msgID, m)
		}
	}
	return n
}

// checkSubscriber checks that a subscriber saw exactly the log, and that
// it connected at least connects times (with one node: once more after
// every kill).
func checkSubscriber(t *testing.T, s *subscriber, log []parley.Event, connects int) {
	t.Helper()
	if len(s.events) != len(log) {
		t.Fatalf("the %s subscriber of %s saw %d events; the log has %d", s.transport, s.conv, len(s.events), len(log))
	}
	for i, e := range s.events {
		got, _ := json.Marshal(e)
		want, _ := json.Marshal(log[i])
		if !bytes.Equal(got, want) {
			t.Fatalf("the %s subscriber of %s saw\n%s\nwhere the log holds\n%s", s.transport, s.conv, got, want)
		}
	}
	if s.resumes < connects {
		t.Errorf("the %s subscriber of %s connected %d times, want at least %d", s.transport, s.conv, s.resumes, connects)
	}
}
