package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// maxPage bounds every list read, whatever the caller asks.
const maxPage = 100_000

func clampLimit(n int) int {
	if n <= 0 || n > maxPage {
		return maxPage
	}
	return n
}

// querier runs queries: the read pool, or one read transaction of it.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// reader implements store.Reader over q: the DB's reads over its read
// pool, and ReadSnapshot's over one transaction.
type reader struct{ q querier }

// ReadSnapshot implements store.Store: a deferred transaction on one read
// connection, which reads the write-ahead log as it is when it first
// reads (which it does at once).
func (db *DB) ReadSnapshot(ctx context.Context, fn func(store.Reader) error) error {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return err
	}
	return fn(reader{q: tx})
}

// GetConversation implements store.Reader.
func (rd reader) GetConversation(ctx context.Context, id string) (*store.ConversationRecord, error) {
	row := rd.q.QueryRowContext(ctx, getConversationQuery, id)
	rec, err := scanConversation(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
	}
	return rec, err
}

// Head implements store.Store.
func (db *DB) Head(ctx context.Context, id string) (store.Head, error) {
	var h store.Head
	err := db.r.QueryRowContext(ctx, `SELECT h.last_seq, c.epoch FROM conversations c JOIN heads h ON h.conversation_id = c.id
		WHERE c.id = ? AND c.import_owner IS NULL`, id).Scan(&h.Seq, &h.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return h, parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
	}
	return h, err
}

