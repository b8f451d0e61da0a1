package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Search implements store.Store over the search column of messages
// (migration 00009), in one query: the newest store.SearchCandidates rows
// that match (PostgreSQL picks the GIN index for a rare word, or walks the
// newest rows for a common one, stopping once it has them), ranked by
// ts_rank (divided by one plus the log of the message's length, as bm25
// favours short messages), then the page of that ranking with each hit's
// row, its conversation's title and a snippet (ts_headline, with "…"
// where it starts or ends inside the text, as SQLite's snippet has).
func (db *DB) Search(ctx context.Context, p store.SearchParams) ([]parley.SearchHit, error) {
	hits := []parley.SearchHit{}
	terms, prefix := store.SearchTerms(p.Query)
	if len(terms) == 0 || p.Limit <= 0 || p.Offset < 0 || p.Offset >= store.SearchCandidates {
		return hits, nil
	}
	// Each term is a phrase of its words as PostgreSQL splits them (one
	// word: just the word); they are all parameters, never SQL.
	args := []any{store.SearchCandidates, p.Offset, p.Limit}
	qs := make([]string, len(terms))
	for i, t := range terms {
		if prefix && i == len(terms)-1 {
			qs[i] = prefixQuery(t, &args)
			continue
		}
		args = append(args, t)
		qs[i] = fmt.Sprintf("phraseto_tsquery('simple', $%d)", len(args))
	}
	tsq := "(" + strings.Join(qs, " && ") + ")"
	where := ""
	if p.ConversationID != "" {
		args = append(args, p.ConversationID)
		where += fmt.Sprintf(" AND m.conversation_id = $%d", len(args))
	}
	if p.Member != "" {
		args = append(args, p.Member)
		where += fmt.Sprintf(" AND EXISTS (SELECT 1 FROM conversation_members cm WHERE cm.conversation_id = m.conversation_id AND cm.agent_id = $%d)", len(args))
	}
	q := `WITH cand AS (
			SELECT m.conversation_id, m.id, m.search, m.search_order FROM messages m
			WHERE m.search @@ ` + tsq + where + `
				AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = m.conversation_id AND c.import_owner IS NULL)
			ORDER BY m.search_order DESC LIMIT $1
		), page AS (
			SELECT conversation_id, id, search_order, ts_rank(search, ` + tsq + `, 1) AS rank FROM cand
			ORDER BY rank DESC, search_order DESC OFFSET $2 LIMIT $3
		)
		SELECT p.rank, m.conversation_id, m.id, m.seq, m.agent_id,
			coalesce(mj.j->>'role', ''), coalesce(mj.j->>'createdAt', ''), coalesce(cj.j->>'title', ''),
			CASE WHEN h.at > 1 THEN '…' ELSE '' END || h.hl || CASE WHEN h.at + h.len <= length(b.body) THEN '…' ELSE '' END
		FROM page p JOIN messages m ON m.conversation_id = p.conversation_id AND m.id = p.id
			JOIN conversations c ON c.id = p.conversation_id
			CROSS JOIN LATERAL (SELECT ` + jsonOf("m.data") + ` AS j) mj CROSS JOIN LATERAL (SELECT ` + jsonOf("c.data") + ` AS j) cj
			CROSS JOIN LATERAL (SELECT message_search_text(m.data) AS body) b
			CROSS JOIN LATERAL (SELECT hl, position(plain IN b.body) AS at, length(plain) AS len FROM (
				SELECT hl, translate(hl, chr(2) || chr(3), '') AS plain FROM (
					SELECT ts_headline('simple', b.body, ` + tsq + `, 'StartSel=' || chr(2) || ', StopSel=' || chr(3) ||
						', MaxWords=` + strconv.Itoa(store.SnippetWords) + `, MinWords=` + strconv.Itoa(store.SnippetWords/2) + `, ShortWord=0, MaxFragments=1') AS hl) x) y) h
		ORDER BY p.rank DESC, p.search_order DESC`
	// Planned for these very values, each time (not a cached statement's
	// generic plan): whether a word is common or rare, and how many
	// messages the conversation has, decide the plan.
	rows, err := db.pool.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var h parley.SearchHit
		var rank float32
		var role, created, snippet string
		if err := rows.Scan(&rank, &h.ConversationID, &h.MessageID, &h.Seq, &h.AgentID, &role, &created, &h.ConversationTitle, &snippet); err != nil {
			return nil, err
		}
		h.Rank, h.Role, h.Snippet = float64(rank), parley.Role(role), parley.SplitSnippet(snippet)
		if created != "" {
			t, err := time.Parse(time.RFC3339Nano, created)
			if err != nil {
				return nil, fmt.Errorf("message %s has a bad time %q: %w", h.MessageID, created, err)
			}
			h.CreatedAt = parley.NewTime(t)
		}
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// prefixQuery is the tsquery of a term whose last word is a prefix
// (store.SplitPrefix): the phrase of the words before it, then that word
// as a prefix ('word':*, which to_tsquery reads: the word is letters and
// digits only, quoted all the same, so that no input is tsquery syntax).
// Its texts are parameters, appended to args.
func prefixQuery(term string, args *[]any) string {
	head, word, ok := store.SplitPrefix(term)
	if !ok {
		*args = append(*args, term)
		return fmt.Sprintf("phraseto_tsquery('simple', $%d)", len(*args))
	}
	*args = append(*args, tsQuote(word)+":*")
	last := fmt.Sprintf("to_tsquery('simple', $%d)", len(*args))
	if len(store.SearchWords(head)) == 0 {
		return last
	}
	*args = append(*args, head)
	return fmt.Sprintf("tsquery_phrase(phraseto_tsquery('simple', $%d), %s)", len(*args), last)
}

// tsQuote quotes a word for to_tsquery: in single quotes, with each quote
// doubled and each backslash escaped.
func tsQuote(w string) string {
	return "'" + strings.NewReplacer(`'`, `''`, `\`, `\\`).Replace(w) + "'"
}

// jsonOf is SQL that reads a row's JSON column (bytes) as jsonb, which
// refuses an escaped NUL character: each is made a space first, as the
// search index does (message_search_text). No store writes NUL now
// (store.CheckJSON), but a row written before may hold one, and a query
// that fails on it fails for everyone it reads for.
func jsonOf(col string) string {
	return `replace(convert_from(` + col + `, 'UTF8'), '\u0000', '\u0020')::jsonb`
}

// jsonOfText is jsonOf for a column of text.
func jsonOfText(col string) string {
	return `replace(` + col + `, '\u0000', '\u0020')::jsonb`
}
