package conv

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// Decide returns the events a command produces on s, or a *parley.Error that
// says why it is refused; on error nothing is to be written. Checks run in
// this order: idempotency, conversation open, turn rules, threading,
// limits. A claim that has lapsed at env.Now is expired first, in the same
// decision.
func Decide(s State, cmd Command, env Env) (Decision, error) {
	if env.Limits == (Limits{}) {
		env.Limits = DefaultLimits
	}
	d := &decider{s: s, base: s, env: env}
	if c := s.Claim; c != nil && !env.Now.Before(c.ExpiresAt.Time) {
		d.emit(parley.EventClaimExpired, c.Turn, "", c.AgentID, parley.FinalityNone, c)
	}
	if cmd == nil {
		return Decision{}, parley.Errorf(parley.EINVALID, "unknown command %T", cmd)
	}
	if err := cmd.decide(d); err != nil {
		return Decision{}, err
	}
	if err := checkStorable(d.out.Events); err != nil {
		return Decision{}, err
	}
	return d.out, nil
}

// checkStorable refuses events that would store what one store takes and
// the other refuses: U+0000 (see parley.HasNUL) or a number beyond
// PostgreSQL's (parley.HasOversizedNumber). Whatever the command, what it
// writes is in its events.
func checkStorable(events []parley.Event) error {
	for _, e := range events {
		nul := parley.HasNUL(e.Data)
		if nul || parley.HasOversizedNumber(e.Data) {
			what := "the request"
			switch e.Type {
			case parley.EventMessage, parley.EventMessageUpdated:
				what = "the message"
			case parley.EventChunk:
				what = "the text"
			case parley.EventPartUpdated:
				what = "the tool call or input request"
			case parley.EventInputAnswered:
				what = "the answer"
			case parley.EventTrace:
				what = "the trace"
			case parley.EventPromptQueued:
				what = "the prompt"
			case parley.EventConversationCreated, parley.EventConversationUpdated:
				what = "the conversation"
			}
			if !nul {
				return parley.ErrNumber(what)
			}
			return parley.ErrNUL(what)
		}
	}
	return nil
}

// decider accumulates one decision; s is kept evolved over what it emitted,
// base is the state the decision started from (what is stored).
type decider struct {
	s    State
	base State
	env  Env
	out  Decision
}

// emit appends an event with the next seq and evolves the decider's state.
func (d *decider) emit(typ string, turn int, turnID, agentID string, fin parley.Finality, data any) parley.Event {
	var raw []byte
	if c, ok := data.(parley.Chunk); ok {
		raw = c.AppendJSON(make([]byte, 0, 48+len(c.Content))) // every delta: without reflection
	} else {
		raw, _ = json.Marshal(data)
	}
	e := parley.Event{
		ConversationID: d.s.Conversation.ID,
		Seq:            d.s.LastSeq + 1,
		Type:           typ,
		Turn:           turn,
		TurnID:         turnID,
		AgentID:        agentID,
		Finality:       fin,
		Time:           parley.NewTime(d.env.Now),
		Data:           raw,
	}
	d.out.Events = append(d.out.Events, e)
	d.s = apply(d.s, e)
	return e
}

// conflict returns a 409 error carrying the current head. A refused decision
// writes nothing, so the head is that of the stored state: not of d.s, which
// may hold a claim.expired event of this decision that is never written.
// (The head hides a lapsed claim all the same.)
func (d *decider) conflict(code, format string, args ...any) error {
	return parley.Errorf(code, format, args...).WithHead(d.base.Head(d.env.Now))
}

func (d *decider) checkOpen() error {
	if d.s.Closed {
		return d.conflict(parley.ECLOSED, "conversation %s is closed; nothing more can be written to it", d.s.Conversation.ID)
	}
	return nil
}

// idempotent answers a retry: the original response if the body is the same.
func (d *decider) idempotent(key, hash string, prior *Prior) (bool, error) {
	if key == "" || prior == nil {
		return false, nil
	}
	if prior.RequestHash != hash {
		return true, parley.Errorf(parley.EIDEMPOTENCY, "clientRequestId %q was used before with a different body; use a new id for a new request", key)
	}
	d.out = Decision{Replay: prior.Response}
	return true, nil
}

