package netpoll_test

import (
	"net"
	"testing"

	"github.com/parleyhq/parley/internal/transport/netpoll"
)

// TestNotASocket: a connection with no socket of its own is not watched,
// and the caller is told so.
func TestNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w, ok := netpoll.Watch(a, func() bool { return true }); ok || w != nil {
		t.Fatal("a pipe was watched")
	}
	var w *netpoll.Watcher
	w.Stop() // a nil watch stops as nothing
}
