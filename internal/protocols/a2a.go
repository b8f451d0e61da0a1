package protocols

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
)

// The Agent2Agent protocol (A2A): every Parley agent id is an A2A agent,
// served at POST /v1/a2a/{agentId} (JSON-RPC 2.0) with its card at GET
// /v1/a2a/{agentId}/.well-known/agent-card.json. A message sent to it is a
// prompt to that agent in a conversation: the A2A context is the
// conversation (a message with no contextId makes one), the task is the
// prompt (its id is "<contextId>~<promptId>", since GetTask names only the
// task and a prompt id is unique within its conversation), and the task's
// status and artifacts are the prompt's answer as the log holds it
// (answer.go), encoded as A2A's stream events (a2a_task.go). Both A2A 1.0's
// methods (SendMessage, …) and 0.3's (message/send, …) are served on the
// same URL, told apart by their names: a 0.3 method is answered in 0.3's
// JSON (a2a.LegacyJSON).

// A2ACard is what the configuration says of an agent's card: its name,
// description and skills (the rest of the card is the server's).
type A2ACard struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Skills      []a2a.AgentSkill `json:"skills"`
}

// maxA2ABodyBytes bounds an A2A request's body: one message, whose text is
// bounded as every prompt's is.
const maxA2ABodyBytes = 4 << 20

// a2aCall is one JSON-RPC call being served.
type a2aCall struct {
	id     json.RawMessage
	method string // its 1.0 name
	legacy bool   // a 0.3 method: answered in 0.3's JSON
	params json.RawMessage
	agent  string // the A2A agent: the path's agentId
	who    parley.Identity
}

// a2aPushMethods are the push-notification methods of both versions: not
// served (PushNotificationNotSupported).
var a2aPushMethods = map[string]bool{
	"CreateTaskPushNotificationConfig": true, "GetTaskPushNotificationConfig": true,
	"ListTaskPushNotificationConfigs": true, "ListTaskPushNotificationConfig": true, "DeleteTaskPushNotificationConfig": true,
	"tasks/pushNotificationConfig/set": true, "tasks/pushNotificationConfig/get": true,
	"tasks/pushNotificationConfig/list": true, "tasks/pushNotificationConfig/delete": true,
}

// A2A serves POST /v1/a2a/{agentId}: one JSON-RPC 2.0 call of A2A 1.0 or
// 0.3. Errors are JSON-RPC errors with HTTP 200, their data Parley's own
// error ({code, message}); only a body over the bound (413) and what the
// API refuses before (401, 429) are HTTP errors.
func (s *Server) A2A(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	agent := r.PathValue("agentId")
	if !parley.ValidID(agent) {
		s.host.Refuse(w, r, parley.Errorf(parley.EINVALIDVALUE, "agent id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", agent))
		return
	}
	var raw json.RawMessage
	if err := s.host.DecodeBody(w, r, maxA2ABodyBytes, &raw); err != nil {
		if parley.ErrorCode(err) != parley.EINVALID {
			s.host.WriteError(w, err) // too large, or the server's budget of bodies
			return
		}
		writeRPC(w, a2a.NullID, nil, &a2a.Error{Code: a2a.CodeParseError, Message: "parse error: " + parley.ErrorMessage(err)})
		return
	}
	var req struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.JSONRPC == nil || *req.JSONRPC != "2.0" || req.Method == nil || !validRPCID(req.ID) {
		id := req.ID
		if !validRPCID(id) || len(id) == 0 {
			id = a2a.NullID
		}
		writeRPC(w, id, nil, a2a.Errorf(a2a.CodeInvalidRequest, `invalid request: a JSON-RPC 2.0 request is {"jsonrpc":"2.0","id":<string|number>,"method":<string>,"params":<object>}`))
		return
	}
	c := &a2aCall{id: req.ID, method: *req.Method, params: req.Params, agent: agent, who: who}
	if len(c.id) == 0 {
		c.id = a2a.NullID
	}
	if v := r.Header.Get(a2a.VersionHeader); v != "" && !strings.HasPrefix(v, "1.") && !strings.HasPrefix(v, "0.3") {
		writeRPC(w, c.id, nil, a2a.Errorf(a2a.CodeVersionNotSupported, "A2A version %q is not served: 1.0 and 0.3 are", v))
		return
	}
	if name, ok := a2a.LegacyMethods[c.method]; ok {
		c.method, c.legacy = name, true
	}
	switch c.method {
	case a2a.MethodSendMessage:
		s.a2aSend(w, r, c)
	case a2a.MethodSendStreamingMessage:
		s.a2aSendStream(w, r, c)
	case a2a.MethodGetTask:
		s.a2aGetTask(w, r, c)
	case a2a.MethodCancelTask:
		s.a2aCancel(w, r, c)
	case a2a.MethodSubscribeToTask:
		s.a2aSubscribe(w, r, c)
	default:
		switch {
		case a2aPushMethods[c.method]:
			writeRPC(w, c.id, nil, a2a.Errorf(a2a.CodePushNotSupported, "push notifications are not supported: follow a task with SendStreamingMessage or SubscribeToTask"))
		case c.method == "GetExtendedAgentCard" || c.method == "agent/getAuthenticatedExtendedCard":
			writeRPC(w, c.id, nil, a2a.Errorf(a2a.CodeUnsupportedOperation, "there is no extended agent card: the card at %s is the whole card", a2a.CardPath))
		default:
			writeRPC(w, c.id, nil, a2a.Errorf(a2a.CodeMethodNotFound, "method %q is not an A2A method (1.0: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask; 0.3: message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe)", c.method))
		}
	}
}

