package main

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
)

// servePprof serves Go's profiles on ln until ctx ends: for measuring a
// running server (go tool pprof http://ADDR/debug/pprof/profile). It is
// off unless asked for, and on its own listener, apart from the API.
func servePprof(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	_ = srv.Serve(ln)
}
