package conv

import "github.com/parleyhq/parley"

// A chat protocol (the AI SDK's, AG-UI) asks a question as a prompt and
// shows its answer as it comes. These say, from the state alone, where a
// question and the answer under way stand in the queue.

// Asked finds prompt id in the queue, once its text is there: who asked
// it, and the position its answer is followed from (after its first
// prompt.queued event). ok is false when the queue does not hold it.
func (s State) Asked(id string) (asker string, from parley.Position, ok bool) {
	for _, p := range s.Queue {
		if p.ID == id && len(p.Parts) > 0 {
			asker, from, ok = p.AgentID, parley.Position{Seq: p.Parts[0], Epoch: s.Conversation.Epoch}, true
		}
	}
	return asker, from, ok
}

// PromptUnderWay is the prompt whose answer a chat's client should see
// coming: the prompt being answered, else the first one waiting; nil when
// the queue is empty.
func (s State) PromptUnderWay() *parley.QueuedPrompt {
	p := s.Active()
	if p == nil && len(s.Queue) > 0 {
		p = &s.Queue[0]
	}
	return p
}
