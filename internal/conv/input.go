package conv

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley"
)

// Input requests (see parley.InputRequest). An agent opens one in its
// streaming message (AskInput: a part.updated event whose part is an
// input-request); a person answers it (AnswerInput), or it expires
// (ExpireInputs), or it is canceled when the answer it belongs to stops
// (a stop, a steer, a revert, a turn abort, or the message's finalize):
// each writes an input.answered event. The asking runner acknowledges the
// outcome (AckInput: an input.acked event); until then it is sent the
// outcome again whenever it attaches. The state keeps each request open or
// unacknowledged (Inputs), and the last ones that ended (InputsEnded), so
// that the same answer again is answered as the first.

// Bounds of input requests.
const (
	// MaxOpenInputs bounds the requests a conversation holds open or
	// unacknowledged at once: one more is refused (busy).
	MaxOpenInputs = 64
	// MaxInputTitleBytes bounds a request's title, MaxInputDetailBytes its
	// detail, MaxInputSchemaBytes its schema and MaxInputAnswerBytes an
	// answer.
	MaxInputTitleBytes  = 1 << 10
	MaxInputDetailBytes = 16 << 10
	MaxInputSchemaBytes = 16 << 10
	MaxInputAnswerBytes = 64 << 10
	// MaxInputOptions bounds a question's options, MaxInputAnswerers the
	// members a request names as answerers.
	MaxInputOptions   = 64
	MaxInputAnswerers = 64
	// maxInputsEnded is how many ended requests the state remembers.
	maxInputsEnded = 32
)

// Reasons an input request is canceled or expires with.
const (
	ReasonFinalized = "finalized"
	ReasonExpired   = "expired"
)

// InputState is what the rules keep of an input request while it is open
// or its outcome is not yet acknowledged.
type InputState struct {
	MessageID string `json:"messageId"`
	// AgentID is the agent that asked.
	AgentID   string      `json:"agentId"`
	Kind      string      `json:"kind"`
	Title     string      `json:"title"`
	Status    string      `json:"status"`
	ExpiresAt parley.Time `json:"expiresAt,omitzero"`
	// Asker is the agent whose prompt the asking agent was answering when
	// it asked: it may answer.
	Asker     string   `json:"asker,omitempty"`
	Answerers []string `json:"answerers,omitempty"`
	// Opened is the seq of the event that opened it; Seq is that seq while
	// it is pending, then the seq of the event that ended it.
	Opened int64 `json:"opened"`
	Seq    int64 `json:"seq"`
	// AnswerHash is the hash of the answer (its compact JSON).
	AnswerHash string `json:"answerHash,omitempty"`
	AnsweredBy string `json:"answeredBy,omitempty"`
}

// EndedInput is an input request the state remembers after it left
// Inputs: its outcome acknowledged, or its message ended.
type EndedInput struct {
	RequestID  string `json:"requestId"`
	MessageID  string `json:"messageId"`
	Status     string `json:"status"`
	Seq        int64  `json:"seq"`
	AnswerHash string `json:"answerHash,omitempty"`
}

// Pending returns the input requests still pending, oldest first.
func (s State) Pending() []parley.PendingInput {
	var out []parley.PendingInput
	for _, id := range s.InputIDs() {
		in := s.Inputs[id]
		if in.Status == parley.InputStatusPending {
			out = append(out, parley.PendingInput{RequestID: id, MessageID: in.MessageID, AgentID: in.AgentID, Kind: in.Kind,
				Title: in.Title, ExpiresAt: in.ExpiresAt})
		}
	}
	return out
}

// Unacked returns the ids of the requests of agent whose outcome its
// runner has not acknowledged, oldest first, and those still pending.
func (s State) Unacked(agent string) (ended, pending []string) {
	for _, id := range s.InputIDs() {
		in := s.Inputs[id]
		switch {
		case in.AgentID != agent:
		case in.Status == parley.InputStatusPending:
			pending = append(pending, id)
		default:
			ended = append(ended, id)
		}
	}
	return ended, pending
}

// InputIDs returns the ids of the requests open or not yet acknowledged
// (Inputs), in the order they were opened.
func (s State) InputIDs() []string {
	ids := slices.Collect(maps.Keys(s.Inputs))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(s.Inputs[a].Opened, s.Inputs[b].Opened) })
	return ids
}

