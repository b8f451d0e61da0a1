package runners

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// The first runner protocol, for conversations made with messageFormat
// "v1", spoken by runners written before messages had parts:
//
//	{"type":"stream","content"}   text as it comes: a chunk that names no message
//	{"type":"result","content"}   one assistant row per text segment
//	{"type":"tool","callId","toolName","status","args"?,"result"?,"error"?}
//	                              a tool row (role tool), made or updated by callId
//	{"type":"complete"}           the answer is done
//
// Rows are ordinary messages. The last finished one (a result, or a tool
// row whose call ended) is held streaming until the runner says what
// comes next: another row finalizes it as part of the turn, complete
// finalizes it closing the runner's turn (as v2's message.finalize does).
// error and aborted, reverted and message.state mean what they mean in v2:
// aborted ends the last result canceled, closing the turn, and the prompt.
// A runner stopped before any result holds no message to end: its
// aborted aborts the turn its streamed text opened (turn.aborted), as a
// v2 runner's canceled message would have closed it.

// v1Done are the tool statuses after which a call changes no more.
var v1Done = map[string]bool{parley.ToolCompleted: true, parley.ToolError: true}

// applyV1 applies a frame of the first protocol, or reports handled false
// for a frame both protocols share.
func (rs *Session) applyV1(ctx context.Context, f *Frame) (res *engine.MessageResult, handled bool, err error) {
	eng, id := rs.eng, rs.conv
	switch f.Type {
	case "stream":
		res, err = eng.StreamV1(ctx, id, conv.StreamV1{Actor: rs.act, Content: f.Content})
	case "result":
		if err = rs.settleV1(ctx, parley.FinalityNone, "", false); err != nil {
			return nil, true, err
		}
		mid := engine.NewID()
		res, err = eng.PostMessage(ctx, id, conv.PostMessage{Actor: rs.act, ID: mid, Role: parley.RoleAssistant, Streaming: true})
		if err == nil && f.Content != "" {
			res, err = eng.StreamText(ctx, id, conv.StreamText{Actor: rs.act, MessageID: mid, Delta: f.Content})
		}
		if err == nil {
			rs.active = mid
		}
	case "tool":
		res, err = rs.toolV1(ctx, f)
	case "complete":
		if err = rs.settleV1(ctx, parley.FinalityTurn, "", true); err != nil {
			return nil, true, err
		}
		var r *engine.TurnResult
		if r, err = eng.CompletePrompt(ctx, id, conv.CompletePrompt{Actor: rs.act, ID: f.MessageID}); err == nil {
			res = &engine.MessageResult{Seq: r.Seq}
		}
	case "aborted":
		// The answer is over: every other row ends as part of the turn (a
		// call still running as an error), and the frame ends the current
		// one and the prompt, as in v2. With no current row, nothing would
		// close the turn: it is aborted before the prompt ends, so that the
		// floor is free when the next prompt is dispatched.
		target := rs.target(f)
		if err = rs.settleV1(ctx, parley.FinalityNone, target, true); err == nil && target == "" && f.Finality != parley.FinalityNone {
			err = rs.abortOwnTurn(ctx)
		}
		if err != nil {
			return nil, true, err
		}
		return nil, false, nil
	case "error":
		// The other finished rows end as part of the turn; the frame ends
		// the current one, as in v2.
		return nil, false, rs.settleV1(ctx, parley.FinalityNone, rs.target(f), false)
	default:
		return nil, false, nil
	}
	return res, true, err
}

// toolV1 makes or updates the tool row of a call: a message of role tool
// whose one part is the call.
func (rs *Session) toolV1(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	if !parley.ValidID("tool-" + f.CallID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "callId %.200q is not 1-123 characters of A-Z a-z 0-9 . _ : -", f.CallID)
	}
	mid := "tool-" + f.CallID
	update := conv.StreamTool{Actor: rs.act, MessageID: mid, Tool: conv.ToolUpdate{CallID: f.CallID, ToolName: f.ToolName,
		Status: f.Status, Args: f.Args, Result: f.Result, Error: f.Error}}
	res, err := rs.eng.StreamTool(ctx, rs.conv, update)
	if parley.ErrorCode(err) != parley.ENOTFOUND {
		return res, err // an update of a call's row, or a refusal
	}
	if err := rs.settleV1(ctx, parley.FinalityNone, "", false); err != nil {
		return nil, err
	}
	if _, err := rs.eng.PostMessage(ctx, rs.conv, conv.PostMessage{Actor: rs.act, ID: mid, Role: parley.RoleTool, Streaming: true}); err != nil {
		return nil, err
	}
	return rs.eng.StreamTool(ctx, rs.conv, update)
}

// settleV1 finalizes the runner's rows but keep: the finished ones (a
// result, a tool row whose call ended), or with all every one (a call
// still running ends as an error, as a v2 finalize has it). With
// FinalityNone they end as part of the turn; with FinalityTurn the last
// closes the turn.
func (rs *Session) settleV1(ctx context.Context, fin parley.Finality, keep string, all bool) error {
	ms, err := rs.eng.Streaming(ctx, rs.conv, func(_, agent string) bool { return agent == rs.act.AgentID })
	if err != nil {
		return err
	}
	var settle []string
	for _, m := range ms {
		if m.ID != keep && (all || finishedV1(m)) {
			settle = append(settle, m.ID)
		}
	}
	if fin == parley.FinalityTurn && len(settle) == 0 {
		// Text was streamed but no row holds it (no result came): an
		// empty message closes the runner's turn, if it holds one.
		if owns, err := rs.ownsTurn(ctx); err != nil || !owns {
			return err
		}
		_, err := rs.eng.PostMessage(ctx, rs.conv, conv.PostMessage{Actor: rs.act, Role: parley.RoleAssistant, Finality: parley.FinalityTurn})
		return err
	}
	for i, mid := range settle {
		f := parley.FinalityNone
		if fin == parley.FinalityTurn && i == len(settle)-1 {
			f = parley.FinalityTurn
		}
		if _, err := rs.eng.FinalizeMessage(ctx, rs.conv, conv.FinalizeMessage{Actor: rs.act, MessageID: mid, Reason: parley.FinishEndTurn, Finality: f}); err != nil {
			return err
		}
		if mid == rs.active {
			rs.active = ""
		}
	}
	return nil
}

// finishedV1 reports whether a v1 row holds all it will: a result, or a
// tool row whose call has ended.
func finishedV1(m *parley.Message) bool {
	if m.Role != parley.RoleTool {
		return true
	}
	for _, p := range m.Parts {
		if p.Type == parley.PartToolCall && !v1Done[p.Status] {
			return false
		}
	}
	return true
}
