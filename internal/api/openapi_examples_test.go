package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
)

// exampleReport is what checkExamples found in a document.
type exampleReport struct {
	checked int      // examples checked, each once
	faults  []string // examples that do not match their schema, and examples missing
	// shown are the component schemas a body example shows (by the
	// media type's $ref) or that have examples of their own.
	shown map[string]bool
}

// decoder is a YAML node of the document (the library's own type, which
// the test need not name).
type decoder interface{ Decode(any) error }

// checkExamples checks every example of an OpenAPI document against its
// schema: the examples of request and answer bodies (`example`, and
// `examples` by name), of parameters, and of component schemas. An SSE
// body's example is checked line by line: each `data:` line against the
// frame schema its operation names in x-parley-sse-frames. It also reports
// as a fault every JSON request body and every error answer without an
// example.
func checkExamples(t *testing.T, spec []byte) exampleReport {
	t.Helper()
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatalf("libopenapi cannot read the document: %v", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("the document does not build: %v", err)
	}
	c := &exampleChecker{schemas: schema_validation.NewSchemaValidator(), seen: map[any]bool{}, model: &model.Model,
		report: exampleReport{shown: map[string]bool{}}}
	for name, res := range model.Model.Components.Responses.FromOldest() {
		if n := c.content("the answer "+name, res.Content, ""); n == 0 {
			c.fault("the answer %s has no example", name)
		}
	}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			where := strings.ToUpper(method) + " " + path
			frames := ""
			if ext, ok := op.Extensions.Get("x-parley-sse-frames"); ok {
				_ = ext.Decode(&frames)
			}
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				c.param(where, p)
			}
			if rb := op.RequestBody; rb != nil {
				if n := c.content(where+" request", rb.Content, frames); n == 0 && rb.Content.GetOrZero("application/json") != nil {
					c.fault("%s: the JSON request body has no example", where)
				}
			}
			for code, res := range op.Responses.Codes.FromOldest() {
				c.content(where+" "+code, res.Content, frames) // the components' answers were checked above
			}
		}
	}
	for name, proxy := range model.Model.Components.Schemas.FromOldest() {
		s := proxy.Schema()
		for i, ex := range s.Examples {
			c.report.shown[name] = true
			c.check(fmt.Sprintf("schema %s example %d", name, i), s, ex)
		}
	}
	return c.report
}

type exampleChecker struct {
	schemas schema_validation.SchemaValidator
	model   *v3.Document
	seen    map[any]bool // examples checked, by their node
	report  exampleReport
}

func (c *exampleChecker) fault(format string, args ...any) {
	c.report.faults = append(c.report.faults, fmt.Sprintf(format, args...))
}

// content checks the examples of a body's media types; it returns how many
// it found.
func (c *exampleChecker) content(where string, content *orderedmap.Map[string, *v3.MediaType], frames string) int {
	n := 0
	for ctype, mt := range content.FromOldest() {
		if mt.Schema == nil {
			continue
		}
		s := mt.Schema.Schema()
		examples := named(mt.Examples)
		if mt.Example != nil {
			examples[""] = mt.Example
		}
		for name, ex := range examples {
			n++
			if ref := mt.Schema.GetReference(); ref != "" {
				c.report.shown[strings.TrimPrefix(ref, "#/components/schemas/")] = true
			}
			at := fmt.Sprintf("%s %s example %s", where, ctype, name)
			if c.check(at, s, ex) && ctype == "text/event-stream" && frames != "" {
				c.sse(at, ex, frames)
			}
		}
	}
	return n
}

// param checks a parameter's examples.
func (c *exampleChecker) param(where string, p *v3.Parameter) {
	if p.Schema == nil {
		return
	}
	examples := named(p.Examples)
	if p.Example != nil {
		examples[""] = p.Example
	}
	for name, ex := range examples {
		c.check(fmt.Sprintf("%s parameter %s example %s", where, p.Name, name), p.Schema.Schema(), ex)
	}
}

// named lists `examples` by name (an `example` is added as "").
func named(many *orderedmap.Map[string, *base.Example]) map[string]decoder {
	out := map[string]decoder{}
	for name, ex := range many.FromOldest() {
		if ex.Value != nil {
			out[name] = ex.Value
		}
	}
	return out
}

