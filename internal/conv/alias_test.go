package conv_test

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestEvolveDoesNotShareTheCallersParticipants: folding conversation.created
// into a state must not write into a Participants array the caller holds.
func TestEvolveDoesNotShareTheCallersParticipants(t *testing.T) {
	t.Parallel()
	shared := make([]string, 2, 8)
	shared[0], shared[1] = "keep-a", "keep-b"
	base := conv.State{Conversation: parley.Conversation{Participants: shared}}
	data, _ := json.Marshal(parley.Conversation{ID: "c", Participants: []string{"x", "y"}})
	s := conv.Evolve(base, parley.Event{Seq: 1, Type: parley.EventConversationCreated, Data: data})
	if shared[0] != "keep-a" || shared[1] != "keep-b" {
		t.Fatalf("the caller's participants changed to %v", shared)
	}
	if len(s.Conversation.Participants) != 2 || s.Conversation.Participants[0] != "x" {
		t.Fatalf("evolved participants = %v", s.Conversation.Participants)
	}
}
