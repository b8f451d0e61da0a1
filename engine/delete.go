package engine

import "context"

// DeleteConversation removes a conversation with everything in it: its
// log, message rows, prompts (they are in its state), idempotency records,
// outbox rows and scheduled tasks. Its live subscriptions end with a
// not_found error saying it was deleted, and its runner connections are
// sent that error and closed, so that nobody keeps writing into it: later
// commands get ENOTFOUND. The id is free again at once. It returns
// ENOTFOUND for an unknown conversation, and for an import in progress.
func (e *Engine) DeleteConversation(ctx context.Context, id string) error {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := e.store.DeleteConversation(ctx, id); err != nil {
		return err
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.loaded, c.streams = false, nil // a writer that waited for the lock reloads: ENOTFOUND
	e.mu.Lock()
	if e.convs[id] == c {
		delete(e.convs, id)
	}
	e.mu.Unlock()
	gone := errDeleted(id)
	e.hub.End(id, gone)
	e.runners.Deleted(id, gone)
	return nil
}
