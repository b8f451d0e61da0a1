package engine

import "context"

// DeleteConversation removes a conversation with everything in it: its
// log, message rows, prompts (they are in its state), idempotency records,
// outbox rows and scheduled tasks. Its live subscriptions end with a
// not_found error saying it was deleted, and its runner connections are
// sent that error and closed, so that nobody keeps writing into it: later
// commands get ENOTFOUND. The id is free again at once. It returns
// ENOTFOUND for an unknown conversation, and for an import in progress.
// Other nodes sharing the store do the same with their subscribers and
// runners as soon as they hear of it (see drop).
func (e *Engine) DeleteConversation(ctx context.Context, id string) error {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := e.store.DeleteConversation(ctx, id); err != nil {
		return err
	}
	e.drop(c, id)
	return nil
}

// drop forgets a cached conversation that the store no longer holds as it
// was cached: it was deleted, on this node or another, and perhaps made
// again under the same id (another epoch). Its timers stop, its entry
// leaves the cache (a writer that waited for it loads what the store
// holds now: ENOTFOUND, or the conversation made again under its id), its
// subscriptions here end with not_found, and its runner connections are
// sent that and closed. Nothing of it, cached before, is ever answered or
// decided on again. It returns the not_found error they were ended with,
// for the caller that found the conversation gone. c.mu must be held.
func (e *Engine) drop(c *conversation, id string) error {
	c.stopTimers()
	c.timer, c.turnTimer, c.inputTimer = nil, nil, nil
	c.loaded, c.dropped, c.streams, c.guided, c.published = false, true, nil, nil, 0
	// Its runners and subscribers are ended while it is still the cache's
	// entry: one that joins meanwhile waits for it, and then joins what
	// the store holds now (see feed.Hub.End). The runners are told first,
	// so that whoever sees a subscription end knows the runners were told.
	err := errDeleted(id)
	e.runners.Deleted(id, err)
	e.hub.End(id, err)
	e.cache.uncache(id, c)
	return err
}

// dropStale drops the cached conversation of id unless it is of epoch: a
// conversation was just made under that id, so one cached of another
// epoch was deleted (on another node), and its subscribers here must not
// get the new one's events.
func (e *Engine) dropStale(id, epoch string) {
	e.cache.withLoaded(id, func(c *conversation) {
		if c.state.Conversation.Epoch != epoch {
			e.drop(c, id)
		}
	})
}
