package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// describe is err as parley prints it, in one line: a server's refusal by
// its message, with its status and code; a Parley error by its message;
// any other error as it says. What wraps the error ("backup: …") stays.
func describe(err error) string {
	text := err.Error()
	var se *client.StatusError
	if errors.As(err, &se) && se.Status != 0 && se.Err != nil {
		return strings.Replace(text, se.Error(), fmt.Sprintf("%s (HTTP %d %s)", se.Err.Message, se.Status, se.Err.Code), 1)
	}
	var pe *parley.Error
	if errors.As(err, &pe) && pe.Message != "" {
		return strings.Replace(text, pe.Error(), pe.Message, 1)
	}
	return text
}

// responseError is the error of an answer the server refused, for a
// request parley makes itself rather than through the SDK: a
// *client.StatusError with the server's error, as the SDK returns one, or
// the status and the start of the answer's text when it holds no Parley
// error.
func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Code != "" {
		return &client.StatusError{Status: resp.StatusCode, Err: &parley.Error{Code: body.Error.Code, Message: body.Error.Message}}
	}
	if text := oneLine(string(data), 200); text != "" {
		return fmt.Errorf("the server answered %s: %s", resp.Status, text)
	}
	return fmt.Errorf("the server answered %s", resp.Status)
}
