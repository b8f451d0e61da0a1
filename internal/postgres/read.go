package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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

// querier runs queries: the pool, or one read transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader implements store.Reader over q: the DB's reads over its pool,
// and ReadSnapshot's over one transaction.
type reader struct{ q querier }

// ReadSnapshot implements store.Store: a REPEATABLE READ READ ONLY
// transaction, whose snapshot is taken by its first statement (at once).
func (db *DB) ReadSnapshot(ctx context.Context, fn func(store.Reader) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		return err
	}
	return fn(reader{q: tx})
}

// GetConversation implements store.Reader.
func (rd reader) GetConversation(ctx context.Context, id string) (*store.ConversationRecord, error) {
	var data []byte
	rec := &store.ConversationRecord{}
	err := rd.q.QueryRow(ctx, `SELECT c.data, c.last_seq, c.state, q.queue FROM conversations c
		LEFT JOIN queues q ON q.conversation_id = c.id WHERE c.id = $1 AND c.import_owner IS NULL`, id).Scan(&data, &rec.LastSeq, &rec.State, &rec.Queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	return rec, json.Unmarshal(data, &rec.Conversation)
}

// Head implements store.Store.
func (db *DB) Head(ctx context.Context, id string) (store.Head, error) {
	var h store.Head
	err := db.pool.QueryRow(ctx, `SELECT last_seq, epoch FROM conversations WHERE id = $1 AND import_owner IS NULL`, id).Scan(&h.Seq, &h.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := db.pool.Query(ctx, `SELECT id, last_seq, epoch FROM conversations WHERE id = ANY($1) AND import_owner IS NULL`, ids)
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

// cursorPrefix marks the cursors of the list by last activity, apart
// from those of the list by creation that came before it.
const cursorPrefix = "a|"

// ListConversations implements store.Store. The pages are read from the
// index by last activity; each filter is a condition on the rows read in
// that order (the member's on its index, the others on the stored
// record's JSON, by containment), so a narrow filter reads as many rows as
// it passes by. The cursor holds the (last_event_at, id) of the previous
// page's last row.
func (db *DB) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]*store.ConversationRecord, string, error) {
	if err := store.CheckListFilters(p); err != nil {
		return nil, "", err
	}
	limit := clampLimit(p.Limit)
	q := `SELECT c.data, c.last_seq, c.state, q.queue, c.last_event_at, c.id FROM conversations c
		LEFT JOIN queues q ON q.conversation_id = c.id WHERE c.import_owner IS NULL`
	args := []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Member != "" {
		q += ` AND EXISTS (SELECT 1 FROM conversation_members m WHERE m.conversation_id = c.id AND m.agent_id = ` + arg(p.Member) + `)`
	}
	if p.Title != "" {
		// ILIKE ignores case as the locale has it; SQLite ignores only
		// ASCII letters' (store.ListConversationsParams says the least).
		q += ` AND ` + jsonOf("c.data") + `->>'title' ILIKE ` + arg("%"+store.LikeEscape(p.Title)+"%") + ` ESCAPE '\'`
	}
	// Containment: {"participants": ["a"]} is in the record if "a" is
	// among its participants; {"metadata": {"k": "v"}} if its metadata has
	// k with the string "v".
	has := func(field string, v any) string {
		return jsonOf("c.data") + ` @> jsonb_build_object('` + field + `', ` + arg(v) + `::jsonb)`
	}
	list := func(v string) string {
		b, _ := json.Marshal([]string{v})
		return string(b)
	}
	if p.Participant != "" {
		q += ` AND ` + has("participants", list(p.Participant))
	}
	if a := p.Involves; a != "" {
		q += ` AND (` + jsonOf("c.data") + `->>'createdBy' = ` + arg(a) + ` OR ` + has("participants", list(a)) + ` OR ` + has("members", list(a)) + `)`
	}
	for _, m := range p.Metadata {
		b, _ := json.Marshal(map[string]string{m.Key: m.Value})
		q += ` AND ` + has("metadata", string(b))
	}
	if p.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		rest, prefixed := strings.CutPrefix(string(raw), cursorPrefix)
		at, id, ok := strings.Cut(rest, "|")
		t, terr := time.Parse(time.RFC3339Nano, at)
		if err != nil || !ok || !prefixed || terr != nil {
			return nil, "", parley.Errorf(parley.EINVALID, "cursor %q is not one this server made", p.Cursor)
		}
		q += ` AND (c.last_event_at, c.id) < (` + arg(t) + `, ` + arg(id) + `)`
	}
	q += ` ORDER BY c.last_event_at DESC, c.id DESC LIMIT ` + strconv.Itoa(limit)
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var lastAt time.Time
	var lastID string
	recs, full, err := store.ReadConversations(rows, limit, p.MaxBytes, &lastAt, &lastID)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if full {
		next = base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + lastAt.UTC().Format(time.RFC3339Nano) + "|" + lastID))
	}
	return recs, next, nil
}

