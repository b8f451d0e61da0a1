package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// balancer spreads the TCP connections it accepts over several nodes, as
// a load balancer in front of them would: each new connection goes to the
// next node in turn that accepts it, so a node that is down is passed
// over. A connection to a node that dies ends with it, and the client's
// next connection goes to another node.
type balancer struct {
	ln      net.Listener
	targets []string
	mu      sync.Mutex
	next    int
	conns   map[net.Conn]struct{}
}

func newBalancer(t *testing.T, targets []string) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, targets: targets, conns: map[net.Conn]struct{}{}}
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) url() string { return "http://" + b.ln.Addr().String() }

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(c)
	}
}

// forward connects c to the first node in turn that accepts, or closes it.
func (b *balancer) forward(c net.Conn) {
	b.mu.Lock()
	start := b.next
	b.next++
	b.mu.Unlock()
	for i := range b.targets {
		u, err := net.DialTimeout("tcp", b.targets[(start+i)%len(b.targets)], time.Second)
		if err != nil {
			continue
		}
		b.mu.Lock()
		b.conns[c], b.conns[u] = struct{}{}, struct{}{}
		b.mu.Unlock()
		go func() { io.Copy(u, c); u.Close(); b.forget(u) }()
		io.Copy(c, u)
		c.Close()
		b.forget(c)
		return
	}
	c.Close()
}

func (b *balancer) forget(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
}

func (b *balancer) close() {
	b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		c.Close()
	}
}
