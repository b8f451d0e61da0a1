// Package peek reads what a peer has sent on a connection without waiting
// for more, for connections no goroutine reads: the server's streams,
// whose clients send next to nothing, are written by one goroutine that
// looks at what came in between its writes.
package peek
