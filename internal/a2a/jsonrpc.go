package a2a

import (
	"encoding/json"
	"fmt"
)

// The JSON-RPC methods of A2A 1.0.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
)

// The JSON-RPC methods of A2A 0.3, each the same call as one of 1.0's.
const (
	LegacyMethodSend        = "message/send"
	LegacyMethodStream      = "message/stream"
	LegacyMethodGet         = "tasks/get"
	LegacyMethodCancel      = "tasks/cancel"
	LegacyMethodResubscribe = "tasks/resubscribe"
)

// LegacyMethods maps each 0.3 method to its 1.0 name.
var LegacyMethods = map[string]string{
	LegacyMethodSend:        MethodSendMessage,
	LegacyMethodStream:      MethodSendStreamingMessage,
	LegacyMethodGet:         MethodGetTask,
	LegacyMethodCancel:      MethodCancelTask,
	LegacyMethodResubscribe: MethodSubscribeToTask,
}

// JSON-RPC and A2A error codes.
const (
	CodeParseError            = -32700
	CodeInvalidRequest        = -32600
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeInternalError         = -32603
	CodeTaskNotFound          = -32001
	CodeTaskNotCancelable     = -32002
	CodePushNotSupported      = -32003
	CodeUnsupportedOperation  = -32004
	CodeContentTypeNotSupport = -32005
	CodeInvalidAgentResponse  = -32006
	CodeVersionNotSupported   = -32009
)

// Request is a JSON-RPC 2.0 request.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response: Result or Error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error. Data, when set, is Parley's error body
// ({code, message} with Parley's own code), so a client can tell why.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("a2a: %s (%d)", e.Message, e.Code) }

// Errorf returns an Error with code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NullID is the id of a response to a request whose id could not be read.
var NullID = json.RawMessage("null")
