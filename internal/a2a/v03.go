package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// A2A 0.3 spelled its objects differently: each has a "kind", states and
// roles are lowercase words, a file is a part of its own, a stream's event
// is the object itself, and a status update says whether it is the last
// ("final"). The functions here translate 1.0's objects to 0.3's JSON and
// back; the rest of Parley sees only 1.0.

// legacyStates maps each 1.0 state to its 0.3 word.
var legacyStates = map[TaskState]string{
	StateUnspecified:   "unknown",
	StateSubmitted:     "submitted",
	StateWorking:       "working",
	StateCompleted:     "completed",
	StateFailed:        "failed",
	StateCanceled:      "canceled",
	StateInputRequired: "input-required",
	StateRejected:      "rejected",
	StateAuthRequired:  "auth-required",
}

// LegacyState returns s as 0.3 spells it.
func LegacyState(s TaskState) string {
	if w, ok := legacyStates[s]; ok {
		return w
	}
	return "unknown"
}

// StateFromLegacy returns the 1.0 state 0.3's word w names.
func StateFromLegacy(w string) TaskState {
	for s, lw := range legacyStates {
		if lw == w {
			return s
		}
	}
	return StateUnspecified
}

// legacyFile is 0.3's file: bytes (base64) or a URI.
type legacyFile struct {
	Bytes    string `json:"bytes,omitempty"`
	URI      string `json:"uri,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	Name     string `json:"name,omitempty"`
}

// legacyPart is 0.3's part.
type legacyPart struct {
	Kind     string          `json:"kind"`
	Text     *string         `json:"text,omitempty"`
	File     *legacyFile     `json:"file,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// legacyDataFlag marks a 0.3 data part that wraps a value 0.3 could not
// hold (it took only objects) as {"value": v}, as the official SDKs do.
const legacyDataFlag = "data_part_compat"

func toLegacyPart(p Part) legacyPart {
	switch {
	case p.Text != nil:
		return legacyPart{Kind: "text", Text: p.Text, Metadata: p.Metadata}
	case p.Raw != nil || p.URL != "":
		f := &legacyFile{URI: p.URL, MimeType: p.MediaType, Name: p.Filename}
		if p.Raw != nil {
			f.Bytes = base64.StdEncoding.EncodeToString(p.Raw)
		}
		return legacyPart{Kind: "file", File: f, Metadata: p.Metadata}
	default:
		d := bytes.TrimSpace(p.Data)
		if len(d) > 0 && d[0] == '{' {
			return legacyPart{Kind: "data", Data: p.Data, Metadata: p.Metadata}
		}
		if len(d) == 0 {
			d = []byte("null")
		}
		md := map[string]any{legacyDataFlag: true}
		for k, v := range p.Metadata {
			md[k] = v
		}
		wrapped, _ := json.Marshal(map[string]json.RawMessage{"value": d})
		return legacyPart{Kind: "data", Data: wrapped, Metadata: md}
	}
}

func fromLegacyPart(lp legacyPart) (Part, error) {
	switch lp.Kind {
	case "text":
		if lp.Text == nil {
			return Part{}, fmt.Errorf("a text part has no text")
		}
		return Part{Text: lp.Text, Metadata: lp.Metadata}, nil
	case "file":
		if lp.File == nil {
			return Part{}, fmt.Errorf("a file part has no file")
		}
		p := Part{URL: lp.File.URI, MediaType: lp.File.MimeType, Filename: lp.File.Name, Metadata: lp.Metadata}
		if lp.File.Bytes != "" {
			raw, err := base64.StdEncoding.DecodeString(lp.File.Bytes)
			if err != nil {
				return Part{}, fmt.Errorf("a file part's bytes are not base64")
			}
			p.Raw = raw
		}
		if p.Raw == nil && p.URL == "" {
			return Part{}, fmt.Errorf("a file part has neither bytes nor uri")
		}
		return p, nil
	case "data":
		p := Part{Data: lp.Data, Metadata: lp.Metadata}
		if flag, _ := lp.Metadata[legacyDataFlag].(bool); flag {
			var w struct {
				Value json.RawMessage `json:"value"`
			}
			if json.Unmarshal(lp.Data, &w) == nil && w.Value != nil {
				p.Data = w.Value
			}
			md := make(map[string]any, len(lp.Metadata))
			for k, v := range lp.Metadata {
				if k != legacyDataFlag {
					md[k] = v
				}
			}
			p.Metadata = md
			if len(md) == 0 {
				p.Metadata = nil
			}
		}
		if p.Data == nil {
			return Part{}, fmt.Errorf("a data part has no data")
		}
		return p, nil
	}
	return Part{}, fmt.Errorf("a part's kind %q is not text, file or data", lp.Kind)
}

// legacyMessage is 0.3's message.
type legacyMessage struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []legacyPart   `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

func toLegacyMessage(m *Message) *legacyMessage {
	if m == nil {
		return nil
	}
	lm := &legacyMessage{Kind: "message", MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID,
		Role: "agent", Parts: make([]legacyPart, 0, len(m.Parts)), Metadata: m.Metadata,
		Extensions: m.Extensions, ReferenceTaskIDs: m.ReferenceTaskIDs}
	if m.Role == RoleUser {
		lm.Role = "user"
	}
	for _, p := range m.Parts {
		lm.Parts = append(lm.Parts, toLegacyPart(p))
	}
	return lm
}

func fromLegacyMessage(lm *legacyMessage) (*Message, error) {
	if lm == nil {
		return nil, nil
	}
	m := &Message{MessageID: lm.MessageID, ContextID: lm.ContextID, TaskID: lm.TaskID, Metadata: lm.Metadata,
		Extensions: lm.Extensions, ReferenceTaskIDs: lm.ReferenceTaskIDs}
	switch lm.Role {
	case "user":
		m.Role = RoleUser
	case "agent":
		m.Role = RoleAgent
	default:
		return nil, fmt.Errorf("a message's role %q is not user or agent", lm.Role)
	}
	for i, lp := range lm.Parts {
		p, err := fromLegacyPart(lp)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		m.Parts = append(m.Parts, p)
	}
	return m, nil
}

type legacyStatus struct {
	State     string         `json:"state"`
	Message   *legacyMessage `json:"message,omitempty"`
	Timestamp string         `json:"timestamp,omitempty"`
}

func toLegacyStatus(s TaskStatus) legacyStatus {
	return legacyStatus{State: LegacyState(s.State), Message: toLegacyMessage(s.Message), Timestamp: s.Timestamp}
}

func fromLegacyStatus(ls legacyStatus) (TaskStatus, error) {
	m, err := fromLegacyMessage(ls.Message)
	return TaskStatus{State: StateFromLegacy(ls.State), Message: m, Timestamp: ls.Timestamp}, err
}

type legacyArtifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []legacyPart   `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

func toLegacyArtifact(a Artifact) legacyArtifact {
	la := legacyArtifact{ArtifactID: a.ArtifactID, Name: a.Name, Description: a.Description,
		Parts: make([]legacyPart, 0, len(a.Parts)), Metadata: a.Metadata, Extensions: a.Extensions}
	for _, p := range a.Parts {
		la.Parts = append(la.Parts, toLegacyPart(p))
	}
	return la
}

func fromLegacyArtifact(la legacyArtifact) (Artifact, error) {
	a := Artifact{ArtifactID: la.ArtifactID, Name: la.Name, Description: la.Description, Metadata: la.Metadata, Extensions: la.Extensions}
	for i, lp := range la.Parts {
		p, err := fromLegacyPart(lp)
		if err != nil {
			return a, fmt.Errorf("artifact part %d: %w", i, err)
		}
		a.Parts = append(a.Parts, p)
	}
	return a, nil
}

type legacyTask struct {
	Kind      string           `json:"kind"`
	ID        string           `json:"id"`
	ContextID string           `json:"contextId"`
	Status    legacyStatus     `json:"status"`
	Artifacts []legacyArtifact `json:"artifacts,omitempty"`
	History   []*legacyMessage `json:"history,omitempty"`
	Metadata  map[string]any   `json:"metadata,omitempty"`
}

func toLegacyTask(t *Task) *legacyTask {
	lt := &legacyTask{Kind: "task", ID: t.ID, ContextID: t.ContextID, Status: toLegacyStatus(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		lt.Artifacts = append(lt.Artifacts, toLegacyArtifact(a))
	}
	for i := range t.History {
		lt.History = append(lt.History, toLegacyMessage(&t.History[i]))
	}
	return lt
}

func fromLegacyTask(lt *legacyTask) (*Task, error) {
	st, err := fromLegacyStatus(lt.Status)
	if err != nil {
		return nil, err
	}
	t := &Task{ID: lt.ID, ContextID: lt.ContextID, Status: st, Metadata: lt.Metadata}
	for _, la := range lt.Artifacts {
		a, err := fromLegacyArtifact(la)
		if err != nil {
			return nil, err
		}
		t.Artifacts = append(t.Artifacts, a)
	}
	for _, lm := range lt.History {
		m, err := fromLegacyMessage(lm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			t.History = append(t.History, *m)
		}
	}
	return t, nil
}

type legacyStatusUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    legacyStatus   `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type legacyArtifactUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  legacyArtifact `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// LegacyJSON encodes a 1.0 object (*Task, *Message, *StreamResponse,
// *SendMessageResponse) as 0.3's JSON. A stream event or a send's result
// is its one object, as 0.3 sent it; a status update is final when its
// state is terminal or interrupted.
func LegacyJSON(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case *Task:
		return json.Marshal(toLegacyTask(v))
	case *Message:
		return json.Marshal(toLegacyMessage(v))
	case *SendMessageResponse:
		if v.Task != nil {
			return LegacyJSON(v.Task)
		}
		return LegacyJSON(v.Message)
	case *StreamResponse:
		switch {
		case v.Task != nil:
			return LegacyJSON(v.Task)
		case v.Message != nil:
			return LegacyJSON(v.Message)
		case v.StatusUpdate != nil:
			u := v.StatusUpdate
			return json.Marshal(legacyStatusUpdate{Kind: "status-update", TaskID: u.TaskID, ContextID: u.ContextID,
				Status: toLegacyStatus(u.Status), Final: u.Status.State.Terminal() || u.Status.State.Interrupted(), Metadata: u.Metadata})
		case v.ArtifactUpdate != nil:
			u := v.ArtifactUpdate
			return json.Marshal(legacyArtifactUpdate{Kind: "artifact-update", TaskID: u.TaskID, ContextID: u.ContextID,
				Artifact: toLegacyArtifact(u.Artifact), Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata})
		}
		return nil, fmt.Errorf("a2a: an empty stream event")
	}
	return nil, fmt.Errorf("a2a: no 0.3 form for %T", v)
}

// legacySendParams is 0.3's MessageSendParams.
type legacySendParams struct {
	Message       *legacyMessage `json:"message"`
	Configuration *struct {
		AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
		HistoryLength       *int     `json:"historyLength,omitempty"`
		Blocking            *bool    `json:"blocking,omitempty"`
	} `json:"configuration,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SendParamsFromLegacy reads 0.3's message/send (or message/stream) params
// as 1.0's SendMessageRequest. 0.3's blocking: false is 1.0's
// returnImmediately.
func SendParamsFromLegacy(params json.RawMessage) (*SendMessageRequest, error) {
	var lp legacySendParams
	if err := json.Unmarshal(params, &lp); err != nil {
		return nil, err
	}
	m, err := fromLegacyMessage(lp.Message)
	if err != nil {
		return nil, err
	}
	req := &SendMessageRequest{Message: m, Metadata: lp.Metadata}
	if c := lp.Configuration; c != nil {
		req.Configuration = &SendMessageConfiguration{AcceptedOutputModes: c.AcceptedOutputModes,
			HistoryLength: c.HistoryLength, ReturnImmediately: c.Blocking != nil && !*c.Blocking}
	}
	return req, nil
}

// LegacySendParams encodes a SendMessageRequest as 0.3's params.
func LegacySendParams(req *SendMessageRequest) (json.RawMessage, error) {
	lp := legacySendParams{Message: toLegacyMessage(req.Message), Metadata: req.Metadata}
	if c := req.Configuration; c != nil {
		blocking := !c.ReturnImmediately
		lp.Configuration = &struct {
			AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
			HistoryLength       *int     `json:"historyLength,omitempty"`
			Blocking            *bool    `json:"blocking,omitempty"`
		}{c.AcceptedOutputModes, c.HistoryLength, &blocking}
	}
	return json.Marshal(lp)
}

// FromLegacyResult reads a 0.3 result (a send's result or a stream's
// event, told apart by its kind) as a 1.0 StreamResponse.
func FromLegacyResult(raw json.RawMessage) (*StreamResponse, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	switch k.Kind {
	case "task":
		var lt legacyTask
		if err := json.Unmarshal(raw, &lt); err != nil {
			return nil, err
		}
		t, err := fromLegacyTask(&lt)
		return &StreamResponse{Task: t}, err
	case "message":
		var lm legacyMessage
		if err := json.Unmarshal(raw, &lm); err != nil {
			return nil, err
		}
		m, err := fromLegacyMessage(&lm)
		return &StreamResponse{Message: m}, err
	case "status-update":
		var lu legacyStatusUpdate
		if err := json.Unmarshal(raw, &lu); err != nil {
			return nil, err
		}
		st, err := fromLegacyStatus(lu.Status)
		return &StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: lu.TaskID, ContextID: lu.ContextID, Status: st, Metadata: lu.Metadata}}, err
	case "artifact-update":
		var lu legacyArtifactUpdate
		if err := json.Unmarshal(raw, &lu); err != nil {
			return nil, err
		}
		a, err := fromLegacyArtifact(lu.Artifact)
		return &StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: lu.TaskID, ContextID: lu.ContextID,
			Artifact: a, Append: lu.Append, LastChunk: lu.LastChunk, Metadata: lu.Metadata}}, err
	}
	return nil, fmt.Errorf("a2a: a 0.3 result of kind %q", k.Kind)
}

// legacyCard is 0.3's agent card: one url with its transport first, the
// others in additionalInterfaces.
type legacyCard struct {
	ProtocolVersion      string                    `json:"protocolVersion"`
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	URL                  string                    `json:"url"`
	PreferredTransport   string                    `json:"preferredTransport"`
	Version              string                    `json:"version"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]map[string]any `json:"securitySchemes,omitempty"`
	Security             []map[string][]string     `json:"security,omitempty"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
	DocumentationURL     string                    `json:"documentationUrl,omitempty"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces,omitempty"`
}

