// Package transport writes a conversation's stream to its client, over
// Server-Sent Events (sse.go) or WebSocket (ws.go): an init frame, then
// each event and guidance as it comes, then an error frame when the server
// ends the stream (frames.go). The HTTP handlers that open a stream decide
// who may read what and make the follower (package api); from there on the
// stream is this package's.
//
// A stream holds no goroutine while it is quiet: the pump (pump.go) runs
// only while there is something to write, and the client's leaving, or
// what a WebSocket client sends, is seen as it happens with no goroutine
// waiting on its socket. Two subpackages hold the pieces below that:
// wsconn is the server side of a WebSocket connection (streams and runner
// connections both use it), and netpoll the one epoll set that says when
// an idle socket has something to read.
package transport

import (
	"log/slog"
	"time"
)

// Options configure Streams. Zero values take the defaults.
type Options struct {
	// Heartbeat is how long a stream may be silent before it gets a ping:
	// an SSE comment, a WebSocket ping (default 15s).
	Heartbeat time.Duration
	// WriteTimeout bounds one batch of writes to a client that does not
	// read (default 10s); past it the client is dropped.
	WriteTimeout time.Duration
	// OriginPatterns are the host patterns of other origins whose browsers
	// may open WebSocket streams (see wsconn.Options).
	OriginPatterns []string
	// ErrorBody is the JSON object an error frame carries for an error:
	// {code, message, ...details}, with code "internal" (and nothing of
	// the cause) for an error that is not to be told. Required.
	ErrorBody func(error) map[string]any
	// Logger receives the internal errors that end streams.
	Logger *slog.Logger
}

// Streams writes conversations' streams to their clients.
type Streams struct {
	opts Options
}

// New returns Streams with opts.
func New(opts Options) *Streams {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Streams{opts: opts}
}
