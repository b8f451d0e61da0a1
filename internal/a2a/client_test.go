package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A stream's ends as Stream.Next says them (its events read by
// internal/sse): io.EOF when the agent ends it between events,
// io.ErrUnexpectedEOF when it ends within one, and an event over MaxEvent
// refused with this package's error.
func TestStreamEnds(t *testing.T) {
	const task = `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`
	bodies := map[string]string{
		"/ends": ": keep-alive\n\nevent: x\nid: 1\ndata: " + task + "\r\n\r\n: bye\n\n",
		"/cut":  "data: " + task + "\n\ndata: {\"jsonrpc\":",
		"/big":  "data: " + task + "\n\ndata: " + strings.Repeat("x", 600) + "\ndata: " + strings.Repeat("y", 600) + "\n\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, bodies[r.URL.Path])
	}))
	defer srv.Close()
	req := &SendMessageRequest{Message: &Message{MessageID: "u", Role: RoleUser, Parts: []Part{TextPart("hi")}}}
	for path, want := range map[string]error{"/ends": io.EOF, "/cut": io.ErrUnexpectedEOF, "/big": errEventTooLarge} {
		c := &Client{URL: srv.URL + path, Version: ProtocolVersion, MaxEvent: 1000}
		s, err := c.SendStreamingMessage(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := s.Next(); err != nil || ev.Task == nil || ev.Task.ID != "t" {
			t.Errorf("%s: the first event: %+v, %v", path, ev, err)
		}
		if _, err := s.Next(); err != want {
			t.Errorf("%s: the end: %v, want %v", path, err, want)
		}
		s.Close()
	}
}

// JSONRPCInterface takes 1.0's JSON-RPC interface over 0.3's and over
// other bindings, and 0.3's when it is the only one.
func TestJSONRPCInterface(t *testing.T) {
	card := &AgentCard{SupportedInterfaces: []AgentInterface{
		{URL: "http://a/grpc", ProtocolBinding: "GRPC", ProtocolVersion: "1.0"},
		{URL: "http://a/old", ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
		{URL: "http://a/new", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
	}}
	if in, ok := JSONRPCInterface(card); !ok || in.URL != "http://a/new" || in.ProtocolVersion != "1.0" {
		t.Errorf("JSONRPCInterface = %+v, %v", in, ok)
	}
	card.SupportedInterfaces = card.SupportedInterfaces[:2]
	if in, ok := JSONRPCInterface(card); !ok || in.URL != "http://a/old" || in.ProtocolVersion != "0.3" {
		t.Errorf("JSONRPCInterface = %+v, %v", in, ok)
	}
	card.SupportedInterfaces = card.SupportedInterfaces[:1]
	if in, ok := JSONRPCInterface(card); ok {
		t.Errorf("JSONRPCInterface of a gRPC card = %+v", in)
	}
}

// The client's bounds and errors: an answer over MaxEvent, a JSON-RPC
// error (as the result of a call, within a stream, and instead of a
// stream), a card over 1 MiB, and a card fetch that does not answer in time.
func TestClientBoundsAndErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /big", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":%q}]}}}`, strings.Repeat("x", 2000))
	})
	mux.HandleFunc("POST /refuses", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"task not found"}}`)
	})
	mux.HandleFunc("POST /stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"boom\"}}\n\n")
	})
	mux.HandleFunc("GET /big-card", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"name":%q}`, strings.Repeat("x", maxCard))
	})
	mux.HandleFunc("GET /slow-card", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	req := &SendMessageRequest{Message: &Message{MessageID: "u", Role: RoleUser, Parts: []Part{TextPart("hi")}}}

	c := &Client{URL: srv.URL + "/big", Version: ProtocolVersion, MaxEvent: 1000}
	if _, err := c.SendMessage(ctx, req); err == nil || !strings.Contains(err.Error(), "over 1000 bytes") {
		t.Errorf("an answer over MaxEvent: %v", err)
	}
	c.MaxEvent = 0
	if ev, err := c.SendMessage(ctx, req); err != nil || ev.Message == nil {
		t.Errorf("the same answer under the default bound: %+v, %v", ev, err)
	}

	var rpcErr *Error
	c = &Client{URL: srv.URL + "/refuses", Version: ProtocolVersion}
	if _, err := c.CancelTask(ctx, "t"); !errors.As(err, &rpcErr) || rpcErr.Code != CodeTaskNotFound {
		t.Errorf("CancelTask refused: %v", err)
	}
	if _, err := c.SendStreamingMessage(ctx, req); !errors.As(err, &rpcErr) || rpcErr.Code != CodeTaskNotFound {
		t.Errorf("a stream refused with one JSON answer: %v", err)
	}

	c = &Client{URL: srv.URL + "/stream", Version: ProtocolVersion}
	s, err := c.SendStreamingMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Task == nil || ev.Task.ID != "t" {
		t.Fatalf("the first event: %+v, %v", ev, err)
	}
	if _, err := s.Next(); !errors.As(err, &rpcErr) || rpcErr.Message != "boom" {
		t.Errorf("an error in the stream: %v", err)
	}

	if _, err := FetchCard(ctx, nil, srv.URL+"/big-card", nil, 0); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a card over 1 MiB: %v", err)
	}
	start := time.Now()
	if _, err := FetchCard(ctx, nil, srv.URL+"/slow-card", nil, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a card that never comes: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the card's fetch took %v, bounded by 100ms", d)
	}
}