// Heads implements store.Store.
func (db *DB) Heads(ctx context.Context, ids []string) (map[string]store.Head, error) {
	if err := store.CheckHeads(ids); err != nil {
		return nil, err
	}
	heads := make(map[string]store.Head, len(ids))
	if len(ids) == 0 {
		return heads, nil
	}
	idList, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, h.last_seq, c.epoch FROM conversations c JOIN heads h ON h.conversation_id = c.id
		WHERE c.import_owner IS NULL AND c.id IN (SELECT value FROM json_each(?))`, string(idList))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var h store.Head
		if err := rows.Scan(&id, &h.Seq, &h.Epoch); err != nil {
			return nil, err
		}
		heads[id] = h
	}
	return heads, rows.Err()
}

// getConversationQuery reads a conversation with its state and its prompt
// queue, kept apart in queues.
const getConversationQuery = `SELECT c.data, h.last_seq, c.state, q.queue FROM conversations c
	JOIN heads h ON h.conversation_id = c.id LEFT JOIN queues q ON q.conversation_id = c.id WHERE c.id = ? AND c.import_owner IS NULL`

// listConversationsQuery is ListConversations' query before its filters,
// cursor condition and order: the heads in order of last activity, from
// their index, each joined to its conversation.
const listConversationsQuery = `SELECT c.data, h.last_seq, c.state, q.queue, h.last_at, h.conversation_id FROM heads h
	JOIN conversations c ON c.id = h.conversation_id LEFT JOIN queues q ON q.conversation_id = c.id WHERE c.import_owner IS NULL`

// dataJSON is a conversation's stored record as JSON text.
const dataJSON = `CAST(c.data AS TEXT)`

// cursorPrefix marks the cursors of the list by last activity, apart
// from those of the list by creation that came before it.
const cursorPrefix = "a|"

func scanConversation(row interface{ Scan(...any) error }) (*store.ConversationRecord, error) {
	var data []byte
	rec := &store.ConversationRecord{}
	if err := row.Scan(&data, &rec.LastSeq, &rec.State, &rec.Queue); err != nil {
		return nil, err
	}
	return rec, json.Unmarshal(data, &rec.Conversation)
}

// ListConversations implements store.Store. The pages are read from the
// heads' index by last activity; each filter is a condition on the rows
// read in that order (the member's on its index, the others on the stored
// record's JSON), so a narrow filter reads as many rows as it passes by.
// The cursor encodes the (last_at, id) of the previous page's last row.
func (db *DB) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]*store.ConversationRecord, string, error) {
	if err := store.CheckListFilters(p); err != nil {
		return nil, "", err
	}
	limit := clampLimit(p.Limit)
	q := listConversationsQuery
	args := []any{}
	if p.Member != "" {
		q += ` AND EXISTS (SELECT 1 FROM conversation_members m WHERE m.conversation_id = h.conversation_id AND m.agent_id = ?)`
		args = append(args, p.Member)
	}
	if p.Title != "" {
		// SQLite's LIKE ignores the case of ASCII letters.
		q += ` AND json_extract(c.data, '$.title') LIKE ? ESCAPE '\'`
		args = append(args, "%"+store.LikeEscape(p.Title)+"%")
	}
	if p.Participant != "" {
		q += ` AND EXISTS (SELECT 1 FROM json_each(` + dataJSON + `, '$.participants') j WHERE j.value = ? AND j.type = 'text')`
		args = append(args, p.Participant)
	}
	if a := p.Involves; a != "" {
		q += ` AND (json_extract(` + dataJSON + `, '$.createdBy') = ?
			OR EXISTS (SELECT 1 FROM json_each(` + dataJSON + `, '$.participants') j WHERE j.value = ? AND j.type = 'text')
			OR EXISTS (SELECT 1 FROM json_each(` + dataJSON + `, '$.members') j WHERE j.value = ? AND j.type = 'text'))`
		args = append(args, a, a, a)
	}
	for _, m := range p.Metadata {
		// json_each's key, not a path: a key needs no quoting in it.
		q += ` AND EXISTS (SELECT 1 FROM json_each(` + dataJSON + `, '$.metadata') j WHERE j.key = ? AND j.type = 'text' AND j.value = ?)`
		args = append(args, m.Key, m.Value)
	}
	if p.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		rest, prefixed := strings.CutPrefix(string(raw), cursorPrefix)
		at, id, ok := strings.Cut(rest, "|")
		if err != nil || !ok || !prefixed {
			return nil, "", parley.Errorf(parley.EINVALID, "cursor %q is not one this server made", p.Cursor)
		}
		q += ` AND (h.last_at, h.conversation_id) < (?, ?)`
		args = append(args, at, id)
	}
	q += ` ORDER BY h.last_at DESC, h.conversation_id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var lastAt, lastID string
	recs, full, err := store.ReadConversations(rows, limit, p.MaxBytes, &lastAt, &lastID)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if full {
		next = base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + lastAt + "|" + lastID))
	}
	return recs, next, nil
}

// ReadEvents implements store.Reader. A compacted span is one row, stored
// at its last seq, so that the rows after a position are those after it
// in the index whether or not the position is inside a span.
func (rd reader) ReadEvents(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	limit := clampLimit(p.Limit)
	rows, err := rd.q.QueryContext(ctx, `SELECT e.seq, e.type, e.turn, e.turn_id, e.agent_id, e.finality, e.ts, e.data, e.ref,
			CASE WHEN e.ref IS NOT NULL THEN (SELECT m.data FROM messages m WHERE m.conversation_id = e.conversation_id AND m.id = e.ref) END
		FROM events e WHERE e.conversation_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?`, p.ConversationID, p.After, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadEvents(rows, store.NewEventPage(p, limit), p.ConversationID, parseTime)
}

// GetMessage implements store.Reader.
func (rd reader) GetMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	var data []byte
	err := rd.q.QueryRowContext(ctx, `SELECT data FROM messages WHERE conversation_id = ? AND id = ?`, conversationID, messageID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NoMessage(conversationID, messageID)
	}
	if err != nil {
		return nil, err
	}
	var m parley.Message
	_, err = store.DecodeRow(data, &m)
	return &m, err
}

// ListMessages implements store.Reader. Each filter has its own index.
func (rd reader) ListMessages(ctx context.Context, p store.ListMessagesParams) ([]*parley.Message, error) {
	return store.DecodedRows(rd.scanRows(ctx, p))
}

// ListMessagesRaw implements store.Reader.
func (rd reader) ListMessagesRaw(ctx context.Context, p store.ListMessagesParams) ([]store.RawMessage, error) {
	return store.RawRows(rd.scanRows(ctx, p))
}

// scanRows reads the rows ListMessages reads for p (see
// store.EachMessageRow).
func (rd reader) scanRows(ctx context.Context, p store.ListMessagesParams) store.RowScan {
	return func(visit func(data []byte, seq int64) (int, error)) error {
		q, args := listQuery(p, "data, seq", "data, seq")
		rows, err := rd.q.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return store.EachMessageRow(rows, p, visit)
	}
}

// listQuery is the query of ListMessages for p, reading columns (named
// names in its result).
func listQuery(p store.ListMessagesParams, columns, names string) (string, []any) {
	q := `SELECT ` + columns + ` FROM messages WHERE conversation_id = ? AND seq > ?`
	args := []any{p.ConversationID, p.After}
	if p.TurnID != "" {
		q += ` AND turn_id = ?`
		args = append(args, p.TurnID)
	}
	if p.AgentID != "" {
		q += ` AND agent_id = ?`
		args = append(args, p.AgentID)
	}
	if p.Before > 0 {
		q += ` AND seq < ?`
		args = append(args, p.Before)
	}
	if p.Latest {
		q = `SELECT ` + names + ` FROM (` + q + ` ORDER BY seq DESC LIMIT ?) ORDER BY seq`
	} else {
		q = `SELECT ` + names + ` FROM (` + q + ` ORDER BY seq LIMIT ?)`
	}
	return q, append(args, clampLimit(p.Limit))
}

// GetIdempotency implements store.Store.
func (db *DB) GetIdempotency(ctx context.Context, conversationID, agentID, key string) (*store.Idempotency, error) {
	k := &store.Idempotency{ConversationID: conversationID, AgentID: agentID, Key: key}
	var ts string
	err := db.r.QueryRowContext(ctx, `SELECT request_hash, seq, response, ts FROM idempotency WHERE conversation_id = ? AND agent_id = ? AND key = ?`,
		conversationID, agentID, key).Scan(&k.RequestHash, &k.Seq, &k.Response, &ts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "no write with client request id %q", key)
	}
	if err != nil {
		return nil, err
	}
	k.Time, err = parseTime(ts)
	return k, err
}

// IDTaken implements store.Store.
func (db *DB) IDTaken(ctx context.Context, conversationID, id string) (bool, error) {
	var one int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM names WHERE conversation_id = ? AND id = ?`, conversationID, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
