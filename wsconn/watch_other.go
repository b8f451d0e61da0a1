//go:build !linux

package wsconn

// watcher has no epoll here: every watched connection is drained by a
// goroutine of its own.
var watcher noWatcher

type noWatcher struct{}

func (noWatcher) add(*Conn) bool   { return false }
func (noWatcher) rearm(*Conn) bool { return false }
func (noWatcher) remove(*Conn)     {}
