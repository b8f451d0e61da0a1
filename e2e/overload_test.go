package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// overload is the size of TestOverloadWhileARunnerStreams: short in the
// test command, the whole load with PARLEY_OVERLOAD=long.
type overload struct {
	idle, streams, bodies int
	// holders are the processes that hold the idle connections: a process
	// may open at most 20,000 files here.
	holders int
}

func overloadSize() overload {
	if os.Getenv("PARLEY_OVERLOAD") == "long" {
		return overload{idle: 20_000, streams: 1000, bodies: 40, holders: 4}
	}
	return overload{idle: 2000, streams: 200, bodies: 40, holders: 1}
}

// Budgets the server of the overload test runs with, and what its memory
// may grow by at its peak: the bodies being read (at most their budget,
// each decoded into about twice its size), what streams hold unread, each
// idle connection's buffers and goroutine, and room for the rest.
const (
	overloadBodyMemory       = 64 << 20
	overloadSubscriberMemory = 64 << 20
)

func overloadPeak(o overload) int64 {
	return 3*overloadBodyMemory + 2*overloadSubscriberMemory + int64(o.idle+o.streams)*40<<10 + 192<<20
}

// TestOverloadWhileARunnerStreams: while a runner streams an answer, the
// server is flooded at once with idle connections that send nothing (or
// half a request), streams that never read a conversation of large
// messages, and forty 16 MiB chat bodies. The runner's deltas keep being
// acknowledged through every phase, /healthz answers, and the server's
// memory at its peak stays within what its budgets allow (-max-conns,
// -subscriber-memory, -max-body-memory). Before those bounds, the idle
// connections took every file descriptor (accept4: too many open files),
// a thousand unread streams held 940 MB and forty bodies 515 MB.
// PARLEY_OVERLOAD=long runs it at that size: 20,000 idle connections and
// 1,000 streams.
func TestOverloadWhileARunnerStreams(t *testing.T) {
	o := overloadSize()
	db := filepath.Join(t.TempDir(), "parley.db")
	admin, _ := createToken(t, db, "-kind", "admin")
	viewers := []string{}
	for range (o.streams + 499) / 500 {
		v, _ := createToken(t, db, "-kind", "viewer")
		viewers = append(viewers, v)
	}
	srv := startServer(t, db, "-max-body-memory", strconv.Itoa(overloadBodyMemory), "-subscriber-memory", strconv.Itoa(overloadSubscriberMemory))
	pid := srv.cmd.Process.Pid
	addr := strings.TrimPrefix(srv.url, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := client.New(srv.url, admin)

	// A conversation of large messages, for the streams that never read:
	// each is sent a snapshot of about 4 MiB, the most a snapshot holds,
	// more than the kernel takes for a socket whose client reads nothing.
	big, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"writer"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 36 {
		text := strings.Repeat(fmt.Sprintf("large message %02d ", i), 120<<10/16)
		if _, err := c.PostMessage(ctx, big.Conversation.ID, client.Message{AgentID: "writer", Content: text[:120<<10]}); err != nil {
			t.Fatal(err)
		}
	}

	// The runner streams all along, each delta acknowledged before the
	// next; acks counts them.
	conv, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.ConnectRunner(ctx, conv.Conversation.ID, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var acks atomic.Int64
	streaming, stopStreaming := context.WithCancel(ctx)
	streamErr := make(chan error, 1)
	go func() { streamErr <- streamAlong(streaming, run, &acks) }()
	// progress waits until the runner has had n more deltas acknowledged.
	progress := func(phase string, n int64) {
		t.Helper()
		from := acks.Load()
		for acks.Load() < from+n {
			select {
			case err := <-streamErr:
				t.Fatalf("%s: the runner stopped: %v", phase, err)
			case <-ctx.Done():
				t.Fatalf("%s: %d deltas acknowledged in 10 minutes, want %d", phase, acks.Load()-from, n)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if code := status(t, srv.url+"/healthz", ""); code != 200 {
			t.Fatalf("%s: /healthz answered %d", phase, code)
		}
	}
	progress("before the load", 50)
	before := rss(t, pid, "VmRSS")

	// Idle connections, from processes of their own.
	holders := holdIdle(t, ctx, addr, o.idle, o.holders)
	progress("idle connections", 50)

	// Streams that never read, each with a small receive buffer so that
	// the server holds what they do not take.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	var unread []net.Conn
	defer func() {
		for _, c := range unread {
			c.Close()
		}
	}()
	for i := range o.streams {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		unread = append(unread, c)
		fmt.Fprintf(c, "GET /v1/conversations/%s/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", big.Conversation.ID, addr, viewers[i/500])
		if i == 0 {
			// The first one reads its answer's head: a stream, sending.
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || !strings.Contains(line, " 200 ") {
				t.Fatalf("an unread stream: %q, %v", line, err)
			}
		}
	}
	// What is written to their conversation now queues for each of them,
	// behind a snapshot it has not taken.
	for i := range 10 {
		text := strings.Repeat(fmt.Sprintf("later message %02d ", i), 120<<10/17)
		if _, err := c.PostMessage(ctx, big.Conversation.ID, client.Message{AgentID: "writer", Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	progress("unread streams", 50)

	// Forty 16 MiB chat bodies at once.
	body := largeChat(16 << 20)
	var wg sync.WaitGroup
	var bodiesDone atomic.Int64
	for range o.bodies {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.url+"/v1/chat", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+admin)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil { // a refused body may also be cut off
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			bodiesDone.Add(1)
		})
	}
	progress("large bodies", 50)
	wg.Wait()
	progress("after the load", 50)

	peak := rss(t, pid, "VmHWM")
	metrics := scrape(t, srv.url)
	t.Logf("%d idle connections, %d unread streams, %d bodies of 16 MiB: %d deltas acknowledged; RSS %d MiB before the load, %d MiB at its peak (bound %d MiB); %s",
		o.idle, o.streams, o.bodies, acks.Load(), before>>20, peak>>20, (before+overloadPeak(o))>>20, metrics)
	if peak > before+overloadPeak(o) && !raceBuild {
		t.Errorf("the server's memory peaked at %d MiB, %d MiB more than before the load; its budgets allow %d MiB more", peak>>20, (peak-before)>>20, overloadPeak(o)>>20)
	}
	if log := srv.log(); strings.Contains(log, "too many open files") {
		t.Errorf("the server ran out of descriptors:\n%s", log)
	}
	stopStreaming()
	if err := <-streamErr; err != nil && ctx.Err() == nil && streaming.Err() == nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		_ = h.Process.Kill()
		_ = h.Wait()
	}
}

// streamAlong streams answers on run until ctx ends, a delta at a time,
// counting the deltas acknowledged; each answer ends after 1,000 deltas
// (well within a message's text) and the next begins.
func streamAlong(ctx context.Context, run *client.Runner, acks *atomic.Int64) error {
	for n := 0; ; n++ {
		id := fmt.Sprintf("r%d", n)
		if _, err := run.Create(ctx, id); err != nil {
			return ignoreEnd(ctx, err)
		}
		for range 1000 {
			if _, err := run.Text(ctx, id, "a delta of text "); err != nil {
				return ignoreEnd(ctx, err)
			}
			acks.Add(1)
		}
		if _, err := run.Finalize(ctx, id, parley.FinishEndTurn, ""); err != nil {
			return ignoreEnd(ctx, err)
		}
	}
}

func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// largeChat is a chat body of about size bytes, as the AI SDK sends a long
// chat (every message each time), whose last message is the assistant's:
// it is read, and refused once decoded.
func largeChat(size int) []byte {
	msg := `{"id":"m","role":"assistant","parts":[{"type":"text","text":"` + strings.Repeat("x", 64<<10) + `"}]}`
	var chat strings.Builder
	chat.WriteString(`{"id":"long","messages":[` + msg)
	for chat.Len()+len(msg)+3 < size {
		chat.WriteString("," + msg)
	}
	chat.WriteString(`]}`)
	return []byte(chat.String())
}

// scrape reads the server's connection and memory gauges from /metrics.
func scrape(t *testing.T, url string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"parley_connections_", "parley_subscriber_bytes", "parley_subscribers_shed_total"} {
			if strings.HasPrefix(line, name) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "; ")
}

// holdIdle starts processes (this test binary, running
// TestHelperHoldIdleConnections) that open n idle connections to addr in
// all, half sending nothing and half half a request's headers, and hold
// them until they are killed. It returns once they have all been opened
// (or refused: the server closes idle ones to make room).
func holdIdle(t *testing.T, ctx context.Context, addr string, n, processes int) []*exec.Cmd {
	t.Helper()
	var cmds []*exec.Cmd
	for i := range processes {
		share := n / processes
		if i == processes-1 {
			share = n - share*(processes-1)
		}
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperHoldIdleConnections$")
		cmd.Env = append(os.Environ(), "PARLEY_HOLD_ADDR="+addr, "PARLEY_HOLD_N="+strconv.Itoa(share))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "held ") {
			t.Fatalf("a process holding idle connections said %q: %v", line, err)
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// TestHelperHoldIdleConnections is not a test: holdIdle runs it in a
// process of its own to open PARLEY_HOLD_N idle connections to
// PARLEY_HOLD_ADDR and hold them.
func TestHelperHoldIdleConnections(t *testing.T) {
	addr := os.Getenv("PARLEY_HOLD_ADDR")
	if addr == "" {
		t.Skip("run by TestOverloadWhileARunnerStreams")
	}
	n, _ := strconv.Atoi(os.Getenv("PARLEY_HOLD_N"))
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			continue // refused: the server holds as many as it may
		}
		held = append(held, c)
		if i%2 == 1 {
			_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n")
		}
	}
	fmt.Printf("held %d\n", len(held))
	select {} // until killed
}

// held keeps the connections TestHelperHoldIdleConnections opened from
// the collector, which would close them.
var held []net.Conn
