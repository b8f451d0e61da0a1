package api

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the API, written by hand: every
// route of apiRoutes, its parameters, bodies, answers and errors, and the
// frames of its streams. The tests check it against the routes, against
// the OpenAPI 3.1 schema, and against real answers of a real server.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (JSON), as
// GET /v1/openapi.json serves it.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// serveOpenAPI serves GET /v1/openapi.json: the document needs no token,
// since it describes the API and holds no data.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
}