// NextInputExpiry is when the first pending request with an expiry
// expires; zero if none has one.
func (s State) NextInputExpiry() time.Time {
	var next time.Time
	for _, in := range s.Inputs {
		if in.Status == parley.InputStatusPending && !in.ExpiresAt.IsZero() && (next.IsZero() || in.ExpiresAt.Before(next)) {
			next = in.ExpiresAt.Time
		}
	}
	return next
}

// InputOf returns what the state knows of a request: open or
// unacknowledged, or among the last that ended.
func (s State) InputOf(id string) (in InputState, ended *EndedInput, ok bool) {
	if in, ok := s.Inputs[id]; ok {
		return in, nil, true
	}
	for i := range s.InputsEnded {
		if e := s.InputsEnded[i]; e.RequestID == id {
			return InputState{MessageID: e.MessageID, Status: e.Status, Seq: e.Seq, AnswerHash: e.AnswerHash}, &e, true
		}
	}
	return InputState{}, nil, false
}

// AskInput opens an input request in the actor's streaming message.
type AskInput struct {
	Actor
	MessageID string
	Request   parley.InputRequest
	// IDTaken: the request id already names a request of the conversation
	// (the store's names).
	IDTaken bool
	Known   StreamLookups
}

// AnswerInput answers a pending input request. Answer is the answer's JSON.
type AnswerInput struct {
	Actor
	RequestID string
	Answer    json.RawMessage
	// Known is the request's message, assembled (nil once it ended).
	Known StreamLookups
}

// AckInput records that the asking runner has the outcome of a request.
type AckInput struct {
	Actor
	RequestID string
}

// ExpireInputs ends the pending requests whose expiry has passed.
type ExpireInputs struct{}

// WithdrawInput takes back a pending request its asker no longer needs
// answered (it was answered some other way): it ends canceled, with
// Reason (ReasonWithdrawn, as for a prompt its asker takes back, if empty). A request that has ended already
// is left as it is.
type WithdrawInput struct {
	Actor
	RequestID string
	Reason    string
}

func (c AskInput) decide(d *decider) error      { return d.askInput(c) }
func (c AnswerInput) decide(d *decider) error   { return d.answerInput(c) }
func (c AckInput) decide(d *decider) error      { return d.ackInput(c) }
func (c ExpireInputs) decide(d *decider) error  { d.expireInputs(); return nil }
func (c WithdrawInput) decide(d *decider) error { return d.withdrawInput(c) }

// authorize: only the agent that asked takes a request back.
func (c WithdrawInput) authorize(s State) error {
	if in, _, ok := s.InputOf(c.RequestID); ok && in.AgentID != "" && in.AgentID != c.AgentID {
		return parley.Errorf(parley.EFORBIDDEN, "input request %s was asked by %s, not %s", c.RequestID, in.AgentID, c.AgentID)
	}
	return s.take(c.Actor, false)
}

// Asking is the writer's own streaming message: the decision checks it.
func (c AskInput) authorize(s State) error { return s.take(c.Actor, false) }

// authorize: the asker of the prompt being answered when the request was
// made, the conversation's owner, an admin, or a member the request names;
// never the agent that asked. An unknown request is left to decide (404).
func (c AnswerInput) authorize(s State) error {
	in, _, ok := s.InputOf(c.RequestID)
	if !ok || in.AgentID == "" {
		return nil
	}
	if c.AgentID == in.AgentID {
		return parley.Errorf(parley.EFORBIDDEN, "agent %s asked input request %s and cannot answer it itself", c.AgentID, c.RequestID)
	}
	if c.Admin || c.AgentID != "" && (c.AgentID == Owner(s.Conversation) || c.AgentID == in.Asker ||
		slices.Contains(in.Answerers, c.AgentID) && s.IsMember(c.AgentID)) {
		return nil
	}
	return parley.Errorf(parley.EFORBIDDEN, "%s may not answer input request %s: the asker of the prompt being answered (%s), the conversation's owner, an admin or the members the request names may",
		orNobody(c.AgentID), c.RequestID, orNobody(in.Asker))
}

// authorize: only the agent that asked acknowledges.
func (c AckInput) authorize(s State) error {
	if in, ok := s.Inputs[c.RequestID]; ok && in.AgentID != c.AgentID {
		return parley.Errorf(parley.EFORBIDDEN, "input request %s was asked by %s, not %s", c.RequestID, in.AgentID, c.AgentID)
	}
	return s.take(c.Actor, false)
}

