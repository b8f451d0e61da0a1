package conv

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/parleyhq/parley"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schemas of input requests' answers, compiled with
// santhosh-tekuri/jsonschema. A schema is whatever an agent sent, so it is
// bounded in bytes (MaxInputSchemaBytes) and may refer to nothing outside
// itself: the compiler's loader refuses every URL (no file, no network).

// schemaURL is the location a request's schema is compiled at.
const schemaURL = "parley:input-request-schema.json"

// noLoader refuses to load any schema a $ref names outside the request's.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may not refer to %s: only to itself", url)
}

// compileSchema compiles an input request's schema, or says why it cannot.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := unmarshalJSON(raw)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "schema is not a JSON Schema: %s", schemaError(err))
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "schema is not a JSON Schema: %s", schemaError(err))
	}
	return sch, nil
}

// unmarshalJSON decodes JSON as the validator wants it (numbers kept exact).
func unmarshalJSON(raw []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// schemaError shortens a validator's error to its first lines, bounded.
func schemaError(err error) string {
	msg := err.Error()
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		msg = fmt.Sprintf("%v", ve)
	}
	if len(msg) > 600 {
		msg = msg[:600] + "…"
	}
	return msg
}
