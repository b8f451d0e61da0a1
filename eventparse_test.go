package parley_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley"
)

// TestParseEvent reads events as AppendJSON writes them, and others as
// encoding/json does, to the same Event.
func TestParseEvent(t *testing.T) {
	ts := parley.NewTime(time.Date(2026, 11, 25, 10, 0, 0, 123e6, time.UTC))
	for _, e := range []parley.Event{
		{ConversationID: "c1", Seq: 42, Type: parley.EventChunk, Turn: 3, TurnID: "m1", AgentID: "bot", Finality: parley.FinalityNone, Time: ts, Data: json.RawMessage(`{"messageId":"m1","content":"Hello"}`)},
		{ConversationID: "c1", Seq: 1, Type: parley.EventMessage, Finality: parley.FinalityTurn, Data: json.RawMessage(`{"a":[1,2,{"b":"\u003c"}]}`)},
		{ConversationID: "c\"1", Seq: 7, Type: "x", Turn: -1, Time: ts},
		{ConversationID: "c1", Seq: 9, Type: "x", AgentID: "é", Time: ts, Data: json.RawMessage(`null`)},
	} {
		b := e.AppendJSON(nil)
		got, err := parley.ParseEvent(b)
		var want parley.Event
		werr := json.Unmarshal(b, &want)
		if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseEvent(%s) = %+v, %v; encoding/json %+v, %v", b, got, err, want, werr)
		}
	}
	for _, in := range []string{
		`{"seq":1,"conversationId":"c","type":"x","turn":0,"finality":"none","ts":null,"data":{}}`,
		`{"conversationId":"c","seq":1,"type":"x","turn":0,"finality":"none","ts":"2026-11-25T10:00:00.5+02:00","data":{} }`,
		`{"conversationId":"c","seq":01,"type":"x","turn":0,"finality":"none","ts":null,"data":{}}`,
		`{"conversationId":"c","seq":1,"type":"x","turn":0,"finality":"none","ts":null,"data":{]}`,
	} {
		got, err := parley.ParseEvent([]byte(in))
		var want parley.Event
		werr := json.Unmarshal([]byte(in), &want)
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseEvent(%s) = %+v, %v; encoding/json %+v, %v", in, got, err, want, werr)
		}
	}
}

// FuzzParseEvent: whatever ParseEvent reads, encoding/json reads the same.
func FuzzParseEvent(f *testing.F) {
	ts := parley.NewTime(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	f.Add(string((&parley.Event{ConversationID: "c", Seq: 3, Type: "chunk", Turn: 1, TurnID: "m", Finality: "none", Time: ts, Data: json.RawMessage(`{"x":"y"}`)}).AppendJSON(nil)))
	f.Add(`{"conversationId":"c","seq":1,"type":"x","turn":0,"finality":"none","ts":null,"data":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parley.ParseEvent([]byte(in))
		if err != nil {
			return
		}
		var want parley.Event
		if werr := json.Unmarshal([]byte(in), &want); werr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseEvent(%q) = %+v; encoding/json %+v, %v", in, got, want, werr)
		}
	})
}