func (ExpireInputs) authorize(State) error { return nil }

func orNobody(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}

// CheckInputRequest checks what an agent asks, at now.
func CheckInputRequest(r parley.InputRequest, now time.Time) error {
	switch {
	case !parley.ValidID(r.RequestID):
		return parley.Errorf(parley.EINVALIDVALUE, "requestId %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", r.RequestID)
	case r.Kind != parley.InputApproval && r.Kind != parley.InputQuestion:
		return parley.Errorf(parley.EINVALIDVALUE, "kind %q is not one of approval, question", r.Kind)
	case strings.TrimSpace(r.Title) == "" || len(r.Title) > MaxInputTitleBytes:
		return parley.Errorf(parley.EINVALIDVALUE, "an input request needs a title of 1-%d bytes", MaxInputTitleBytes)
	case len(r.Detail) > MaxInputDetailBytes:
		return parley.Errorf(parley.ETOOLARGE, "detail is %d bytes; the limit is %d", len(r.Detail), MaxInputDetailBytes)
	case len(r.ToolCallID) > parley.MaxIDLen || len(r.ToolName) > parley.MaxIDLen:
		return parley.Errorf(parley.EINVALIDVALUE, "toolCallId and toolName are at most %d bytes", parley.MaxIDLen)
	case len(r.Args) > 0 && !json.Valid(r.Args):
		return parley.Errorf(parley.EINVALID, "args is not valid JSON")
	case len(r.Schema) > MaxInputSchemaBytes:
		return parley.Errorf(parley.ETOOLARGE, "schema is %d bytes; the limit is %d", len(r.Schema), MaxInputSchemaBytes)
	case len(r.Options) > MaxInputOptions:
		return parley.Errorf(parley.ETOOLARGE, "a question has at most %d options; this one has %d", MaxInputOptions, len(r.Options))
	case len(r.Answerers) > MaxInputAnswerers:
		return parley.Errorf(parley.ETOOLARGE, "a request names at most %d answerers", MaxInputAnswerers)
	case r.Kind == parley.InputApproval && (len(r.Options) > 0 || r.Multiple):
		return parley.Errorf(parley.EINVALIDVALUE, "an approval has no options: its answer is {\"approved\", \"reason\"?}")
	case !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now):
		return parley.Errorf(parley.EINVALIDVALUE, "expiresAt %s has passed", r.ExpiresAt.Format(parley.TimeLayout))
	}
	seen := map[string]bool{}
	for _, o := range r.Options {
		if o.Label == "" || len(o.Label) > MaxInputTitleBytes || len(o.Description) > MaxInputTitleBytes || seen[o.Label] {
			return parley.Errorf(parley.EINVALIDVALUE, "each option needs a label of 1-%d bytes, different from the others, and a description of at most as many", MaxInputTitleBytes)
		}
		seen[o.Label] = true
	}
	for _, a := range r.Answerers {
		if !parley.ValidID(a) {
			return parley.Errorf(parley.EINVALIDVALUE, "answerer %q is not a valid agent id", a)
		}
	}
	if len(r.Schema) > 0 {
		if _, err := compileSchema(r.Schema); err != nil {
			return err
		}
	}
	return nil
}

// InputName is the name (see Names) an input request takes among the
// conversation's ids: a "/" is in no message or prompt id, so the two
// never clash.
func InputName(id string) string { return "input/" + id }

func (d *decider) askInput(c AskInput) error {
	st, m, err := d.streamInTurn(c.Actor, c.MessageID, c.Known)
	if err != nil {
		return err
	}
	r := c.Request
	if err := CheckInputRequest(r, d.env.Now); err != nil {
		return err
	}
	if _, _, known := d.s.InputOf(r.RequestID); known || c.IDTaken {
		return parley.Errorf(parley.EBUSY, "requestId %q already names an input request of this conversation (ids are never reused); ask with another id", r.RequestID).With("id", r.RequestID)
	}
	if len(d.s.Inputs) >= MaxOpenInputs {
		return parley.Errorf(parley.EBUSY, "conversation %s holds %d input requests open or unacknowledged; the limit is %d", d.s.Conversation.ID, len(d.s.Inputs), MaxOpenInputs)
	}
	if len(m.Parts) >= d.env.Limits.MaxParts {
		return parley.Errorf(parley.ETOOLARGE, "message %s has %d parts; the limit is %d", m.ID, len(m.Parts), d.env.Limits.MaxParts)
	}
	p := r.Part()
	m.ApplyInput(p)
	if err := checkSize(c.MessageID, m.Size(), d.env.Limits); err != nil {
		return err
	}
	pu := parley.PartUpdate{MessageID: c.MessageID, Part: p}
	pu.Checkpoint = st.checkpointDue(parley.PartBytes(p), d.env.Limits)
	e := d.emit(parley.EventPartUpdated, st.Turn, st.TurnID, c.AgentID, parley.FinalityNone, pu)
	d.grew(st, m, e, pu.Checkpoint)
	return nil
}