// check checks one example against schema s, once: it reports whether it
// matched.
func (c *exampleChecker) check(where string, s *base.Schema, ex decoder) bool {
	if c.seen[ex] {
		return true
	}
	c.seen[ex] = true
	c.report.checked++
	var v any
	if err := ex.Decode(&v); err != nil {
		c.fault("%s: %v", where, err)
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.fault("%s: %v", where, err)
		return false
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(s, b); !ok {
		c.fault("%s does not match its schema:%s\n%s", where, describe(errs), b)
		return false
	}
	return true
}

// sse checks each data line of an SSE example against the frame schema.
func (c *exampleChecker) sse(where string, ex decoder, frames string) {
	var text string
	_ = ex.Decode(&text)
	proxy, ok := c.model.Components.Schemas.Get(strings.TrimPrefix(frames, "#/components/schemas/"))
	if !ok {
		c.fault("%s: no frame schema %s", where, frames)
		return
	}
	data := 0
	for i, line := range strings.Split(text, "\n") {
		frame, ok := strings.CutPrefix(line, "data: ")
		if !ok || frame == "[DONE]" {
			continue
		}
		data++
		if ok, errs := c.schemas.ValidateSchemaBytes(proxy.Schema(), []byte(frame)); !ok {
			c.fault("%s line %d does not match %s:%s\n%s", where, i+1, frames, describe(errs), frame)
		}
	}
	if data == 0 {
		c.fault("%s has no data line", where)
	}
}

// TestOpenAPIExamplesValid: every example of the document matches its
// schema; every JSON request body and every error answer has one; a
// conversation's view, a message, the chat and AG-UI requests and every
// frame of every stream are shown by one.
func TestOpenAPIExamplesValid(t *testing.T) {
	t.Parallel()
	r := checkExamples(t, api.OpenAPI())
	for _, f := range r.faults {
		t.Error(f)
	}
	// Every example the document holds was checked: none escaped the walk.
	if held := countExamples(t, api.OpenAPI()); r.checked != held {
		t.Errorf("checked %d examples, the document holds %d", r.checked, held)
	}
	want := []string{"Error", "View", "Message", "MessageResult", "ChatRequest", "RunAgentInput", "Event",
		"InitFrame", "GuidanceFrame", "StreamErrorFrame", "StreamFrame", "ExportLine",
		"RunnerFrame", "RunnerPrompt", "RunnerAbortOrRevert", "RunnerAck", "RunnerError", "UIMessageChunk", "AGUIEvent"}
	for _, name := range want {
		if !r.shown[name] {
			t.Errorf("no example shows a %s", name)
		}
	}
}

// countExamples counts the examples of a document as JSON: a value under
// the key "example", or each one under "examples" (a list or a map).
func countExamples(t *testing.T, spec []byte) int {
	t.Helper()
	var doc any
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "example":
					n++
				case "examples":
					switch x := x.(type) {
					case []any:
						n += len(x)
					case map[string]any:
						n += len(x)
					}
				default:
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return n
}

// TestOpenAPIExamplesCheckCatchesMismatch: the check that
// TestOpenAPIExamplesValid relies on finds an example that does not match,
// wherever it is: a request body's, an error answer's, a frame schema's,
// an SSE line; and a request body left without an example.
func TestOpenAPIExamplesCheckCatchesMismatch(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	at := func(v any, path ...string) map[string]any {
		for _, k := range path {
			v = v.(map[string]any)[k]
		}
		return v.(map[string]any)
	}
	// A turn policy that does not exist.
	at(doc, "paths", "/v1/conversations", "post", "requestBody", "content", "application/json", "examples", "support", "value")["turnPolicy"] = "chaos"
	// An error code that does not exist.
	at(doc, "components", "responses", "NotFound", "content", "application/json", "example", "error")["code"] = "gone"
	// A chunk with a field ai 5.0 refuses.
	chunk := at(doc, "components", "schemas", "UIMessageChunk")
	chunk["examples"] = append(chunk["examples"].([]any), map[string]any{"type": "text-delta", "id": "t0", "delta": "x", "providerMetadata": map[string]any{}})
	bad := fmt.Sprintf("schema UIMessageChunk example %d does not match", len(chunk["examples"].([]any))-1)
	// An AG-UI event of a type that does not exist, in the stream's example.
	ag := at(doc, "paths", "/v1/ag-ui", "post", "responses", "200", "content", "text/event-stream")
	ag["example"] = ag["example"].(string) + "data: {\"type\":\"RUN_PAUSED\"}\n\n"
	// A request body without its example.
	delete(at(doc, "paths", "/v1/tokens", "post", "requestBody", "content", "application/json"), "examples")
	spec, _ := json.Marshal(doc)

	r := checkExamples(t, spec)
	for _, want := range []string{
		"POST /v1/conversations request application/json example support does not match",
		"the answer NotFound application/json example  does not match",
		bad,
		"POST /v1/ag-ui 200 text/event-stream example  line 16 does not match",
		"POST /v1/tokens: the JSON request body has no example",
	} {
		if !slices.ContainsFunc(r.faults, func(f string) bool { return strings.HasPrefix(f, want) }) {
			t.Errorf("the check did not find %q; it found:\n%s", want, strings.Join(r.faults, "\n"))
		}
	}
	if len(r.faults) != 5 {
		t.Errorf("the check found %d faults, want the 5 made:\n%s", len(r.faults), strings.Join(r.faults, "\n"))
	}
}
