package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// Search page sizes.
const (
	defaultSearchLimit = 20
	maxSearchLimit     = 100
)

// search serves GET /v1/search?q=&conversationId=&limit=&cursor=: the
// messages whose text has the words of q, best first, in what who may
// read. An agent searches the conversations it takes part in; narrowed to
// one conversation, whoever may read it (a delegate of its open turn too).
// Admins and viewers search everything.
func (s *Server) search(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	hits, next, err := s.searchPage(r, who)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	body := map[string]any{"hits": hits}
	if next != "" {
		body["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) searchPage(r *http.Request, who parley.Identity) ([]parley.SearchHit, string, error) {
	q := r.URL.Query()
	text, err := queryText(q, "q")
	if err != nil {
		return nil, "", err
	}
	n, err := queryInt(q, "limit", defaultSearchLimit, 1, maxSearchLimit)
	if err != nil {
		return nil, "", err
	}
	convID, err := queryText(q, "conversationId")
	if err != nil {
		return nil, "", err
	}
	cursor, err := queryText(q, "cursor")
	if err != nil {
		return nil, "", err
	}
	return s.searchHits(r.Context(), who, text, convID, int(n), cursor)
}

// searchHits runs a search of text for who (see search), narrowed to
// conversation convID when it is not "", limit hits from where cursor (""
// for the first page) says, and returns the cursor of the next page ("" at
// the end). The MCP tool search_messages searches through it too.
func (s *Server) searchHits(ctx context.Context, who parley.Identity, text, convID string, limit int, cursor string) ([]parley.SearchHit, string, error) {
	if strings.TrimSpace(text) == "" {
		return nil, "", parley.Errorf(parley.EINVALID, "q is required: the words to search for (put a phrase in double quotes)")
	}
	query, err := store.ParseSearch(text)
	if err != nil {
		return nil, "", err
	}
	if limit < 1 || limit > maxSearchLimit {
		return nil, "", parley.Errorf(parley.EINVALIDVALUE, "limit must be from 1 to %d, not %d", maxSearchLimit, limit)
	}
	key := searchKey(text, convID)
	offset, err := searchOffset(cursor, key)
	if err != nil {
		return nil, "", err
	}
	p := store.SearchParams{Query: query, ConversationID: convID, Offset: offset, Limit: limit + 1}
	switch {
	case convID != "":
		if !parley.ValidID(convID) {
			return nil, "", parley.Errorf(parley.EINVALIDVALUE, "conversationId %q is not a conversation id", convID)
		}
		if err := s.eng.Require(ctx, convID, func(st conv.State) error { return st.CanRead(who) }); err != nil {
			return nil, "", err
		}
	case who.Kind == parley.TokenAgent:
		p.Member = who.AgentID
	}
	hits, err := s.rd.Search(ctx, p)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(hits) > limit {
		hits = hits[:limit]
		next = searchCursor(offset+limit, key)
	}
	return hits, next, nil
}

// queryText reads query parameter name ("" when absent): given twice, it
// is EINVALID, as for numbers.
func queryText(q url.Values, name string) (string, error) {
	if vs := q[name]; len(vs) > 1 {
		return "", parley.Errorf(parley.EINVALID, "give %s once, not %d times", name, len(vs))
	} else if len(vs) == 1 {
		return vs[0], nil
	}
	return "", nil
}

// searchKey names one search (its text and conversation), so that a cursor
// made for it is not taken for another's.
func searchKey(text, convID string) []byte {
	h := sha256.Sum256([]byte(text + "\x00" + convID))
	return h[:6]
}

// searchCursor is the cursor of the page of a search that starts at offset.
func searchCursor(offset int, key []byte) string {
	b := binary.AppendUvarint(append([]byte{}, key...), uint64(offset))
	return base64.RawURLEncoding.EncodeToString(b)
}

// searchOffset reads a search's cursor ("": 0). A cursor this server did
// not make for this search is EINVALID.
func searchOffset(c string, key []byte) (int, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > len(key) && string(b[:len(key)]) == string(key) {
		off, n := binary.Uvarint(b[len(key):])
		if n > 0 && len(key)+n == len(b) && off < store.SearchCandidates {
			return int(off), nil
		}
	}
	return 0, parley.Errorf(parley.EINVALID, "cursor %q is not one this server made for this search: use the nextCursor of the search's last page, with the same q and conversationId", c)
}
