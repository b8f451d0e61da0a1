package conv_test

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// A streaming message whose turn closes before it is finalized (the turn was
// aborted, or its owner closed it with another message): the right to write
// into the turn ends with it, so the message cannot grow; it can still be
// finalized, which closes nothing and opens nothing again.

func startStreaming(agent, id string) conv.PostMessage {
	return conv.PostMessage{Actor: actor(agent), ID: id, Role: parley.RoleAssistant, Streaming: true}
}

func text(agent, id string) conv.StreamText {
	return conv.StreamText{Actor: actor(agent), MessageID: id, Delta: "more"}
}

func finalize(agent, id string, fin parley.Finality) conv.FinalizeMessage {
	return conv.FinalizeMessage{Actor: actor(agent), MessageID: id, Reason: parley.FinishCanceled, Finality: fin}
}

func TestStreamingMessageOfAClosedTurn(t *testing.T) {
	t.Parallel()
	aborted := []any{startStreaming("bot", "r1"), text("bot", "r1"), conv.AbortTurn{Actor: admin}}
	closedByOwner := []any{startStreaming("bot", "r1"), text("bot", "r1"), say("bot", parley.FinalityTurn)}
	then := func(base []any, more ...any) []any { return append(append([]any{}, base...), more...) }
	finalOnly := func(turn int, open *parley.OpenTurn) func(t *testing.T, o outcome) {
		return both(wantEvents("message.updated"), func(t *testing.T, o outcome) {
			t.Helper()
			e, m := o.d.Events[0], lastMessage(t, o.d)
			if e.Turn != turn || e.Finality != parley.FinalityNone || m.Status != parley.StatusCanceled || m.Finality != parley.FinalityNone {
				t.Fatalf("finalize wrote %+v, message %+v", e, m)
			}
			s := o.sc.s
			if s.LastTurn != o.before.LastTurn || mustJSON(s.Open) != mustJSON(open) || s.Streams.Len() != 0 {
				t.Fatalf("after finalize: lastTurn %d -> %d, open %+v, want %+v", o.before.LastTurn, s.LastTurn, s.Open, open)
			}
		})
	}
	runRules(t, []rule{
		{name: "text to a message whose turn was aborted is turn_conflict",
			steps: aborted, cmd: text("bot", "r1"), code: parley.ETURNCONFLICT, check: wantNaming("turn 1", "finalized")},
		{name: "a tool update to a message whose turn was aborted is turn_conflict",
			steps: aborted, cmd: conv.StreamTool{Actor: actor("bot"), MessageID: "r1", Tool: conv.ToolUpdate{CallID: "c", ToolName: "t", Status: parley.ToolRunning}},
			code: parley.ETURNCONFLICT},
		{name: "text to a message whose owner closed the turn is turn_conflict",
			steps: closedByOwner, cmd: text("bot", "r1"), code: parley.ETURNCONFLICT},
		{name: "text to a message of a closed turn is refused while another agent's turn is open",
			steps: then(aborted, say("alice", parley.FinalityNone)), cmd: text("bot", "r1"), code: parley.ETURNCONFLICT},
		{name: "finalizing a message of an aborted turn closes nothing",
			steps: aborted, cmd: finalize("bot", "r1", ""), check: finalOnly(1, nil)},
		{name: "finalizing a message of a closed turn leaves another agent's later turn open",
			steps: then(aborted, say("alice", parley.FinalityNone)), cmd: finalize("bot", "r1", ""),
			check: finalOnly(1, &parley.OpenTurn{Turn: 2, Owner: "alice", TurnID: "r1", OpenedSeq: 5})},
		{name: "finalizing a message of a closed turn leaves the writer's own later turn open",
			steps: then(aborted, say("bot", parley.FinalityNone)), cmd: finalize("bot", "r1", ""),
			check: finalOnly(1, &parley.OpenTurn{Turn: 2, Owner: "bot", TurnID: "r1", OpenedSeq: 5})},
		{name: "finalizing a message of a closed turn with finality none",
			steps: closedByOwner, cmd: finalize("bot", "r1", parley.FinalityNone), check: finalOnly(1, nil)},
		{name: "finalizing a message of a closed turn with finality turn is turn_conflict",
			steps: closedByOwner, cmd: finalize("bot", "r1", parley.FinalityTurn), code: parley.ETURNCONFLICT, check: wantNaming("turn 1")},
		{name: "finalizing a message of a closed turn with finality turn, while the writer owns a later turn, is turn_conflict",
			steps: then(closedByOwner, say("bot", parley.FinalityNone)), cmd: finalize("bot", "r1", parley.FinalityTurn), code: parley.ETURNCONFLICT},
		{name: "finalizing a message of a closed turn with finality conversation is turn_conflict",
			steps: closedByOwner, cmd: finalize("bot", "r1", parley.FinalityConversation), code: parley.ETURNCONFLICT},
		{name: "a delegate's message cannot grow once the owner closed the turn",
			steps: []any{say("bot", parley.FinalityNone), delegate("bot", "worker"), startStreaming("worker", "w1"), say("bot", parley.FinalityTurn)},
			cmd:   text("worker", "w1"), code: parley.ETURNCONFLICT},
		{name: "a delegate's message of a closed turn is finalized closing nothing",
			steps: []any{say("bot", parley.FinalityNone), delegate("bot", "worker"), startStreaming("worker", "w1"), say("bot", parley.FinalityTurn)},
			cmd:   finalize("worker", "w1", ""), check: finalOnly(1, nil)},
		{name: "the owner's finalize still closes its open turn",
			steps: []any{startStreaming("bot", "r1"), text("bot", "r1")}, cmd: finalize("bot", "r1", ""),
			check: func(t *testing.T, o outcome) {
				if e := o.d.Events[0]; e.Finality != parley.FinalityTurn || o.sc.s.Open != nil {
					t.Fatalf("finalize %+v, open %+v", e, o.sc.s.Open)
				}
			}},
	})
}

