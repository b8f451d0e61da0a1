// Package a2a holds the wire of the Agent2Agent protocol (A2A) as Parley
// speaks it, both ways: the JSON of A2A 1.0's objects (Task, Message, Part,
// the stream's updates, the Agent Card), the JSON-RPC 2.0 envelope and its
// error codes, and the translation to and from A2A 0.3's JSON, which older
// clients (and a2a-go 0.3) still speak. It decides nothing about Parley:
// the server side (package protocols) and the bridge (package client) map
// conversations, prompts and messages onto it.
//
// The JSON follows A2A 1.0's proto JSON mapping: camelCase names, enums as
// their names ("TASK_STATE_WORKING", "ROLE_USER"), a Part as one of text,
// raw, url or data, a stream event as one of task, message, statusUpdate or
// artifactUpdate.
package a2a

import "encoding/json"

// ProtocolVersion is the A2A version whose JSON this package's types are.
const ProtocolVersion = "1.0"

// LegacyProtocolVersion is the older version this package translates.
const LegacyProtocolVersion = "0.3"

// VersionHeader is the HTTP header in which an A2A 1.0 client names the
// version it speaks.
const VersionHeader = "A2A-Version"

// CardPath is where an agent's card is served, below the agent's URL.
const CardPath = ".well-known/agent-card.json"

// TaskState is where a task stands.
type TaskState string

// The states of a task. Completed, failed, canceled and rejected are
// terminal; input and auth required are interrupted: the task waits.
const (
	StateUnspecified   TaskState = "TASK_STATE_UNSPECIFIED"
	StateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      TaskState = "TASK_STATE_REJECTED"
	StateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// Terminal reports whether a task in state s is over.
func (s TaskState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCanceled, StateRejected:
		return true
	}
	return false
}

// Interrupted reports whether a task in state s waits for its client.
func (s TaskState) Interrupted() bool {
	return s == StateInputRequired || s == StateAuthRequired
}

// Role says who sent a message.
type Role string

// The roles.
const (
	RoleUser  Role = "ROLE_USER"  // the client
	RoleAgent Role = "ROLE_AGENT" // the agent
)

// Part is one piece of a message or an artifact: exactly one of Text, Raw,
// URL or Data.
type Part struct {
	Text *string `json:"text,omitempty"`
	// Raw is a file's bytes (base64 in JSON).
	Raw []byte `json:"raw,omitempty"`
	// URL points at a file's content.
	URL string `json:"url,omitempty"`
	// Data is any JSON value.
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart returns a part holding text.
func TextPart(text string) Part { return Part{Text: &text} }

// DataPart returns a part holding the JSON value v (already encoded).
func DataPart(v json.RawMessage) Part { return Part{Data: v} }

// Message is one unit of communication between a client and an agent.
type Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             Role           `json:"role"`
	Parts            []Part         `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// TaskStatus is a task's state, with the message that goes with it.
type TaskStatus struct {
	State   TaskState `json:"state"`
	Message *Message  `json:"message,omitempty"`
	// Timestamp is when the status was recorded, RFC 3339.
	Timestamp string `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// Task is the unit of work a message starts.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent tells a change of a task's status.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent carries an artifact or, with Append, more of one
// sent before under the same id.
type TaskArtifactUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// StreamResponse is one event of a stream: exactly one field is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageResponse is SendMessage's result: a task or, for an answer
// that needs none, a message.
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// SendMessageConfiguration configures a SendMessage.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	// HistoryLength bounds the messages of the task's history in the
	// answer (unset: no bound; 0: none).
	HistoryLength *int `json:"historyLength,omitempty"`
	// ReturnImmediately answers as soon as the task is made, instead of
	// when it ends or waits for input.
	ReturnImmediately bool `json:"returnImmediately,omitempty"`
	// TaskPushNotificationConfig asks for webhooks (not supported here).
	TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any            `json:"metadata,omitempty"`
}

// GetTaskRequest is GetTask's params.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// CancelTaskRequest is CancelTask's params.
type CancelTaskRequest struct {
	Tenant   string         `json:"tenant,omitempty"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SubscribeToTaskRequest is SubscribeToTask's params.
type SubscribeToTaskRequest struct {
	Tenant string `json:"tenant,omitempty"`
	ID     string `json:"id"`
}
