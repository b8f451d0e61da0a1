package wsconn

// Watched returns how many connections the epoll watcher watches.
func Watched() int {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	return len(watcher.conns)
}