// readEventsQuery reads a page of a log. The row of an event that refers
// to one is read by a subquery, row by row: as a join, the planner may read
// every message and every event after the position to return one page (it
// did on a table without statistics yet).
const readEventsQuery = `SELECT e.seq, e.type, e.turn, e.turn_id, e.agent_id, e.finality, e.ts, e.data, e.ref,
		CASE WHEN e.ref IS NOT NULL THEN (SELECT m.data FROM messages m WHERE m.conversation_id = e.conversation_id AND m.id = e.ref) END
	FROM events e WHERE e.conversation_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3`

// ReadEvents implements store.Reader. A compacted span is one row, stored
// at its last seq, so that the rows after a position are those after it
// in the index whether or not the position is inside a span.
func (rd reader) ReadEvents(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	limit := clampLimit(p.Limit)
	rows, err := rd.q.Query(ctx, readEventsQuery, p.ConversationID, p.After, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	at := func(ts *time.Time) (parley.Time, error) { return fromTS(ts), nil }
	return store.ReadEvents(rows, store.NewEventPage(p, limit), p.ConversationID, at)
}

// GetMessage implements store.Reader.
func (rd reader) GetMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	ms, err := rd.queryMessages(ctx, 0, `SELECT data FROM messages WHERE conversation_id = $1 AND id = $2`, conversationID, messageID)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, store.NoMessage(conversationID, messageID)
	}
	return ms[0], nil
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
		rows, err := rd.q.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return store.EachMessageRow(rows, p, visit)
	}
}

// queryMessages reads the messages of the rows of one column q reads,
// up to maxBytes (see store.ReadMessages).
func (rd reader) queryMessages(ctx context.Context, maxBytes int, q string, args ...any) ([]*parley.Message, error) {
	rows, err := rd.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadMessages(rows, maxBytes)
}

// listQuery is the query of ListMessages for p, reading columns (named
// names in its result).
func listQuery(p store.ListMessagesParams, columns, names string) (string, []any) {
	q := `SELECT ` + columns + ` FROM messages WHERE conversation_id = $1 AND seq > $2`
	args := []any{p.ConversationID, p.After}
	if p.TurnID != "" {
		args = append(args, p.TurnID)
		q += ` AND turn_id = $` + strconv.Itoa(len(args))
	}
	if p.AgentID != "" {
		args = append(args, p.AgentID)
		q += ` AND agent_id = $` + strconv.Itoa(len(args))
	}
	if p.Before > 0 {
		args = append(args, p.Before)
		q += ` AND seq < $` + strconv.Itoa(len(args))
	}
	args = append(args, clampLimit(p.Limit))
	limit := ` LIMIT $` + strconv.Itoa(len(args))
	if p.Latest {
		q = `SELECT ` + names + ` FROM (` + q + ` ORDER BY seq DESC` + limit + `) newest ORDER BY seq`
	} else {
		q = `SELECT ` + names + ` FROM (` + q + ` ORDER BY seq` + limit + `) page ORDER BY seq`
	}
	return q, args
}

// GetIdempotency implements store.Store.
func (db *DB) GetIdempotency(ctx context.Context, conversationID, agentID, key string) (*store.Idempotency, error) {
	k := &store.Idempotency{ConversationID: conversationID, AgentID: agentID, Key: key}
	var ts *time.Time
	err := db.pool.QueryRow(ctx, `SELECT request_hash, seq, response, ts FROM idempotency WHERE conversation_id = $1 AND agent_id = $2 AND key = $3`,
		conversationID, agentID, key).Scan(&k.RequestHash, &k.Seq, &k.Response, &ts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "no write with client request id %q", key)
	}
	k.Time = fromTS(ts)
	return k, err
}

// IDTaken implements store.Store.
func (db *DB) IDTaken(ctx context.Context, conversationID, id string) (bool, error) {
	var one int
	err := db.pool.QueryRow(ctx, `SELECT 1 FROM names WHERE conversation_id = $1 AND id = $2`, conversationID, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

const tokenColumns = `id, kind, agent_id, name, hash, created_at, revoked_at`

func scanToken(row store.Scanner) (*parley.Token, error) {
	return store.ReadToken(row, func(t *time.Time) (parley.Time, error) { return fromTS(t), nil })
}

// TokenByHash implements store.Store.
func (db *DB) TokenByHash(ctx context.Context, hash string) (*parley.Token, error) {
	t, err := scanToken(db.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "no such token")
	}
	return t, err
}

// ListTokens implements store.Store.
func (db *DB) ListTokens(ctx context.Context) ([]*parley.Token, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, scanToken)
}

// CountTokens implements store.Store.
func (db *DB) CountTokens(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM tokens WHERE revoked_at IS NULL`).Scan(&n)
	return n, err
}
