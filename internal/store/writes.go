package store

// What every backend shares around a write: idempotency records, import
// leases, and the checks and errors of appends.

import (
	"github.com/parleyhq/parley"
)

// Idempotency records the result of a write made with a client request id, so
// that a retry returns the original result.
type Idempotency struct {
	ConversationID string
	AgentID        string
	Key            string
	// RequestHash is a hash of the request body; a retry with another body is refused.
	RequestHash string
	// Seq is the seq of the first event the write appended.
	Seq int64
	// Response is the JSON result returned to the original request.
	Response []byte
	Time     parley.Time
}

// CheckLease returns EINVALID for a lease without an owner: an owner is
// what tells an import in progress from an ordinary conversation.
func CheckLease(l *ImportLease) error {
	if l != nil && l.Owner == "" {
		return parley.Errorf(parley.EINVALID, "an import lease needs an owner")
	}
	return nil
}

// ErrTaken is CreateConversation's EBUSY for an id that is taken: by a
// conversation, or by an import in progress.
func ErrTaken(id string, importing bool) error {
	if importing {
		return parley.Errorf(parley.EBUSY, "an import of conversation %s is in progress; try again once it has ended", id)
	}
	return parley.Errorf(parley.EBUSY, "conversation %s already exists", id)
}

// ErrIDTaken is the EBUSY of an append that takes an id already taken in
// its conversation (AppendParams.Names).
func ErrIDTaken(id string) error {
	return parley.Errorf(parley.EBUSY, "id %q already names a message or prompt of this conversation (ids are never reused, even once removed)", id).With("id", id)
}

// ErrImportLost is the EBUSY of a write by an importer whose import is no
// longer in progress under its owner: it was swept after its lease ended.
func ErrImportLost(id string) error {
	return parley.Errorf(parley.EBUSY, "the import of conversation %s was removed: its lease ended before it was renewed; import it again", id)
}

// OnceFor wraps the write an Exclusive gives its fn: it checks each append
// as Append does, for conversation id only, and at most once.
func OnceFor(id string, write func(AppendParams) error) func(AppendParams) error {
	used := false
	return func(p AppendParams) error {
		if used || p.ConversationID != id || p.Import != nil {
			return parley.Errorf(parley.EINTERNAL, "an exclusive write makes one append to conversation %s, not an import", id)
		}
		if err := CheckDense(p.Events, p.ExpectSeq); err != nil {
			return err
		}
		used = true
		return write(p)
	}
}

// AppendMiss explains why an Append's conditional update of the
// conversation's head matched no row, from that row as it is now: found
// false if there is none, importOwner "" unless it is an import in progress.
func AppendMiss(p AppendParams, found bool, head Head, importOwner string) error {
	switch {
	case p.Import != nil && (!found || importOwner != p.Import.Owner):
		return ErrImportLost(p.ConversationID)
	case !found || (p.Import == nil && importOwner != ""):
		return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", p.ConversationID)
	case p.Import == nil && p.Epoch != "" && head.Epoch != p.Epoch:
		return parley.Errorf(parley.ECONFLICT, "conversation %s was deleted and made again (epoch %s, not %s)", p.ConversationID, head.Epoch, p.Epoch)
	}
	return parley.Errorf(parley.ECONFLICT, "conversation %s is at seq %d, not %d", p.ConversationID, head.Seq, p.ExpectSeq)
}

// RemoveEach calls remove for each id in turn and returns the ids it
// removed (remove reports false for one it left alone), stopping at the
// first error: SweepImports removes each import in its own transaction.
func RemoveEach(ids []string, remove func(id string) (bool, error)) ([]string, error) {
	var removed []string
	for _, id := range ids {
		ok, err := remove(id)
		if err != nil {
			return removed, err
		}
		if ok {
			removed = append(removed, id)
		}
	}
	return removed, nil
}

// CheckDense returns EINVALID unless the events' seqs are after+1, after+2, …
// Every backend checks this before it writes.
func CheckDense(events []parley.Event, after int64) error {
	for i, e := range events {
		if want := after + int64(i) + 1; e.Seq != want {
			return parley.Errorf(parley.EINVALID, "event %d has seq %d, want %d: seqs must be dense", i, e.Seq, want)
		}
	}
	return nil
}

// MaxHeads bounds the conversations one Heads call names.
const MaxHeads = 1000

// CheckHeads refuses a Heads call over MaxHeads.
func CheckHeads(ids []string) error {
	if len(ids) > MaxHeads {
		return parley.Errorf(parley.EINVALIDVALUE, "Heads names %d conversations; at most %d at a time", len(ids), MaxHeads)
	}
	return nil
}
