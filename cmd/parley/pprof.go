package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// servePprof serves Go's profiles on addr until ctx ends: for measuring a
// running server (go tool pprof http://ADDR/debug/pprof/profile). It is
// off unless asked for, and on its own listener, apart from the API.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() { _ = srv.Serve(ln) }()
	log.Info("profiles served", slog.String("addr", ln.Addr().String()))
	return nil
}