func (d *decider) answerInput(c AnswerInput) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	in, ended, ok := d.s.InputOf(c.RequestID)
	if !ok {
		return parley.Errorf(parley.ENOTFOUND, "no input request %q is open in this conversation (or it ended long ago)", c.RequestID)
	}
	if len(c.Answer) > MaxInputAnswerBytes {
		return parley.Errorf(parley.ETOOLARGE, "the answer is %d bytes; the limit is %d", len(c.Answer), MaxInputAnswerBytes)
	}
	hash := answerHash(c.Answer)
	switch {
	case in.Status == parley.InputStatusAnswered && in.AnswerHash == hash:
		d.out.Result = Result{Seq: in.Seq} // the same answer again: the first one's result
		return nil
	case in.Status == parley.InputStatusAnswered:
		return parley.Errorf(parley.EINPUTENDED, "input request %s was answered already (by %s), with another answer", c.RequestID, orNobody(in.AnsweredBy))
	case in.Status != parley.InputStatusPending || ended != nil:
		return parley.Errorf(parley.EINPUTENDED, "input request %s is %s; it takes no answer", c.RequestID, in.Status)
	case !in.ExpiresAt.IsZero() && !d.env.Now.Before(in.ExpiresAt.Time):
		return parley.Errorf(parley.EINPUTENDED, "input request %s expired at %s; it takes no answer", c.RequestID, in.ExpiresAt.Format(parley.TimeLayout))
	}
	st, m, err := d.stream(Actor{AgentID: in.AgentID}, in.MessageID, c.Known)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(m.Parts, func(p parley.Part) bool { return p.Type == parley.PartInputRequest && p.RequestID == c.RequestID })
	if i < 0 {
		return parley.Errorf(parley.EINTERNAL, "input request %s is not in message %s", c.RequestID, in.MessageID)
	}
	answer, err := CheckAnswer(m.Parts[i], c.Answer)
	if err != nil {
		return err
	}
	d.endInput(st, m, c.RequestID, parley.InputStatusAnswered, answer, c.AgentID, "")
	return nil
}

// endInput writes the input.answered event that ends request id of
// streaming message m (st its stream) with status, and its row if a
// checkpoint is due.
func (d *decider) endInput(st Stream, m *parley.Message, id, status string, answer json.RawMessage, by, reason string) {
	a := parley.InputAnswered{MessageID: m.ID, RequestID: id, Status: status, Answer: answer, AnsweredAt: parley.NewTime(d.env.Now), Reason: reason}
	if status == parley.InputStatusAnswered {
		a.AnsweredBy = by
	}
	a.Checkpoint = st.checkpointDue(len(answer), d.env.Limits)
	e := d.emit(parley.EventInputAnswered, 0, "", by, parley.FinalityNone, a)
	m.ApplyInputAnswered(a)
	d.grew(st, m, e, a.Checkpoint)
	d.out.Result.Claimed = false
}

