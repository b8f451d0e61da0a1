package conv

import (
	"slices"

	"github.com/parleyhq/parley"
)

// Who may do what in a conversation. A conversation says who takes part:
// its members are its participants and the agent that created it (its
// owner). An agent outside it neither reads nor writes it, but for the
// delegates of its open turn, who write into that turn (and read) while it
// is open. What an agent made (its messages, prompts, tasks) is changed or
// removed only by that agent, the conversation's owner or an admin; the
// asker of a prompt may stop the answer to it. Admins (and a server running
// open) may do everything; viewers read.
//
// These are pure functions of the state and the command, like the rest of
// the rules; the engine applies Authorize before Decide, on the same state.

// ReservedAgentIDs are names that no agent token may take: a conversation
// created by an admin (or a viewer) records the token's kind as its
// creator, which must never be mistaken for an agent.
var ReservedAgentIDs = []string{string(parley.TokenAdmin), string(parley.TokenViewer)}

// Owner is the agent that created the conversation, or "" if an admin did.
func Owner(c parley.Conversation) string {
	if slices.Contains(ReservedAgentIDs, c.CreatedBy) {
		return ""
	}
	return c.CreatedBy
}

// Members are the agents that take part in a conversation: its
// participants, its other members and its owner, without repeats.
func Members(c parley.Conversation) []string {
	ms := append(slices.Clone(c.Participants), c.Members...)
	if o := Owner(c); o != "" && !slices.Contains(ms, o) {
		ms = append(ms, o)
	}
	return ms
}

// IsMember reports whether agent takes part in the conversation.
func (s State) IsMember(agent string) bool {
	c := s.Conversation
	return agent != "" && (slices.Contains(c.Participants, agent) || slices.Contains(c.Members, agent) || agent == Owner(c))
}

// delegated reports whether agent is a delegate of the open turn.
func (s State) delegated(agent string) bool {
	return s.Open != nil && slices.Contains(s.Open.Delegates, agent)
}

// CanRead says whether who may read the conversation (its log, messages,
// streams and export): admins, viewers, its members, and the delegates of
// its open turn. It returns EFORBIDDEN otherwise.
func (s State) CanRead(who parley.Identity) error {
	if who.Kind != parley.TokenAgent || s.IsMember(who.AgentID) || s.delegated(who.AgentID) {
		return nil
	}
	return s.outsider(who.AgentID)
}

// CanManage reports whether the actor may change or remove something made
// by author in this conversation: its author, the conversation's owner, or
// an admin.
func (s State) CanManage(a Actor, author string) bool {
	return a.Admin || a.AgentID == author || (a.AgentID != "" && a.AgentID == Owner(s.Conversation))
}

func (s State) outsider(agent string) error {
	return parley.Errorf(parley.EFORBIDDEN, "agent %s does not take part in conversation %s: it is not one of its participants or members", agent, s.Conversation.ID)
}

// CanWrite says whether the actor takes part in the conversation: an
// admin, or one of its members. It returns EFORBIDDEN otherwise.
func (s State) CanWrite(a Actor) error { return s.take(a, false) }

// take checks that the actor takes part: an admin, a member, or, with
// delegate, a delegate of the open turn.
func (s State) take(a Actor, delegate bool) error {
	if a.Admin || s.IsMember(a.AgentID) || delegate && s.delegated(a.AgentID) {
		return nil
	}
	return s.outsider(a.AgentID)
}

// Authorize checks that the command's actor may issue it in this
// conversation, before the rules decide it. It returns EFORBIDDEN, or nil.
// Commands the engine issues on its own (dispatch, requeue, task runs,
// claim and turn expiry) have no actor to check.
func Authorize(s State, cmd Command) error {
	if cmd == nil {
		return nil
	}
	return cmd.authorize(s)
}

// Who may issue each command. A write into the open turn (a message, a
// trace, a delegation, a v1 stream) may come from a delegate of it; the
// rest need an agent that takes part, or an admin.

func (c PostMessage) authorize(s State) error {
	if c.Channel != nil && !c.Streaming && !c.Admin {
		// A streamed answer's channel is the rules' to check (a reply
		// goes to its prompt's channel, see postMessage).
		return errChannel("message")
	}
	return s.take(c.Actor, true)
}

