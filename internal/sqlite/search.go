package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Search tuning. FTS5's bm25 weighs each term by the number of rows that
// have it, which it counts by reading the term's whole list of rows: for a
// word in most of a million messages, that alone takes longer than a
// search may. So a word's rows are counted only up to commonRows; a term
// none of whose words is rarer than that is left out of the ranking (bm25
// gives a word in more than half the rows no weight anyway), and a search
// of such terms alone ranks its hits newest first.
const (
	commonRows = 100_000
	// weighedWords is the most words of a search that are counted: a
	// term whose words are all past them is left out of the ranking.
	weighedWords = 8
	// memberTerms is the most conversations of an agent that a search of
	// its conversations names in the index query; an agent in more is
	// searched by checking each row found instead.
	memberTerms = 500
)

// convTerm is the index's word for a conversation (the view
// message_search_text makes it): U+E000 and the id in hex. No word of a
// message's text can equal it once private-use characters are out of the
// search's terms, and the index query names it in the conv column only.
func convTerm(id string) string {
	return "conv : \"\ue000" + hex.EncodeToString([]byte(id)) + "\""
}

// phrase quotes a term for FTS5: inside quotes only a quote is special,
// and it is doubled; FTS5 splits the rest into words as it splits the text.
// The term has no private-use character (store.SearchTerms), so that it
// cannot be a conversation's word (convTerm).
func phrase(term string) string {
	return `"` + strings.ReplaceAll(term, `"`, `""`) + `"`
}

// andTerms is the FTS5 query of these terms, all of them; if prefix, the
// last term's last word is a prefix (FTS5 marks a phrase's last word so
// when a star follows the phrase).
func andTerms(terms []string, prefix bool) string {
	qs := make([]string, len(terms))
	for i, t := range terms {
		qs[i] = phrase(t)
	}
	if prefix && len(qs) > 0 {
		qs[len(qs)-1] += "*"
	}
	return "(" + strings.Join(qs, " AND ") + ")"
}