// turnPlan is where a write goes: an open turn it continues or one it opens.
type turnPlan struct {
	turn    int
	opening bool
	owner   bool // the writer owns (or will own) the turn, as opposed to a delegate
}

// planTurn applies the turn rules of seeds 002 and 003 for a write by agent.
func (d *decider) planTurn(agent string, pre *parley.Precondition) (turnPlan, error) {
	open := d.s.Open
	next := d.s.LastTurn + 1
	if pre == nil {
		if open != nil {
			if open.Owner == agent {
				return turnPlan{turn: open.Turn, owner: true}, nil
			}
			if slices.Contains(open.Delegates, agent) {
				return turnPlan{turn: open.Turn}, nil
			}
			return turnPlan{}, d.conflict(parley.ETURNCONFLICT, "turn %d is open and owned by %s; wait for it to close", open.Turn, open.Owner)
		}
		return d.planOpening(agent, next)
	}
	if pre.ExpectTurn < 1 {
		return turnPlan{}, parley.Errorf(parley.EINVALIDVALUE, "precondition.expectTurn must be 1 or more")
	}
	if pre.StartingTurn {
		if open != nil {
			if open.Owner == agent && open.Reset && pre.ExpectTurn == open.Turn {
				return turnPlan{turn: open.Turn, owner: true}, nil
			}
			return turnPlan{}, d.conflict(parley.EPRECONDITION, "cannot start turn %d: turn %d is open and owned by %s", pre.ExpectTurn, open.Turn, open.Owner)
		}
		if pre.ExpectTurn != next {
			return turnPlan{}, d.conflict(parley.EPRECONDITION, "cannot start turn %d: the next turn is %d", pre.ExpectTurn, next)
		}
		return d.planOpening(agent, next)
	}
	if open == nil || open.Turn != pre.ExpectTurn {
		return turnPlan{}, d.conflict(parley.EPRECONDITION, "cannot continue turn %d: it is not open (last turn %d)", pre.ExpectTurn, d.s.LastTurn)
	}
	if open.Owner == agent {
		return turnPlan{turn: open.Turn, owner: true}, nil
	}
	if slices.Contains(open.Delegates, agent) {
		return turnPlan{turn: open.Turn}, nil
	}
	return turnPlan{}, d.conflict(parley.ETURNCONFLICT, "turn %d is owned by %s", open.Turn, open.Owner)
}

func (d *decider) planOpening(agent string, next int) (turnPlan, error) {
	if c := d.s.activeClaim(d.env.Now); c != nil && c.Turn == next && c.AgentID != agent {
		return turnPlan{}, d.conflict(parley.ECLAIMCONFLICT, "turn %d is claimed by %s until %s", next, c.AgentID, c.ExpiresAt.Format(parley.TimeLayout))
	}
	return turnPlan{turn: next, opening: true, owner: true}, nil
}

// closing checks that only the owner closes its turn.
func (d *decider) checkCloser(plan turnPlan, agent string, fin parley.Finality) error {
	if fin != parley.FinalityNone && !plan.owner {
		return d.conflict(parley.ETURNCONFLICT, "only %s, the owner of turn %d, may close it", d.s.Open.Owner, plan.turn)
	}
	return nil
}

// turnIDFor assigns the turnId of a write: a continued turn keeps
// its turnId; a new turn takes a reply's parent's turnId, an explicit known
// turnId, a user message's own id, or the last turn's turnId.
func (d *decider) turnIDFor(plan turnPlan, ownID string, role parley.Role, explicit string, known Lookups) (string, error) {
	if !plan.opening {
		if explicit != "" && explicit != d.s.Open.TurnID {
			return "", parley.Errorf(parley.EINVALIDVALUE, "turnId %q differs from the open turn's turnId %q", explicit, d.s.Open.TurnID)
		}
		return d.s.Open.TurnID, nil
	}
	switch {
	case explicit != "":
		if explicit != d.s.LastTurnID && explicit != ownID && !known.TurnIDKnown {
			return "", parley.Errorf(parley.EINVALIDVALUE, "turnId %q names no message or turn of this conversation", explicit)
		}
		return explicit, nil
	case role == parley.RoleUser:
		return ownID, nil
	case known.Parent != nil && known.Parent.TurnID != "":
		return known.Parent.TurnID, nil
	case d.s.LastTurnID != "":
		return d.s.LastTurnID, nil
	}
	return ownID, nil
}