func (d *decider) ackInput(c AckInput) error {
	in, ok := d.s.Inputs[c.RequestID]
	switch {
	case !ok:
		return nil // acknowledged already, or its message ended: nothing to do
	case in.Status == parley.InputStatusPending:
		return parley.Errorf(parley.EINVALIDVALUE, "input request %s is still pending; acknowledge its outcome once it comes", c.RequestID)
	}
	e := d.emit(parley.EventInputAcked, 0, "", c.AgentID, parley.FinalityNone, parley.InputAcked{MessageID: in.MessageID, RequestID: c.RequestID})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

func (d *decider) withdrawInput(c WithdrawInput) error {
	if err := checkReason(c.Reason); err != nil {
		return err
	}
	in, _, ok := d.s.InputOf(c.RequestID)
	switch {
	case !ok:
		return parley.Errorf(parley.ENOTFOUND, "no input request %q is open in this conversation (or it ended long ago)", c.RequestID)
	case in.Status != parley.InputStatusPending:
		d.out.Result = Result{Seq: in.Seq} // it ended already: nothing to take back
		return nil
	}
	reason := c.Reason
	if reason == "" {
		reason = ReasonWithdrawn
	}
	d.cancelInput(c.RequestID, parley.InputStatusCanceled, c.AgentID, reason, nil)
	d.out.Result = Result{Seq: d.s.LastSeq}
	return nil
}

// expireInputs ends every pending request whose expiry has passed.
func (d *decider) expireInputs() {
	for _, id := range d.s.InputIDs() {
		in := d.s.Inputs[id]
		if in.Status == parley.InputStatusPending && !in.ExpiresAt.IsZero() && !d.env.Now.Before(in.ExpiresAt.Time) {
			d.cancelInput(id, parley.InputStatusExpired, "", ReasonExpired, nil)
		}
	}
}

// cancelInputs ends as canceled, by by, with reason, the pending requests
// that match: of the messages ids, else (ids empty) of agent's messages in
// turn (any turn if 0). m, if set, is a streaming message the decision is
// writing: its parts are changed too.
func (d *decider) cancelInputs(m *parley.Message, agent string, turn int, ids []string, by, reason string) {
	for _, id := range d.s.InputIDs() {
		in := d.s.Inputs[id]
		if in.Status != parley.InputStatusPending {
			continue
		}
		st, ok := d.s.Streams.Get(in.MessageID)
		if !ok {
			continue
		}
		if slices.Contains(ids, in.MessageID) || len(ids) == 0 && in.AgentID == agent && (turn == 0 || st.Turn == turn) {
			d.cancelInput(id, parley.InputStatusCanceled, by, reason, m)
		}
	}
}

// cancelInput ends one pending request without an answer: canceled or
// expired. Readers fold its event into the message; m, if it is the
// request's message, is changed too.
func (d *decider) cancelInput(id, status, by, reason string, m *parley.Message) {
	in := d.s.Inputs[id]
	_, ok := d.s.Streams.Get(in.MessageID)
	if !ok {
		return
	}
	a := parley.InputAnswered{MessageID: in.MessageID, RequestID: id, Status: status, AnsweredAt: parley.NewTime(d.env.Now), Reason: reason}
	d.emit(parley.EventInputAnswered, 0, "", by, parley.FinalityNone, a)
	if m != nil && m.ID == in.MessageID {
		m.ApplyInputAnswered(a)
	}
}

// CheckAnswer checks an answer to input-request part p and returns it in
// compact JSON: an approval's is {"approved": bool, "reason"?: string};
// a question's fits its schema, else its options ({"choices": [labels]} or
// {"text"}), else {"text"}.
func CheckAnswer(p parley.Part, answer json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if len(answer) == 0 || json.Compact(&buf, answer) != nil {
		return nil, parley.Errorf(parley.EINVALID, "the answer is not valid JSON")
	}
	compact := json.RawMessage(buf.Bytes())
	schema := p.Schema
	if len(schema) == 0 {
		schema = ImpliedSchema(p)
	}
	sch, err := compileSchema(schema)
	if err != nil {
		return nil, err
	}
	v, err := unmarshalJSON(compact)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "the answer is not valid JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the answer does not fit the request's schema: %s", schemaError(err))
	}
	return compact, nil
}

// ImpliedSchema is the JSON Schema an answer to p is checked against when
// p names none.
func ImpliedSchema(p parley.Part) json.RawMessage {
	if p.Kind == parley.InputApproval {
		return json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string","maxLength":4096}},"required":["approved"],"additionalProperties":false}`)
	}
	if len(p.Options) == 0 {
		return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","minLength":1}},"required":["text"],"additionalProperties":false}`)
	}
	labels, _ := json.Marshal(optionLabels(p.Options))
	most := 1
	if p.Multiple {
		most = len(p.Options)
	}
	return json.RawMessage(`{"type":"object","properties":{"choices":{"type":"array","items":{"enum":` + string(labels) +
		`},"minItems":1,"maxItems":` + strconv.Itoa(most) + `,"uniqueItems":true},"text":{"type":"string","minLength":1}},` +
		`"minProperties":1,"maxProperties":1,"additionalProperties":false}`)
}

