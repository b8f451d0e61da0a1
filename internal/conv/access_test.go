package conv_test

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestAuthorizeTable: who may issue which command, on a conversation that
// alice created with carol as participant and hugo as member; bob takes no
// part; worker is delegated into alice's open turn; prompt p was asked by
// carol and is answered by bot.
func TestAuthorizeTable(t *testing.T) {
	t.Parallel()
	s := conv.State{
		Conversation: parley.Conversation{ID: "c", Participants: []string{"carol", "bot"}, Members: []string{"hugo"}, CreatedBy: "alice"},
		Open:         &parley.OpenTurn{Turn: 3, Owner: "alice", Delegates: []string{"worker"}},
		Queue:        []parley.QueuedPrompt{{ID: "p", AgentID: "carol", Runner: "bot"}, {ID: "q", AgentID: "hugo"}},
	}
	a := func(agent string) conv.Actor { return conv.Actor{AgentID: agent} }
	admin := conv.Actor{AgentID: "ops", Admin: true}
	cases := []struct {
		name string
		cmd  conv.Command
		ok   bool
	}{
		{"the owner writes", conv.PostMessage{Actor: a("alice")}, true},
		{"a participant writes", conv.PostMessage{Actor: a("carol")}, true},
		{"a member writes", conv.PostMessage{Actor: a("hugo")}, true},
		{"an outsider writes", conv.PostMessage{Actor: a("bob")}, false},
		{"an admin writes as anyone", conv.PostMessage{Actor: admin}, true},
		{"a delegate writes into the open turn", conv.PostMessage{Actor: a("worker")}, true},
		{"a delegate traces", conv.PostTrace{Actor: a("worker")}, true},
		{"a delegate delegates further", conv.Delegate{Actor: a("worker"), To: "sub"}, true},
		{"a delegate claims the next turn", conv.ClaimTurn{Actor: a("worker")}, false},
		{"an outsider claims", conv.ClaimTurn{Actor: a("bob")}, false},
		{"an outsider resets", conv.ResetTurn{Actor: a("bob")}, false},
		{"an outsider aborts the turn", conv.AbortTurn{Actor: a("bob")}, false},
		{"an outsider queues a prompt", conv.EnqueuePrompt{Actor: a("bob")}, false},
		{"a member queues a prompt", conv.EnqueuePrompt{Actor: a("hugo")}, true},
		{"a member queues a prompt from a channel", conv.EnqueuePrompt{Actor: a("hugo"), Channel: &parley.Channel{Type: "slack", ID: "C1"}}, false},
		{"the owner queues a prompt from a channel", conv.EnqueuePrompt{Actor: a("alice"), Channel: &parley.Channel{Type: "slack", ID: "C1"}}, false},
		{"an admin (a channel's bridge) queues a prompt from a channel", conv.EnqueuePrompt{Actor: admin, Channel: &parley.Channel{Type: "slack", ID: "C1"}}, true},
		{"a member posts a message from a channel", conv.PostMessage{Actor: a("hugo"), Channel: &parley.Channel{Type: "slack", ID: "C1"}}, false},
		{"an admin posts a message from a channel", conv.PostMessage{Actor: admin, Channel: &parley.Channel{Type: "slack", ID: "C1"}}, true},
		{"a runner's streamed answer naming a channel is the rules' business", conv.PostMessage{Actor: a("bot"), Streaming: true, Channel: &parley.Channel{Type: "slack", ID: "C1"}}, true},
		{"the asker withdraws", conv.WithdrawPrompt{Actor: a("hugo"), ID: "q"}, true},
		{"the owner withdraws another's", conv.WithdrawPrompt{Actor: a("alice"), ID: "q"}, true},
		{"a member withdraws another's", conv.WithdrawPrompt{Actor: a("carol"), ID: "q"}, false},
		{"a member promotes another's", conv.PromotePrompt{Actor: a("carol"), ID: "q"}, false},
		{"an unknown prompt is the rules' business", conv.WithdrawPrompt{Actor: a("carol"), ID: "nope"}, true},
		{"the asker stops the answer", conv.AbortPrompt{Actor: a("carol")}, true},
		{"the runner stops its answer", conv.AbortPrompt{Actor: a("bot")}, true},
		{"the owner stops it", conv.AbortPrompt{Actor: a("alice")}, true},
		{"another member stops it", conv.AbortPrompt{Actor: a("hugo")}, false},
		{"an outsider stops it", conv.AbortPrompt{Actor: a("bob")}, false},
		{"a member reverts its own", conv.Revert{Actor: a("carol"), Known: []string{"m1"}, Authors: []string{"carol"}}, true},
		{"a member reverts another's too", conv.Revert{Actor: a("carol"), Known: []string{"m1", "m2"}, Authors: []string{"carol", "hugo"}}, false},
		{"the owner reverts anybody's", conv.Revert{Actor: a("alice"), Known: []string{"m1", "m2"}, Authors: []string{"carol", "hugo"}}, true},
		{"an outsider reverts nothing", conv.Revert{Actor: a("bob")}, false},
		{"a writer streams (the rules check it is its message)", conv.StreamText{Actor: a("bob")}, true},
		{"the engine dispatches", conv.DispatchPrompt{Runner: "bot"}, true},
	}
	for _, c := range cases {
		err := conv.Authorize(s, c.cmd)
		if c.ok && err != nil || !c.ok && parley.ErrorCode(err) != parley.EFORBIDDEN {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
	for who, ok := range map[parley.Identity]bool{
		{Kind: parley.TokenAgent, AgentID: "carol"}:  true,
		{Kind: parley.TokenAgent, AgentID: "worker"}: true, // while delegated
		{Kind: parley.TokenAgent, AgentID: "bob"}:    false,
		{Kind: parley.TokenViewer}:                   true,
		{Kind: parley.TokenAdmin}:                    true,
	} {
		if err := s.CanRead(who); (err == nil) != ok {
			t.Errorf("%+v reads: %v, want ok %v", who, err, ok)
		}
	}
	// An admin-made conversation has no owner: "admin" is not an agent.
	s.Conversation.CreatedBy = "admin"
	if conv.Owner(s.Conversation) != "" || s.IsMember("admin") {
		t.Error("a conversation an admin made is owned by an agent named admin")
	}
}
