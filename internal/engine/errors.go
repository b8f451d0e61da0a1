package engine

import "github.com/parleyhq/parley"

// errClosed ends subscriptions, runner connections and commands when the
// engine closes.
var errClosed = parley.Errorf(parley.EUNAVAILABLE, "server is shutting down; resume from the last position")

// errDeleted ends the subscriptions and runner connections of a deleted
// conversation.
func errDeleted(id string) *parley.Error {
	return parley.Errorf(parley.ENOTFOUND, "conversation %s was deleted", id)
}