// Search implements store.Store over the FTS5 index message_search
// (migration 00009). It first indexes the rows noted for the index (see
// searchindex.go), then reads in one read transaction: it counts each word's rows
// up to commonRows; takes the newest store.SearchCandidates rows that
// match, from the index in rowid order (so that it stops there however
// many match); ranks them by bm25 over the terms that are not common; and
// reads the page's rows with their snippets.
func (db *DB) Search(ctx context.Context, p store.SearchParams) ([]parley.SearchHit, error) {
	hits := []parley.SearchHit{}
	terms, prefix := store.SearchTerms(p.Query)
	if len(terms) == 0 || p.Limit <= 0 || p.Offset < 0 || p.Offset >= store.SearchCandidates {
		return hits, nil
	}
	if err := db.indexBeforeSearch(ctx); err != nil {
		return nil, err
	}
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ranked, rankPrefix, found, err := rankedTerms(ctx, tx, terms, prefix)
	if err != nil || !found {
		return hits, err
	}
	cands, candMatch, err := candidates(ctx, tx, terms, prefix, p)
	if err != nil || len(cands) == 0 {
		return hits, err
	}
	scores := map[int64]float64{}
	if len(ranked) > 0 {
		match := andTerms(ranked, rankPrefix)
		if p.ConversationID != "" {
			// Only the conversation's rows, however long ago it began.
			match = convTerm(p.ConversationID) + " AND " + match
		}
		if scores, err = bm25(ctx, tx, match, cands[len(cands)-1], cands[0]); err != nil {
			return nil, err
		}
	}
	// Best first, then newest first (cands is newest first, and the sort is stable).
	slices.SortStableFunc(cands, func(a, b int64) int {
		sa, sb := scores[a], scores[b]
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	if p.Offset >= len(cands) {
		return hits, nil
	}
	page := cands[p.Offset:min(len(cands), p.Offset+p.Limit)]
	if prefix {
		return readHits(ctx, tx, candMatch, true, page, scores)
	}
	return readHits(ctx, tx, andTerms(terms, false), false, page, scores)
}

// rankedTerms returns the terms to rank by: those with a word in at most
// commonRows rows, of the first weighedWords words (the last word of the
// last term counted as a prefix if prefix is set; rankPrefix says the
// last ranked term is that one). found is false if a word is in no row at
// all, so that nothing can match.
func rankedTerms(ctx context.Context, tx *sql.Tx, terms []string, prefix bool) (ranked []string, rankPrefix, found bool, err error) {
	counts := map[string]int{}
	for i, t := range terms {
		rare := false
		words := store.SearchWords(t)
		for j, w := range words {
			query := phrase(w)
			if prefix && i == len(terms)-1 && j == len(words)-1 {
				query += "*"
			}
			n, ok := counts[query]
			if !ok && len(counts) == weighedWords {
				continue
			}
			if !ok {
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM message_search WHERE message_search MATCH ? LIMIT ?)`,
					query, commonRows+1).Scan(&n); err != nil {
					return nil, false, false, err
				}
				counts[query] = n
			}
			if n == 0 {
				return nil, false, false, nil
			}
			rare = rare || n <= commonRows
		}
		if rare {
			ranked = append(ranked, t)
			rankPrefix = prefix && i == len(terms)-1
		}
	}
	return ranked, rankPrefix, true, nil
}

// candidates returns the rowids of the newest store.SearchCandidates rows
// that have terms, newest first: rows of conversations that are not imports
// in progress, in p.ConversationID or of p.Member's conversations if set;
// and the FTS5 query that found them (of those conversations, as the index
// can tell them).
func candidates(ctx context.Context, tx *sql.Tx, terms []string, prefix bool, p store.SearchParams) ([]int64, string, error) {
	match := andTerms(terms, prefix)
	if p.ConversationID != "" {
		match = convTerm(p.ConversationID) + " AND " + match
	}
	q := `SELECT f.rowid FROM message_search f CROSS JOIN messages m ON m.rowid = f.rowid CROSS JOIN conversations c ON c.id = m.conversation_id
		WHERE message_search MATCH ?1 AND c.import_owner IS NULL`
	args := []any{"", store.SearchCandidates}
	if p.Member != "" {
		q += ` AND EXISTS (SELECT 1 FROM conversation_members cm WHERE cm.conversation_id = m.conversation_id AND cm.agent_id = ?3)`
		args = append(args, p.Member)
		// An agent in few conversations: the index finds the rows of
		// those alone, instead of every row that matches.
		ids, err := memberConversations(ctx, tx, p.Member)
		if err != nil {
			return nil, "", err
		}
		if len(ids) == 0 {
			return nil, "", nil
		}
		if len(ids) <= memberTerms {
			convs := make([]string, len(ids))
			for i, id := range ids {
				convs[i] = convTerm(id)
			}
			match = "(" + strings.Join(convs, " OR ") + ") AND " + match
		}
	}
	args[0] = match
	rows, err := column[int64](ctx, tx, q+` ORDER BY f.rowid DESC LIMIT ?2`, args...)
	return rows, match, err
}

// memberConversations returns up to memberTerms+1 of the conversations
// agent takes part in.
func memberConversations(ctx context.Context, tx *sql.Tx, agent string) ([]string, error) {
	return column[string](ctx, tx, `SELECT conversation_id FROM conversation_members WHERE agent_id = ? LIMIT ?`, agent, memberTerms+1)
}

// column returns the one column of the rows a query reads.
func column[T any](ctx context.Context, tx *sql.Tx, q string, args ...any) ([]T, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// bm25 returns the bm25 rank (higher is better) of the rows from rowid lo
// to hi that match: no more rows than its rarest term has, which is at
// most commonRows. (FTS5 refuses bm25 beside a list of rowids.)
func bm25(ctx context.Context, tx *sql.Tx, match string, lo, hi int64) (map[int64]float64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT rowid, -bm25(message_search, 0.0, 1.0) FROM message_search
		WHERE message_search MATCH ? AND rowid BETWEEN ? AND ?`, match, lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	scores := map[int64]float64{}
	for rows.Next() {
		var rid int64
		var s float64
		if err := rows.Scan(&rid, &s); err != nil {
			return nil, err
		}
		scores[rid] = s
	}
	return scores, rows.Err()
}

// readHits reads the hits of page (rowids, in order) with their snippets,
// which mark what match (an FTS5 query) finds in the text. The index looks
// each row up, or, byRange, reads the rows that match between the page's
// first and last once and keeps the page's: a search with a prefix wants
// that, as each look-up would read the lists of every word the prefix
// begins again (match is then the query that found the candidates, so
// that the range holds no more rows than they are).
func readHits(ctx context.Context, tx *sql.Tx, match string, byRange bool, page []int64, scores map[int64]float64) ([]parley.SearchHit, error) {
	ids, err := json.Marshal(page)
	if err != nil {
		return nil, err
	}
	where, args := `f.rowid IN (SELECT value FROM json_each(?))`, []any{match, string(ids)}
	if byRange {
		where, args = `f.rowid BETWEEN ? AND ? AND +f.rowid IN (SELECT value FROM json_each(?))`,
			[]any{match, slices.Min(page), slices.Max(page), string(ids)}
	}
	rows, err := tx.QueryContext(ctx, `SELECT f.rowid, m.conversation_id, m.id, m.seq, m.agent_id,
			json_extract(CAST(m.data AS TEXT), '$.role'), json_extract(CAST(m.data AS TEXT), '$.createdAt'),
			coalesce(json_extract(CAST(c.data AS TEXT), '$.title'), ''),
			snippet(message_search, 1, char(2), char(3), '…', `+strconv.Itoa(store.SnippetWords)+`)
		FROM message_search f CROSS JOIN messages m ON m.rowid = f.rowid CROSS JOIN conversations c ON c.id = m.conversation_id
		WHERE message_search MATCH ? AND `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byRow := map[int64]parley.SearchHit{}
	for rows.Next() {
		var h parley.SearchHit
		var rid int64
		var role, created sql.NullString
		var snippet string
		if err := rows.Scan(&rid, &h.ConversationID, &h.MessageID, &h.Seq, &h.AgentID, &role, &created, &h.ConversationTitle, &snippet); err != nil {
			return nil, err
		}
		h.Role, h.Rank, h.Snippet = parley.Role(role.String), scores[rid], parley.SplitSnippet(snippet)
		if h.CreatedAt, err = parseTime(created.String); err != nil {
			return nil, err
		}
		byRow[rid] = h
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	hits := make([]parley.SearchHit, 0, len(page))
	for _, rid := range page {
		if h, ok := byRow[rid]; ok {
			hits = append(hits, h)
		}
	}
	return hits, nil
}
