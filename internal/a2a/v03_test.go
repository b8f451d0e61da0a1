package a2a

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Every 1.0 stream event survives the trip to 0.3's JSON and back, and
// 0.3's JSON has the kinds and words 0.3 clients read.
func TestLegacyRoundTrip(t *testing.T) {
	text := "hello"
	msg := &Message{MessageID: "m1", ContextID: "c1", TaskID: "t1", Role: RoleAgent,
		Parts: []Part{TextPart(text), DataPart(json.RawMessage(`{"a":1}`)), DataPart(json.RawMessage(`[1,2]`)),
			{URL: "https://x/y.png", MediaType: "image/png", Filename: "y.png"}, {Raw: []byte{1, 2, 3}, MediaType: "application/octet-stream"}}}
	events := []*StreamResponse{
		{Task: &Task{ID: "t1", ContextID: "c1", Status: TaskStatus{State: StateWorking, Timestamp: "2026-01-01T00:00:00Z"}, History: []Message{*msg}}},
		{Message: msg},
		{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: TaskStatus{State: StateInputRequired, Message: msg}}},
		{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Artifact: Artifact{ArtifactID: "a1", Parts: []Part{TextPart("x")}}, Append: true, LastChunk: true}},
	}
	for i, ev := range events {
		raw, err := LegacyJSON(ev)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		back, err := FromLegacyResult(raw)
		if err != nil {
			t.Fatalf("%d: %v (%s)", i, err, raw)
		}
		if !reflect.DeepEqual(back, ev) {
			a, _ := json.Marshal(ev)
			b, _ := json.Marshal(back)
			t.Errorf("%d: the trip changed it:\n%s\n%s\n(0.3: %s)", i, a, b, raw)
		}
	}
	raw, _ := LegacyJSON(events[2])
	for _, want := range []string{`"kind":"status-update"`, `"state":"input-required"`, `"final":true`, `"role":"agent"`, `"kind":"file"`, `"data_part_compat":true`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("0.3 JSON lacks %s: %s", want, raw)
		}
	}
}

// 0.3's send params read as 1.0's request; a bad part is refused.
func TestSendParamsFromLegacy(t *testing.T) {
	req, err := SendParamsFromLegacy(json.RawMessage(`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Message.Role != RoleUser || *req.Message.Parts[0].Text != "hi" || !req.Configuration.ReturnImmediately {
		t.Fatalf("read as %+v", req)
	}
	for _, bad := range []string{
		`{"message":{"messageId":"m","role":"robot","parts":[]}}`,
		`{"message":{"messageId":"m","role":"user","parts":[{"kind":"video"}]}}`,
		`{"message":{"messageId":"m","role":"user","parts":[{"kind":"file","file":{}}]}}`,
	} {
		if _, err := SendParamsFromLegacy(json.RawMessage(bad)); err == nil {
			t.Errorf("%s was taken", bad)
		}
	}
}

// A card of either version reads as 1.0's.
func TestCardFromJSON(t *testing.T) {
	c, err := CardFromJSON([]byte(`{"protocolVersion":"0.3.0","name":"n","description":"d","url":"http://h/a","version":"1","capabilities":{"streaming":true},"defaultInputModes":[],"defaultOutputModes":[],"skills":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.SupportedInterfaces) != 1 || c.SupportedInterfaces[0].URL != "http://h/a" || c.SupportedInterfaces[0].ProtocolVersion != "0.3.0" || c.SupportedInterfaces[0].ProtocolBinding != "JSONRPC" {
		t.Fatalf("0.3 card read as %+v", c.SupportedInterfaces)
	}
	c, err = CardFromJSON([]byte(`{"name":"n","supportedInterfaces":[{"url":"http://h/b","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"url":"http://h/a"}`))
	if err != nil || c.SupportedInterfaces[0].URL != "http://h/b" {
		t.Fatalf("1.0 card read as %+v, %v", c, err)
	}
}
