package api

import (
	"encoding/json"
	"errors"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/engine"
)

// Both transports carry the same JSON frames: an init, then each event as
// the parley.Event itself, guidance frames between them, and an error frame
// when the server ends the stream.

type initFrame struct {
	Type string `json:"type"`
	engine.Init
}

type guidanceFrame struct {
	Type           string           `json:"type"`
	ConversationID string           `json:"conversationId"`
	AfterSeq       int64            `json:"afterSeq"`
	Turn           int              `json:"turn"`
	AgentID        string           `json:"agentId"`
	Data           *parley.Guidance `json:"data"`
}

// encodeItem returns an item's frame and its SSE event name.
func encodeItem(conversationID string, it engine.Item) (string, []byte, error) {
	if it.Event != nil {
		b, err := json.Marshal(it.Event)
		return it.Event.Type, b, err
	}
	g := it.Guidance
	b, err := json.Marshal(guidanceFrame{Type: "guidance", ConversationID: conversationID, AfterSeq: g.AfterSeq, Turn: g.Turn, AgentID: g.NextAgentID, Data: g})
	return "guidance", b, err
}

func encodeInit(in engine.Init) ([]byte, error) {
	return json.Marshal(initFrame{Type: "init", Init: in})
}

// endFrame is the error frame sent when the server ends a stream, or nil
// when the client ended it.
func endFrame(err error) []byte {
	if err == nil || errors.Is(err, errClientGone) {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": errorBody(err)["error"]})
	return b
}

var errClientGone = errors.New("client went away")
