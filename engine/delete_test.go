package engine_test

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/engine"
)

// TestDeleteEndsSubscriptions: a subscription of a deleted conversation
// ends with not_found, and later commands get not_found too.
func TestDeleteEndsSubscriptions(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree, "a")
	sub, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.eng.DeleteConversation(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	for range sub.C {
	}
	if err := sub.Err(); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the subscription ended with %v, want not_found", err)
	}
	if _, err := b.eng.Conversation(b.ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("reading a deleted conversation: %v", err)
	}
	if err := b.eng.DeleteConversation(b.ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("deleting it again: %v", err)
	}
}
