package connlimit

// Reading returns how many idle connections have a request arriving.
func (l *Listener) Reading() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, k := range []int{unknownReading, knownReading} {
		for e := l.idle[k].root.next; e != nil && e != &l.idle[k].root; e = e.next {
			n++
		}
	}
	return n
}
