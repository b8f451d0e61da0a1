package api

import (
	"net/http"
	"net/http/httptest"
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