func optionLabels(os []parley.InputOption) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Label
	}
	return out
}

// answerHash is the hash an answer is compared by: of its compact JSON.
func answerHash(answer json.RawMessage) string {
	if len(answer) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, answer) != nil {
		buf.Reset()
		buf.Write(answer)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:16])
}

// noteInput folds into s.Inputs what a part.updated event opens (an
// input request) and what a message's end drops (its requests: a message
// that ended needs no more of them).
func noteInput(s State, e parley.Event, head messageHead) State {
	switch e.Type {
	case parley.EventPartUpdated:
		if !bytes.Contains(e.Data, []byte(`"`+parley.PartInputRequest+`"`)) {
			return s // a tool call: the common case, left unparsed
		}
		var u parley.PartUpdate
		if json.Unmarshal(e.Data, &u) != nil || u.Part.Type != parley.PartInputRequest {
			return s
		}
		p := u.Part
		in := InputState{MessageID: u.MessageID, AgentID: e.AgentID, Kind: p.Kind, Title: p.Title, Status: parley.InputStatusPending,
			ExpiresAt: p.ExpiresAt, Answerers: p.Answerers, Opened: e.Seq, Seq: e.Seq}
		if a := s.Active(); a != nil && a.Runner == e.AgentID {
			in.Asker = a.AgentID
		}
		s.Inputs = maps.Clone(s.Inputs)
		if s.Inputs == nil {
			s.Inputs = map[string]InputState{}
		}
		s.Inputs[p.RequestID] = in
	case parley.EventMessage, parley.EventMessageUpdated:
		if len(s.Inputs) > 0 && head.Status != parley.StatusStreaming {
			s = dropInputs(s, head.ID)
		}
	}
	return s
}

// applyInput folds an input.answered or input.acked event into s.
func applyInput(s State, e parley.Event) State {
	if e.Type == parley.EventInputAnswered {
		s = applyStream(s, e, messageHead{}) // it counts toward its message's checkpoint
	}
	var a parley.InputAnswered // (input.acked's fields are among its)
	if json.Unmarshal(e.Data, &a) != nil {
		return s
	}
	in, ok := s.Inputs[a.RequestID]
	if !ok {
		return s
	}
	s.Inputs = maps.Clone(s.Inputs)
	if e.Type == parley.EventInputAcked {
		delete(s.Inputs, a.RequestID)
		return endInputState(s, a.RequestID, in)
	}
	in.Status, in.Seq, in.AnswerHash, in.AnsweredBy = a.Status, e.Seq, answerHash(a.Answer), a.AnsweredBy
	s.Inputs[a.RequestID] = in
	return s
}

// dropInputs moves the requests of the messages ids out of s.Inputs.
func dropInputs(s State, ids ...string) State {
	var gone []string
	for _, id := range s.InputIDs() {
		if slices.Contains(ids, s.Inputs[id].MessageID) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return s
	}
	old := s.Inputs
	s.Inputs = maps.Clone(old)
	for _, id := range gone {
		delete(s.Inputs, id)
		s = endInputState(s, id, old[id])
	}
	if len(s.Inputs) == 0 {
		s.Inputs = nil
	}
	return s
}

// endInputState remembers a request that left Inputs among the last ended.
func endInputState(s State, id string, in InputState) State {
	ended := append(slices.Clone(s.InputsEnded), EndedInput{RequestID: id, MessageID: in.MessageID, Status: in.Status, Seq: in.Seq, AnswerHash: in.AnswerHash})
	if len(ended) > maxInputsEnded {
		ended = ended[len(ended)-maxInputsEnded:]
	}
	s.InputsEnded = ended
	return s
}

// openedInput returns the id of the input request a part.updated event
// opens, or "" if its part is not an input request.
func openedInput(e *parley.Event) string {
	if !bytes.Contains(e.Data, []byte(`"`+parley.PartInputRequest+`"`)) {
		return ""
	}
	var u parley.PartUpdate
	if json.Unmarshal(e.Data, &u) != nil || u.Part.Type != parley.PartInputRequest {
		return ""
	}
	return u.Part.RequestID
}
