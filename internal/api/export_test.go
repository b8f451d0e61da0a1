package api

import (
	"net/http"
	"net/http/httptest"

	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
)

// Routes lists the API's routes as "METHOD /path" patterns, as the mux
// is built from them (for the OpenAPI tests).
func Routes(s *Server) []string {
	var out []string
	for _, rt := range s.apiRoutes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// RouteOf returns the pattern the server's mux routes a request to ("" if
// none).
func RouteOf(s *Server, method, path string) string {
	_, pattern := s.mux.Handler(httptest.NewRequest(method, path, http.NoBody))
	return pattern
}

// NewOutbox returns what queues the answers of a runner connection, as
// its reader does, on an outbox whose writer hands each answer's frame to
// write, in order, once it is known (the connection's socket, for the
// tests). queue reports false once the outbox is closed.
func NewOutbox(write func(frame []byte)) (queue func(f *runners.Frame, ack *engine.Ack) bool) {
	q := newRunnerQueue()
	q.writer = func() {
		for {
			items, _ := q.take()
			if len(items) == 0 {
				return
			}
			for _, it := range items {
				write(it.reply.appendFrame(nil))
				q.answered()
			}
		}
	}
	return func(f *runners.Frame, ack *engine.Ack) bool { return q.reply(&pendingReply{to: replyTo(f), ack: ack}) }
}