// validRPCID reports whether id is a JSON-RPC id: a string, a number or
// null (or absent).
func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// params decodes c's params into v: an object (absent is an empty one).
func (c *a2aCall) decode(v any) *a2a.Error {
	if len(c.params) == 0 || string(c.params) == "null" || c.params[0] != '{' {
		return a2a.Errorf(a2a.CodeInvalidParams, "params must be an object")
	}
	if err := json.Unmarshal(c.params, v); err != nil {
		return a2a.Errorf(a2a.CodeInvalidParams, "invalid params: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// result encodes v (a 1.0 object) as c's result: 1.0's JSON, or 0.3's for
// a 0.3 method.
func (c *a2aCall) result(v any) (json.RawMessage, error) {
	if c.legacy {
		return a2a.LegacyJSON(v)
	}
	return json.Marshal(v)
}

// reply answers c with v, or with err.
func (s *Server) reply(w http.ResponseWriter, c *a2aCall, v any, err error) {
	if err != nil {
		writeRPC(w, c.id, nil, rpcError(err))
		return
	}
	b, err := c.result(v)
	if err != nil {
		writeRPC(w, c.id, nil, rpcError(err))
		return
	}
	writeRPC(w, c.id, b, nil)
}

// rpcEnvelope is a JSON-RPC response, as written.
func rpcEnvelope(id, result json.RawMessage, e *a2a.Error) []byte {
	b, _ := json.Marshal(a2a.Response{JSONRPC: "2.0", ID: id, Result: result, Error: e})
	return b
}

// writeRPC writes a JSON-RPC response with HTTP 200.
func writeRPC(w http.ResponseWriter, id, result json.RawMessage, e *a2a.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(rpcEnvelope(id, result, e), '\n'))
}

// rpcError is err as a JSON-RPC error: an *a2a.Error as it is, a Parley
// error with the JSON-RPC code its kind maps to and Parley's own error as
// its data.
func rpcError(err error) *a2a.Error {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return ae
	}
	code := parley.ErrorCode(err)
	var pe *parley.Error
	if !errors.As(err, &pe) || code == parley.EINTERNAL {
		return &a2a.Error{Code: a2a.CodeInternalError, Message: "internal error", Data: map[string]string{"code": "internal", "message": "internal error"}}
	}
	rc := -32000 // a server error: forbidden, busy, rate limited
	switch code {
	case parley.EINVALID, parley.EINVALIDVALUE, parley.ETOOLARGE:
		rc = a2a.CodeInvalidParams
	case parley.ENOTFOUND:
		rc = a2a.CodeTaskNotFound
	}
	return &a2a.Error{Code: rc, Message: parley.ErrorMessage(err), Data: map[string]string{"code": code, "message": parley.ErrorMessage(err)}}
}

// taskNotFound is the error of a task that does not exist, is another
// agent's, or that the caller may not read: they are not told apart.
func taskNotFound(id string) *a2a.Error {
	return &a2a.Error{Code: a2a.CodeTaskNotFound, Message: "task not found: " + id,
		Data: map[string]string{"code": parley.ENOTFOUND, "message": "no task " + id + " of this agent that this token may read"}}
}