func (c PostTrace) authorize(s State) error { return s.take(c.Actor, true) }
func (c Delegate) authorize(s State) error  { return s.take(c.Actor, true) }
func (c StreamV1) authorize(s State) error  { return s.take(c.Actor, true) }
func (c ClaimTurn) authorize(s State) error { return s.take(c.Actor, false) }
func (c ResetTurn) authorize(s State) error { return s.take(c.Actor, false) }
func (c AbortTurn) authorize(s State) error { return s.take(c.Actor, false) }

func (c EnqueuePrompt) authorize(s State) error {
	if c.Channel != nil && !c.Admin {
		return errChannel("prompt")
	}
	return s.take(c.Actor, false)
}

// A streaming message (and a prompt) is its writer's (runner's): the rules
// check that the actor is the one.

func (StreamText) authorize(State) error      { return nil }
func (StreamTool) authorize(State) error      { return nil }
func (FinalizeMessage) authorize(State) error { return nil }
func (CompletePrompt) authorize(State) error  { return nil }

// The engine issues these on its own.

func (ExpireClaim) authorize(State) error    { return nil }
func (ExpireTurn) authorize(State) error     { return nil }
func (RunTask) authorize(State) error        { return nil }
func (DispatchPrompt) authorize(State) error { return nil }
func (RequeuePrompt) authorize(State) error  { return nil }

func (c WithdrawPrompt) authorize(s State) error { return s.managePrompt(c.Actor, c.ID, "withdraw") }
func (c PromotePrompt) authorize(s State) error  { return s.managePrompt(c.Actor, c.ID, "promote") }

func (c AbortPrompt) authorize(s State) error {
	if err := s.take(c.Actor, false); err != nil {
		return err
	}
	a := s.Active()
	if a == nil || c.ID != "" && a.ID != c.ID || s.MayStop(c.Actor) {
		return nil // the rules say there is nothing to stop (or not that)
	}
	return parley.Errorf(parley.EFORBIDDEN, "the answer to prompt %s may be stopped by its asker %s, its runner %s, the conversation's owner or an admin; not by %s", a.ID, a.AgentID, a.Runner, c.AgentID)
}

func (c Revert) authorize(s State) error {
	if err := s.take(c.Actor, false); err != nil {
		return err
	}
	for i, id := range c.Known {
		author := "" // not known: only the owner or an admin may remove it
		if i < len(c.Authors) {
			author = c.Authors[i]
		}
		if !s.CanManage(c.Actor, author) {
			return parley.Errorf(parley.EFORBIDDEN, "the revert would remove message %s by %s; only its author, the conversation's owner or an admin may", id, author)
		}
	}
	return nil
}

// errChannel refuses a prompt or message that says it came from a channel
// (Slack, Telegram, …) from anyone but an admin: the answer to a prompt
// from a channel is posted to that channel's webhook, so who may name one
// may make the operator's webhook post to any channel. A channel's bridge
// posts its people's prompts, as each of them, with an admin token.
func errChannel(what string) error {
	return parley.Errorf(parley.EFORBIDDEN, "only an admin token may say a %s came from a channel: a channel's bridge posts its prompts, and a reply goes to the channel of the prompt it answers", what)
}

// MayStop reports whether the actor may stop the answer to the prompt
// being answered (with a stop, or a steer prompt): its asker, the runner
// answering it, the conversation's owner or an admin. With no prompt
// being answered there is nothing to stop, and it reports false.
func (s State) MayStop(a Actor) bool {
	p := s.Active()
	return p != nil && (s.CanManage(a, p.AgentID) || a.AgentID == p.Runner)
}

// managePrompt checks that the actor may withdraw or promote prompt id: its
// asker, the conversation's owner, or an admin. An unknown prompt is left
// to the rules (ENOTFOUND).
func (s State) managePrompt(a Actor, id, verb string) error {
	if err := s.take(a, false); err != nil {
		return err
	}
	i := slices.IndexFunc(s.Queue, func(p parley.QueuedPrompt) bool { return p.ID == id })
	if i < 0 || s.CanManage(a, s.Queue[i].AgentID) {
		return nil
	}
	return parley.Errorf(parley.EFORBIDDEN, "prompt %s was asked by %s; only it, the conversation's owner or an admin may %s it", id, s.Queue[i].AgentID, verb)
}
