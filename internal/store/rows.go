package store

import (
	"encoding/json"

	"github.com/parleyhq/parley"
)

// Both backends read their query results here: what a row holds, and where
// a page of rows ends, is the same whichever database it came from; only
// the queries and how each database holds a time differ.

// Scanner is one row: database/sql's *sql.Row and *sql.Rows, pgx's Row and
// Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a query's rows, as database/sql's and pgx's rows both are. The
// caller closes them.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Collect reads every row with read, in order.
func Collect[T any](rows Rows, read func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := read(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ReadString reads a row of one text column.
func ReadString(row Scanner) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}

// ReadTask reads a row of one column, a task's JSON.
func ReadTask(row Scanner) (*parley.Task, error) {
	var data []byte
	if err := row.Scan(&data); err != nil {
		return nil, err
	}
	t := &parley.Task{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, err
	}
	return t, nil
}

// ReadRunnerLease reads a row of a runner lease: node, conversation id,
// agent id.
func ReadRunnerLease(row Scanner) (RunnerLease, error) {
	var r RunnerLease
	err := row.Scan(&r.Node, &r.ConversationID, &r.AgentID)
	return r, err
}

// ReadToken reads a row of a token: id, kind, agent id, name, hash, and
// when it was created and revoked, each scanned into a T that at turns
// into a time (a revoked_at that is NULL into the zero time).
func ReadToken[T any](row Scanner, at func(T) (parley.Time, error)) (*parley.Token, error) {
	t := &parley.Token{}
	var kind string
	var created, revoked T
	if err := row.Scan(&t.ID, &kind, &t.AgentID, &t.Name, &t.Hash, &created, &revoked); err != nil {
		return nil, err
	}
	t.Kind = parley.TokenKind(kind)
	var err error
	if t.CreatedAt, err = at(created); err != nil {
		return nil, err
	}
	t.RevokedAt, err = at(revoked)
	return t, err
}

// ReadMessages reads rows of one column, a message row (see DecodeRow),
// ending after the one that brings the messages' size to maxBytes (0: no
// bound).
func ReadMessages(rows Rows, maxBytes int) ([]*parley.Message, error) {
	var out []*parley.Message
	size := 0
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		m := &parley.Message{}
		n, err := DecodeRow(data, m)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		if size += n; maxBytes > 0 && size >= maxBytes {
			break // the rest waits for the next read
		}
	}
	return out, rows.Err()
}

// EachMessageRow hands each row of a ListMessages query for p (a message
// row and its seq) to each, which returns the size it counts (see
// RowScan), until the rows end or the sizes reach p.MaxBytes (a page of
// the latest rows is not cut so: it ends at the newest).
func EachMessageRow(rows Rows, p ListMessagesParams, each func(data []byte, seq int64) (int, error)) error {
	size := 0
	for rows.Next() {
		var data []byte
		var seq int64
		if err := rows.Scan(&data, &seq); err != nil {
			return err
		}
		n, err := each(data, seq)
		if err != nil {
			return err
		}
		if size += n; p.MaxBytes > 0 && !p.Latest && size >= p.MaxBytes {
			break // the rest of the page waits for the next read
		}
	}
	return rows.Err()
}

// ReadConversations reads the rows of a ListConversations query: a
// conversation's JSON, last seq, state and queue, then the two columns of
// its cursor, scanned into at and id (those of the last row read). full
// says the page ended before the rows did (limit rows, or maxBytes), so
// that the next page starts after the last row.
func ReadConversations(rows Rows, limit, maxBytes int, at any, id *string) (recs []*ConversationRecord, full bool, err error) {
	size := 0
	for rows.Next() {
		var data []byte
		rec := &ConversationRecord{}
		if err := rows.Scan(&data, &rec.LastSeq, &rec.State, &rec.Queue, at, id); err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal(data, &rec.Conversation); err != nil {
			return nil, false, err
		}
		recs = append(recs, rec)
		size += len(data) + len(rec.State) + len(rec.Queue)
		if full = PageFull(len(recs), limit, size, maxBytes); full {
			break // the rest waits for the next page
		}
	}
	return recs, full, rows.Err()
}

// ReadEvents reads the rows of a ReadEvents query into page: seq, type,
// turn, turn id, agent id, finality, time (scanned into a T that at turns
// into the event's), data, the message id the event refers to (NULL if
// none) and that message's row.
func ReadEvents[T any](rows Rows, page *EventPage, conversationID string, at func(T) (parley.Time, error)) ([]parley.Event, error) {
	for rows.Next() {
		e := parley.Event{ConversationID: conversationID}
		var fin string
		var ts T
		var data, row []byte
		var ref *string
		if err := rows.Scan(&e.Seq, &e.Type, &e.Turn, &e.TurnID, &e.AgentID, &fin, &ts, &data, &ref, &row); err != nil {
			return nil, err
		}
		var err error
		if ref != nil {
			if data, err = RefData(e.Seq, *ref, row); err != nil {
				return nil, err
			}
		}
		e.Finality, e.Data = parley.Finality(fin), data
		if e.Time, err = at(ts); err != nil {
			return nil, err
		}
		if page.Add(e) {
			break // the rest of the page waits for the next read
		}
	}
	return page.Events, rows.Err()
}

// EachWalked hands each row of a thread's walk (level, id, seq, size) to
// visit (see WalkScan).
func EachWalked(rows Rows, visit func(level int, r RowRef)) error {
	for rows.Next() {
		var level int
		var r RowRef
		if err := rows.Scan(&level, &r.ID, &r.Seq, &r.Size); err != nil {
			return err
		}
		visit(level, r)
	}
	return rows.Err()
}

// EachRowByID hands each row of message ids and rows to each (see
// RowReader).
func EachRowByID(rows Rows, each func(id string, data []byte) error) error {
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return err
		}
		if err := each(id, data); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ReadMessageKey reads a row of a message's key: id, seq, turn id, agent
// id, the id it replies to ("" for none) and its depth.
func ReadMessageKey(row Scanner) (MessageKey, error) {
	var k MessageKey
	err := row.Scan(&k.ID, &k.Seq, &k.TurnID, &k.AgentID, &k.ReplyTo, &k.Depth)
	return k, err
}