// CardFromJSON reads an agent card of either version: a card with
// supportedInterfaces is 1.0's; one with a url (and no interfaces) is
// 0.3's, whose interface is taken to speak 0.3.
func CardFromJSON(raw []byte) (*AgentCard, error) {
	var probe struct {
		SupportedInterfaces []AgentInterface `json:"supportedInterfaces"`
		URL                 string           `json:"url"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err
	}
	if len(probe.SupportedInterfaces) > 0 || probe.URL == "" {
		var c AgentCard
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		return &c, nil
	}
	var lc legacyCard
	if err := json.Unmarshal(raw, &lc); err != nil {
		return nil, err
	}
	ver := lc.ProtocolVersion
	if ver == "" {
		ver = LegacyProtocolVersion
	}
	binding := lc.PreferredTransport
	if binding == "" {
		binding = "JSONRPC"
	}
	c := &AgentCard{Name: lc.Name, Description: lc.Description, Version: lc.Version, Capabilities: lc.Capabilities,
		DefaultInputModes: lc.DefaultInputModes, DefaultOutputModes: lc.DefaultOutputModes, Skills: lc.Skills,
		DocumentationURL:    lc.DocumentationURL,
		SupportedInterfaces: []AgentInterface{{URL: lc.URL, ProtocolBinding: binding, ProtocolVersion: ver}}}
	for _, ai := range lc.AdditionalInterfaces {
		c.SupportedInterfaces = append(c.SupportedInterfaces, AgentInterface{URL: ai.URL, ProtocolBinding: ai.Transport, ProtocolVersion: ver})
	}
	return c, nil
}