func (d *decider) postTrace(c PostTrace) error {
	if replay, err := d.idempotent(c.ClientRequestID, c.RequestHash, c.Known.Prior); replay {
		return err
	}
	switch {
	case c.Finality != "" && !c.Finality.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "finality %q is not one of none, turn, conversation", c.Finality)
	case c.Finality != "" && c.Finality != parley.FinalityNone:
		return parley.Errorf(parley.EINVALID, "a trace cannot have finality %q: only messages close turns or conversations", c.Finality)
	case !parley.ValidID(c.ID):
		return parley.Errorf(parley.EINVALIDVALUE, "trace id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.ID)
	case !parley.ValidID(c.AgentID):
		return parley.Errorf(parley.EINVALIDVALUE, "agent id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.AgentID)
	case c.TurnID != "" && !parley.ValidID(c.TurnID):
		return parley.Errorf(parley.EINVALIDVALUE, "turnId %q is not a valid id", c.TurnID)
	case len(c.Payload) > 0 && !json.Valid(c.Payload):
		return parley.Errorf(parley.EINVALID, "payload is not valid JSON")
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	plan, err := d.planTurn(c.AgentID, c.Precondition)
	if err != nil {
		return err
	}
	turnID, err := d.turnIDFor(plan, c.ID, "", c.TurnID, c.Known)
	if err != nil {
		return err
	}
	if err := traceTooLarge(c.Payload, d.env.Limits); err != nil {
		return err
	}
	e := d.emit(parley.EventTrace, plan.turn, turnID, c.AgentID, parley.FinalityNone, parley.Trace{ID: c.ID, Payload: c.Payload})
	d.out.Result = Result{Turn: plan.turn, Claimed: true, Seq: e.Seq}
	return nil
}

// traceTooLarge refuses a trace payload over MaxMetadataBytes.
func traceTooLarge(payload json.RawMessage, l Limits) error {
	if len(payload) > l.MaxMetadataBytes {
		return parley.Errorf(parley.ETOOLARGE, "trace payload is %d bytes; the limit is %d", len(payload), l.MaxMetadataBytes)
	}
	return nil
}

func (d *decider) claim(a Actor, expect int, ttl time.Duration) error {
	if expect < 0 {
		return parley.Errorf(parley.EINVALIDVALUE, "expectTurn must be 1 or more (or 0 or left out for the next turn), not %d", expect)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	if open := d.s.Open; open != nil {
		return d.conflict(parley.ETURNCONFLICT, "turn %d is open and owned by %s; the next turn can be claimed when it closes", open.Turn, open.Owner)
	}
	next := d.s.LastTurn + 1
	if expect != 0 && expect != next {
		return d.conflict(parley.EPRECONDITION, "cannot claim turn %d: the next turn is %d", expect, next)
	}
	if c := d.s.activeClaim(d.env.Now); c != nil && c.AgentID != a.AgentID {
		return d.conflict(parley.ECLAIMCONFLICT, "turn %d is claimed by %s until %s", next, c.AgentID, c.ExpiresAt.Format(parley.TimeLayout))
	}
	if ttl == 0 {
		ttl = d.env.Limits.ClaimTTL
	}
	if err := checkTTL(ttl, d.env.Limits); err != nil {
		return err
	}
	claim := parley.Claim{AgentID: a.AgentID, Turn: next, ExpiresAt: parley.NewTime(d.env.Now.Add(ttl))}
	e := d.emit(parley.EventTurnClaimed, next, "", a.AgentID, parley.FinalityNone, claim)
	d.out.Result = Result{Turn: next, Claimed: true, Claim: &claim, Seq: e.Seq}
	return nil
}

// checkTTL refuses a claim's TTL that is negative or over MaxClaimTTL.
func checkTTL(ttl time.Duration, l Limits) error {
	if ttl < 0 || ttl > l.MaxClaimTTL {
		return parley.Errorf(parley.EINVALIDVALUE, "claim ttl %s is not from 0 to %s", ttl, l.MaxClaimTTL)
	}
	return nil
}

func (d *decider) reset(c ResetTurn) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	open := d.s.Open
	if open == nil || open.Owner != c.AgentID {
		if c.Claim {
			return d.claim(c.Actor, 0, c.TTL)
		}
		d.out.Result = Result{Turn: d.s.LastTurn + 1}
		return nil
	}
	d.out.Result = Result{Turn: open.Turn, WasReset: true, Claimed: true}
	if open.Reset {
		return nil // already reset and nothing written since: write nothing
	}
	e := d.emit(parley.EventTurnReset, open.Turn, open.TurnID, c.AgentID, parley.FinalityNone, parley.TurnRef{Turn: open.Turn})
	d.out.Result.Seq = e.Seq
	return nil
}

func (d *decider) abort(c AbortTurn) error {
	if err := checkReason(c.Reason); err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	open := d.s.Open
	if open == nil {
		if m := d.s.LastAbort; m != nil && m.AgentID == c.AgentID && m.Turn == d.s.LastTurn {
			d.out.Result = Result{Turn: m.Turn, Seq: m.Seq}
			return nil // the same abort again: write nothing
		}
		return d.conflict(parley.ETURNCONFLICT, "there is no open turn to abort (last turn %d)", d.s.LastTurn)
	}
	if open.Owner != c.AgentID && !c.Admin {
		return d.conflict(parley.ETURNCONFLICT, "turn %d is owned by %s; only its owner may abort it", open.Turn, open.Owner)
	}
	d.cancelInputs(nil, open.Owner, open.Turn, nil, c.AgentID, ReasonTurnAborted)
	e := d.emit(parley.EventTurnAborted, open.Turn, open.TurnID, c.AgentID, parley.FinalityTurn, parley.TurnRef{Turn: open.Turn, Reason: c.Reason})
	d.out.Result = Result{Turn: open.Turn, Seq: e.Seq}
	d.abortOwnersPrompt(open.Owner, c.AgentID)
	return nil
}

// checkReason refuses a reason over MaxReasonBytes.
func checkReason(reason string) error {
	if len(reason) > MaxReasonBytes {
		return parley.Errorf(parley.ETOOLARGE, "reason is %d bytes; the limit is %d", len(reason), MaxReasonBytes)
	}
	return nil
}

// maxDelegates is the bound on a turn's delegates that l sets.
func maxDelegates(l Limits) int {
	if l.MaxDelegates <= 0 {
		return DefaultLimits.MaxDelegates
	}
	return l.MaxDelegates
}

func (d *decider) delegate(c Delegate) error {
	if !parley.ValidID(c.To) {
		return parley.Errorf(parley.EINVALIDVALUE, "delegate agent id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.To)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	open := d.s.Open
	if open == nil {
		return d.conflict(parley.ETURNCONFLICT, "there is no open turn to delegate into")
	}
	if open.Owner != c.AgentID && !slices.Contains(open.Delegates, c.AgentID) {
		return d.conflict(parley.ETURNCONFLICT, "turn %d is owned by %s; only it and its delegates may delegate", open.Turn, open.Owner)
	}
	d.out.Result = Result{Turn: open.Turn, Claimed: true}
	if c.To == open.Owner || slices.Contains(open.Delegates, c.To) {
		return nil // already allowed: write nothing
	}
	limit := maxDelegates(d.env.Limits)
	if n := len(open.Delegates); n >= limit {
		return parley.Errorf(parley.EBUSY, "turn %d has %d delegates, the most a turn may have; delegate again once it has closed", open.Turn, n).
			With("maxDelegates", limit).WithHead(d.base.Head(d.env.Now))
	}
	e := d.emit(parley.EventDelegation, open.Turn, open.TurnID, c.AgentID, parley.FinalityNone, parley.Delegation{From: c.AgentID, To: c.To, Turn: open.Turn})
	d.out.Result.Seq = e.Seq
	return nil
}