func TestStreamingSystemMessageStaysInTurnZero(t *testing.T) {
	t.Parallel()
	// ops writes a system message as an admin, then opens turn 1 as an agent.
	sys := conv.PostMessage{Actor: admin, ID: "s1", Role: parley.RoleSystem, Streaming: true}
	steps := []any{sys, say("ops", parley.FinalityNone)}
	runRules(t, []rule{
		{name: "text to a turn-0 message during an open turn",
			steps: steps, cmd: text("ops", "s1"),
			check: func(t *testing.T, o outcome) {
				if e := o.d.Events[0]; e.Turn != 0 || o.sc.s.Open.Turn != 1 {
					t.Fatalf("chunk %+v", e)
				}
			}},
		{name: "finalizing a turn-0 message by the owner of the open turn closes nothing",
			steps: steps, cmd: finalize("ops", "s1", ""),
			check: func(t *testing.T, o outcome) {
				if e := o.d.Events[0]; e.Turn != 0 || e.Finality != parley.FinalityNone || o.sc.s.Open == nil {
					t.Fatalf("finalize %+v, open %+v", e, o.sc.s.Open)
				}
			}},
		{name: "finalizing a turn-0 message with finality turn is invalid_value",
			steps: steps, cmd: finalize("ops", "s1", parley.FinalityTurn), code: parley.EINVALIDVALUE},
		{name: "finalizing a turn-0 message with finality conversation closes the conversation",
			steps: steps, cmd: finalize("ops", "s1", parley.FinalityConversation),
			check: func(t *testing.T, o outcome) {
				if !o.sc.s.Closed || o.sc.s.Open != nil {
					t.Fatalf("closed %v open %+v", o.sc.s.Closed, o.sc.s.Open)
				}
			}},
	})
}
