package api_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/webui"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// openAPIPaths reads the document's operations as "METHOD /path".
func openAPIPaths(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	var ops []string
	for path, item := range doc.Paths {
		for key := range item {
			switch key {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				ops = append(ops, strings.ToUpper(key)+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// uiPages are the web UI's patterns that are pages, which the document
// describes; the UI's other patterns are the files of its build (assets,
// the favicon), which change with every build.
var uiPages = map[string]string{"/{$}": "/", "/c/{id}": "/c/{id}"}

// TestOpenAPIDescribesEveryRoute: every route the server's mux is built
// from is an operation of the document, with the same method, and every
// operation of the document is routed by the mux to that route.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	_, srv := setupServer(t, engine.Options{}, api.Options{})
	routes := api.Routes(srv)
	for _, p := range webui.Embedded().Patterns() {
		if page, ok := uiPages[p]; ok {
			routes = append(routes, "GET "+page)
		}
	}
	if len(routes) != len(api.Routes(srv))+len(uiPages) {
		t.Fatalf("the web UI's patterns %v lack a page of %v", webui.Embedded().Patterns(), slices.Collect(maps.Keys(uiPages)))
	}
	slices.Sort(routes)
	ops := openAPIPaths(t)
	for _, r := range routes {
		if _, found := slices.BinarySearch(ops, r); !found {
			t.Errorf("the server routes %s, which openapi.json does not describe", r)
		}
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, op := range ops {
		if _, found := slices.BinarySearch(routes, op); !found {
			t.Errorf("openapi.json describes %s, which the server does not route", op)
			continue
		}
		// The mux itself routes a request of that shape to that route.
		method, path, _ := strings.Cut(op, " ")
		want := op
		if path == "/" {
			want = "GET /{$}"
		}
		if got := api.RouteOf(srv, method, param.ReplaceAllString(path, "x1")); got != want {
			t.Errorf("%s %s is routed to %q, want %q", method, param.ReplaceAllString(path, "x1"), got, want)
		}
	}
}

// openAPIValidator parses the document with libopenapi and returns a
// validator of requests and answers against it.
func openAPIValidator(t *testing.T) (libopenapi.Document, validator.Validator) {
	t.Helper()
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	if err != nil {
		t.Fatalf("libopenapi cannot read openapi.json: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("no validator of openapi.json: %v", errs)
	}
	return doc, v
}

// TestOpenAPIIsValid: the document is OpenAPI 3.1, valid against the
// specification's own schema, and every schema a stream names exists.
func TestOpenAPIIsValid(t *testing.T) {
	t.Parallel()
	doc, v := openAPIValidator(t)
	if doc.GetVersion() != "3.1.0" {
		t.Errorf("openapi.json is OpenAPI %s, want 3.1.0", doc.GetVersion())
	}
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("openapi.json is not valid OpenAPI 3.1: %s: %s (line %d)", e.Message, e.Reason, e.SpecLine)
		}
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("openapi.json does not build: %v", err)
	}
	named := 0
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for key, ext := range op.Extensions.FromOldest() {
				if !strings.HasPrefix(key, "x-parley-") {
					continue
				}
				var refs any
				if err := ext.Decode(&refs); err != nil {
					t.Fatalf("%s %s %s: %v", method, path, key, err)
				}
				for _, ref := range schemaRefs(refs) {
					named++
					name, ok := strings.CutPrefix(ref, "#/components/schemas/")
					if _, found := model.Model.Components.Schemas.Get(name); !ok || !found {
						t.Errorf("%s %s %s names %s, which is not a schema of the document", method, path, key, ref)
					}
				}
			}
		}
	}
	if named < 8 {
		t.Errorf("the streams name %d frame schemas, want every SSE and WebSocket endpoint's", named)
	}
}

// schemaRefs are the schema pointers an x-parley- extension holds: a
// string, or a map of them.
func schemaRefs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, x := range v {
			out = append(out, schemaRefs(x)...)
		}
		return out
	}
	return nil
}

// TestOpenAPIServedWithoutToken: the document needs no token, and is the
// embedded one; an open server answers it only as it answers everything
// (to loopback names).
func TestOpenAPIServedWithoutToken(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("GET", "/v1/openapi.json", "", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || !bytes.Equal(r.raw, api.OpenAPI()) {
		t.Fatalf("GET /v1/openapi.json without a token: %d %s, %d bytes", r.status, r.header.Get("Content-Type"), len(r.raw))
	}
	open := setup(t, engine.Options{}, api.Options{Open: true})
	open.want(open.do("GET", "/v1/openapi.json", "", nil, "Host", "attacker.example"), 403, "forbidden")
	if r := open.do("GET", "/v1/openapi.json", "", nil); r.status != 200 {
		t.Fatalf("an open server answered %d: %s", r.status, r.raw)
	}
}

// TestOpenAPIEventTypesAreTheServers: the document's Event is one of a
// schema per event type, and those types are every type a server writes
// (parley.EventTypes), no more.
func TestOpenAPIEventTypesAreTheServers(t *testing.T) {
	t.Parallel()
	type typeSchema struct {
		Const string   `json:"const"`
		Enum  []string `json:"enum"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				OneOf []struct {
					Ref string `json:"$ref"`
				} `json:"oneOf"`
				Properties struct {
					Type typeSchema `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, one := range doc.Components.Schemas["Event"].OneOf {
		s, ok := doc.Components.Schemas[strings.TrimPrefix(one.Ref, "#/components/schemas/")]
		if !ok {
			t.Fatalf("Event names %s, which is not a schema", one.Ref)
		}
		if s.Properties.Type.Const != "" {
			got = append(got, s.Properties.Type.Const)
		}
		got = append(got, s.Properties.Type.Enum...)
	}
	slices.Sort(got)
	want := parley.EventTypes()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("openapi.json's event types:\n%v\nthe server's:\n%v", got, want)
	}
}
