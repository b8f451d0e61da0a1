// Package e2e runs the real parley binary on loopback ports with temporary
// SQLite files and talks to it over HTTP, SSE and WebSocket.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// binary is the parley binary built once for the package's tests, with
// the race detector when the tests have it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "parley-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "parley")
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/parley")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building parley:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one running parley process.
type server struct {
	t    testing.TB
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
}

var servingRE = regexp.MustCompile(`msg="parley serving" addr=(\S+)`)

// startServer runs "parley serve" on a free loopback port with the database
// at db and waits until it serves.
func startServer(t testing.TB, db string, args ...string) *server {
	t.Helper()
	return startServerAt(t, db, "127.0.0.1:0", args...)
}

func startServerAt(t testing.TB, db, addr string, args ...string) *server {
	t.Helper()
	return startCommand(t, exec.Command(binary, append([]string{"serve", "-db", db, "-addr", addr}, args...)...))
}

// startCommand runs cmd, a "parley serve" (perhaps through a wrapper that
// execs it), and waits until it serves.
func startCommand(t testing.TB, cmd *exec.Cmd) *server {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil {
				addrc <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		if raceBuild {
			s.stop()
		}
		s.kill()
		s.checkRaces()
	})
	select {
	case a := <-addrc:
		s.url = "http://" + a
	case <-s.done:
		t.Fatalf("parley exited before serving:\n%s", s.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("parley did not start in 20s:\n%s", s.log())
	}
	return s
}

// refusesToStart runs "parley serve" on the database at db, listening on
// addr, with args, and fails the test unless it exits with an error whose
// output says want.
func refusesToStart(t testing.TB, ctx context.Context, db, addr, want string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, binary, append([]string{"serve", "-db", db, "-addr", addr}, args...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("serve %s: %v, want a refusal that says %q; output:\n%s", strings.Join(args, " "), err, want, out)
	}
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// checkRaces fails the test if the server, built with the race detector,
// reported a data race on stderr.
func (s *server) checkRaces() {
	log := s.log()
	at := strings.Index(log, "WARNING: DATA RACE")
	if at < 0 {
		return
	}
	report := log[at:]
	if end := strings.Index(report, "\n==================\n"); end >= 0 {
		report = report[:end]
	}
	s.t.Errorf("the server reported a data race:\n%s", report)
}

// stop ends the process as a clean shutdown does (SIGTERM), unless it has
// ended, and waits for it (a minute at most). A server built with the race
// detector is stopped so at the end of a test: the detector may write a
// report only a while after the race, or as the process exits, and SIGKILL
// would lose it.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
	}
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	<-s.done
}

// runParley runs a parley subcommand to completion and returns its stdout.
func runParley(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("parley %v: %v\n%s", args, err, msg)
	}
	return strings.TrimSpace(string(out))
}

// proxy forwards loopback TCP connections to a target and can cut every
// connection it carries, as a network failure would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cuts   int
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

// cut closes every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.cuts++
}

// readLog reads a conversation's whole log, checks that seq is dense, and
// returns it with the head's last seq, read after it.
func readLog(t *testing.T, ctx context.Context, c *client.Client, id string) ([]parley.Event, int64) {
	t.Helper()
	var all []parley.Event
	for {
		page, _, err := c.Events(ctx, id, int64(len(all)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.Seq != int64(len(all)+1) {
				t.Fatalf("conversation %s: seq %d after %d: the log is not dense", id, e.Seq, len(all))
			}
			all = append(all, e)
		}
		if len(page) == 0 {
			break
		}
	}
	v, err := c.Conversation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return all, v.Head.LastSeq
}
