package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// The search tests share the store with every other test, so each makes
// words of its own: searchWords returns a word per name, unique to the
// test, of letters only (one word to every tokenizer).
func searchWords(names ...string) map[string]string {
	tag := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'g' + (r - '0')
		}
		return r
	}, strings.ReplaceAll(uuid.NewString(), "-", "")[:10])
	out := map[string]string{}
	for _, n := range names {
		out[n] = n + tag
	}
	return out
}

// newMembersConversation creates a conversation whose members are listed
// (as the engine lists participants, members and owner).
func newMembersConversation(t *testing.T, s store.Store, title string, members ...string) string {
	t.Helper()
	id := uuid.NewString()
	c := parley.Conversation{ID: id, Epoch: "ep", Title: title, Participants: members, TurnPolicy: parley.PolicyFree, MessageFormat: "v2",
		CreatedBy: "admin", CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: members,
		Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// said is a complete message of agent with text, written at created.
func said(conv, id, agent, text string, created parley.Time) *parley.Message {
	return &parley.Message{ID: id, ConversationID: conv, Role: parley.RoleUser, AgentID: agent,
		Parts: []parley.Part{{Type: parley.PartText, Text: text}}, Content: text, Status: parley.StatusComplete, Turn: 1, TurnID: "t",
		Finality: parley.FinalityNone, CreatedAt: created, UpdatedAt: created}
}

// search runs a search of text (as ParseSearch reads it) and returns its hits.
func search(t *testing.T, s store.Store, p store.SearchParams, text string) []parley.SearchHit {
	t.Helper()
	q, err := store.ParseSearch(text)
	if err != nil {
		t.Fatalf("ParseSearch(%q): %v", text, err)
	}
	p.Query = q
	if p.Limit == 0 {
		p.Limit = 100
	}
	hits, err := s.Search(ctx(t), p)
	if err != nil {
		t.Fatalf("Search(%q): %v", text, err)
	}
	return hits
}

func hitIDs(hits []parley.SearchHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.MessageID
	}
	return out
}

func wantHits(t *testing.T, what string, hits []parley.SearchHit, want ...string) {
	t.Helper()
	if got := hitIDs(hits); !slices.Equal(got, want) {
		t.Fatalf("%s: hits %v, want %v", what, got, want)
	}
}

// matched is the text of a snippet's marked parts.
func matched(h parley.SearchHit) []string {
	var out []string
	for _, p := range h.Snippet {
		if p.Match {
			out = append(out, p.Text)
		}
	}
	return out
}

func snippetText(h parley.SearchHit) string {
	var b strings.Builder
	for _, p := range h.Snippet {
		b.WriteString(p.Text)
	}
	return b.String()
}

// testSearchRanksAndPages: the message that has a word more often ranks
// first, and says who wrote it, when, where, with the word marked; ties go
// newest first; pages of a ranking are that ranking, cut.
func testSearchRanksAndPages(t *testing.T, s store.Store) {
	w := searchWords("alpha", "gamma", "filler")
	id := newMembersConversation(t, s, "ranking "+w["alpha"], "a", "b")
	at := parley.NewTime(t0.Add(time.Minute))
	f := w["filler"]
	appendMessages(t, s, id, 1,
		said(id, "once", "b", fmt.Sprintf("%s one two three four five six seven %s", w["alpha"], f), at),
		said(id, "thrice", "a", fmt.Sprintf("%s one %s two %s three four five %s", w["alpha"], w["alpha"], w["alpha"], f), at),
		said(id, "none", "a", "nothing of it here "+f, at))
	hits := search(t, s, store.SearchParams{}, strings.ToUpper(w["alpha"]))
	wantHits(t, "a word, upper case", hits, "thrice", "once")
	if !(hits[0].Rank > hits[1].Rank && hits[1].Rank > 0) {
		t.Fatalf("ranks %v, %v: want the first higher, both above 0", hits[0].Rank, hits[1].Rank)
	}
	h := hits[0]
	if h.ConversationID != id || h.ConversationTitle != "ranking "+w["alpha"] || h.AgentID != "a" || h.Role != parley.RoleUser ||
		h.Seq != 3 || !h.CreatedAt.Equal(at.Time) {
		t.Fatalf("the hit says %+v", h)
	}
	if m := matched(h); len(m) == 0 || !slices.Equal(slices.Compact(m), []string{w["alpha"]}) {
		t.Fatalf("the snippet %+v marks %v, want %s", h.Snippet, m, w["alpha"])
	}
	if text := snippetText(h); !strings.Contains(text, "one") || strings.Contains(text, "…") {
		t.Fatalf("the snippet %q leaves out the text around the word, or marks a cut in a short message", text)
	}

	// Five messages alike rank alike: newest first. Pages cut that order.
	var ids []string
	last := int64(4)
	for i := range 5 {
		mid := fmt.Sprintf("same%d", i)
		last = appendMessages(t, s, id, last, said(id, mid, "a", w["gamma"]+" the very same words", at))
		ids = append([]string{mid}, ids...)
	}
	wantHits(t, "ties", search(t, s, store.SearchParams{}, w["gamma"]), ids...)
	var paged []string
	for off := 0; off < 6; off += 2 {
		paged = append(paged, hitIDs(search(t, s, store.SearchParams{Offset: off, Limit: 2}, w["gamma"]))...)
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("pages of 2 gave %v, want %v", paged, ids)
	}
	if hits := search(t, s, store.SearchParams{Offset: store.SearchCandidates}, w["gamma"]); len(hits) != 0 {
		t.Fatalf("past the ranked messages: %v", hitIDs(hits))
	}
	// Every term must be there.
	wantHits(t, "two words", search(t, s, store.SearchParams{}, w["alpha"]+" "+w["gamma"]))
	wantHits(t, "a word and the filler", search(t, s, store.SearchParams{}, f+" "+w["alpha"]), "thrice", "once")
}

// testSearchPhrases: a phrase in quotes wants its words one after the
// other; words alone, in any order.
func testSearchPhrases(t *testing.T, s store.Store) {
	w := searchWords("red", "blue", "green")
	id := newMembersConversation(t, s, "", "a")
	appendMessages(t, s, id, 1,
		said(id, "in-order", "a", fmt.Sprintf("%s %s %s", w["red"], w["blue"], w["green"]), t0),
		said(id, "reversed", "a", fmt.Sprintf("%s, %s and %s", w["blue"], w["red"], w["green"]), t0))
	wantHits(t, "words", sortHits(search(t, s, store.SearchParams{}, w["red"]+" "+w["blue"])), "in-order", "reversed")
	wantHits(t, "a phrase", search(t, s, store.SearchParams{}, `"`+w["red"]+" "+w["blue"]+`"`), "in-order")
	wantHits(t, "a curly phrase", search(t, s, store.SearchParams{}, "“"+w["red"]+" "+w["blue"]+"”"), "in-order")
	wantHits(t, "a phrase not there", search(t, s, store.SearchParams{}, `"`+w["green"]+" "+w["red"]+`"`))
	wantHits(t, "a phrase across punctuation", search(t, s, store.SearchParams{}, `"`+w["blue"]+" "+w["red"]+`"`), "reversed")
	wantHits(t, "an open quote", search(t, s, store.SearchParams{}, w["green"]+` "`+w["red"]+" "+w["blue"]), "in-order")
}

// testSearchPrefixes: the last word of a search, if nothing follows it,
// is the beginning of a word (search as you type); the words before it,
// a word in quotes, one followed by a space or punctuation, and one of a
// single letter are matched whole.
func testSearchPrefixes(t *testing.T, s store.Store) {
	w := searchWords("canberra", "newyork", "sydney")
	id := newMembersConversation(t, s, "", "a")
	// The words share their start: "canberra…" begins "canb" and the tag
	// ends it; a distinct word begins with each.
	city, ny, syd := w["canberra"], w["newyork"], w["sydney"]
	appendMessages(t, s, id, 1,
		said(id, "capital", "a", "We flew to "+strings.ToUpper(city[:1])+city[1:]+" on Monday", t0),
		said(id, "new-york", "a", "then New "+ny+" and "+syd, t0),
		said(id, "york-new", "a", ny+" is new to "+syd, t0),
		said(id, "e-mail", "a", "send the e-mail "+syd+" later", t0))
	half := city[:len(city)/2]
	hits := search(t, s, store.SearchParams{}, half)
	wantHits(t, "the start of a word", hits, "capital")
	if m := matched(hits[0]); !slices.Equal(m, []string{strings.ToUpper(city[:1]) + city[1:]}) {
		t.Fatalf("the snippet %+v marks %v, want the whole word", hits[0].Snippet, m)
	}
	wantHits(t, "upper case", search(t, s, store.SearchParams{}, strings.ToUpper(half)), "capital")
	wantHits(t, "a whole word as a prefix", search(t, s, store.SearchParams{}, city), "capital")
	wantHits(t, "a prefix after a word", search(t, s, store.SearchParams{}, "flew "+half), "capital")
	wantHits(t, "a prefix after a word not there", search(t, s, store.SearchParams{}, syd+" "+half))
	// Only the last word is a prefix.
	wantHits(t, "a prefix before a word", search(t, s, store.SearchParams{}, half+" flew"))
	wantHits(t, "a prefix, then a space", search(t, s, store.SearchParams{}, half+" "))
	wantHits(t, "a prefix, then punctuation", search(t, s, store.SearchParams{}, half+"."))
	wantHits(t, "a prefix in quotes", search(t, s, store.SearchParams{}, `"`+half+`"`))
	wantHits(t, "a prefix in an open quote", search(t, s, store.SearchParams{}, `"flew `+half))
	wantHits(t, "a phrase, then a prefix", search(t, s, store.SearchParams{}, `"flew to" `+half), "capital")
	// "new yo…": new whole, then the prefix, in any order as words are.
	nyHalf := ny[:len(ny)/2]
	wantHits(t, "a word and a prefix", sortHits(search(t, s, store.SearchParams{}, "new "+nyHalf)), "new-york", "york-new")
	wantHits(t, "the word is whole", search(t, s, store.SearchParams{}, "ne "+nyHalf))
	// Joined by punctuation, the words are a phrase whose last word is a prefix.
	wantHits(t, "a phrase ending in a prefix", search(t, s, store.SearchParams{}, "new-"+nyHalf), "new-york")
	wantHits(t, "a split word ending in a prefix", search(t, s, store.SearchParams{ConversationID: id}, "e-ma"), "e-mail")
	// One letter is matched whole: it begins too many words.
	wantHits(t, "one letter", search(t, s, store.SearchParams{}, syd+" e"), "e-mail")
	wantHits(t, "one letter, not a word", search(t, s, store.SearchParams{}, syd+" l"))
	// Prefixes of operators and quotes are text too (in this
	// conversation: the store is shared, and "a" and "b" are words).
	for _, q := range []string{half + "*", half + ":*", `'` + half + `':*`, half + " & !x | ')", "!" + half, "(" + half,
		`a:* & !b | ')`, "x <-> " + half, half + `\`, `\` + half, `'` + half, half + `'`, `"` + half, half + `''`} {
		if ids := hitIDs(search(t, s, store.SearchParams{ConversationID: id}, q)); len(ids) > 1 || len(ids) == 1 && ids[0] != "capital" {
			t.Fatalf("%q found %v", q, ids)
		}
	}
}

func sortHits(hits []parley.SearchHit) []parley.SearchHit {
	slices.SortFunc(hits, func(a, b parley.SearchHit) int { return strings.Compare(a.MessageID, b.MessageID) })
	return hits
}

// testSearchNarrowsAndFilters: a search of one conversation finds only its
// messages; a search of a member's conversations only theirs; an import in
// progress is found by no search until it has finished.
func testSearchNarrowsAndFilters(t *testing.T, s store.Store) {
	w := searchWords("delta")
	ours := newMembersConversation(t, s, "", "a", "b")
	theirs := newMembersConversation(t, s, "", "x")
	appendMessages(t, s, ours, 1, said(ours, "ours", "a", w["delta"]+" here", t0))
	appendMessages(t, s, theirs, 1, said(theirs, "theirs", "x", w["delta"]+" there", t0))
	wantHits(t, "everywhere", sortHits(search(t, s, store.SearchParams{}, w["delta"])), "ours", "theirs")
	wantHits(t, "one conversation", search(t, s, store.SearchParams{ConversationID: ours}, w["delta"]), "ours")
	wantHits(t, "another", search(t, s, store.SearchParams{ConversationID: theirs}, w["delta"]), "theirs")
	wantHits(t, "no such conversation", search(t, s, store.SearchParams{ConversationID: "no-such-" + uuid.NewString()}, w["delta"]))
	wantHits(t, "a member's", search(t, s, store.SearchParams{Member: "b"}, w["delta"]), "ours")
	wantHits(t, "another member's", search(t, s, store.SearchParams{Member: "x"}, w["delta"]), "theirs")
	wantHits(t, "one not a member", search(t, s, store.SearchParams{Member: "nobody-" + w["delta"]}, w["delta"]))
	wantHits(t, "a member's, narrowed to another", search(t, s, store.SearchParams{Member: "b", ConversationID: theirs}, w["delta"]))
	// A conversation id in the text finds nothing of it.
	wantHits(t, "an id as text", search(t, s, store.SearchParams{}, ours+" "+w["delta"]))

	imp := uuid.NewString()
	c := parley.Conversation{ID: imp, Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: []string{"a"},
		Events: []parley.Event{event(imp, 1, "")}, State: []byte(`{}`), Import: lease("importer", time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: imp, ExpectSeq: 1, Events: []parley.Event{event(imp, 2, "a")},
		Messages: []*parley.Message{said(imp, "imported", "a", w["delta"]+" imported", t0)}, State: []byte(`{}`), Import: lease("importer", time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.SearchParams{{}, {Member: "a"}, {ConversationID: imp}} {
		if hits := search(t, s, p, w["delta"]); slices.Contains(hitIDs(hits), "imported") {
			t.Fatalf("%+v found a message of an import in progress", p)
		}
	}
	if err := s.FinishImport(ctx(t), imp, "importer"); err != nil {
		t.Fatal(err)
	}
	wantHits(t, "a finished import", search(t, s, store.SearchParams{ConversationID: imp}, w["delta"]), "imported")
}

// testSearchFollowsTheRows: a streaming message is found once it is
// finalized, by its whole text; a message rewritten is found by its new
// text only; a message removed, or of a deleted conversation, is found no
// more.
func testSearchFollowsTheRows(t *testing.T, s store.Store) {
	w := searchWords("epsilon", "zeta", "eta", "theta", "iota")
	id := newMembersConversation(t, s, "", "a")
	streaming := said(id, "streamed", "a", w["epsilon"]+" so far", t0)
	streaming.Status, streaming.Parts[0].Streaming = parley.StatusStreaming, true
	last := appendMessages(t, s, id, 1, streaming, said(id, "rewritten", "a", w["eta"]+" first", t0), said(id, "reverted", "a", w["iota"]+" soon gone", t0))
	wantHits(t, "while streaming", search(t, s, store.SearchParams{}, w["epsilon"]))
	final := said(id, "streamed", "a", w["epsilon"]+" so far and then "+w["zeta"], t0)
	final.Status = parley.StatusCanceled
	last = appendMessages(t, s, id, last, final, said(id, "rewritten", "a", w["theta"]+" second", t0))
	wantHits(t, "finalized, its first words", search(t, s, store.SearchParams{}, w["epsilon"]), "streamed")
	wantHits(t, "finalized, its last words", search(t, s, store.SearchParams{}, `"then `+w["zeta"]+`"`), "streamed")
	wantHits(t, "the old text of a rewritten message", search(t, s, store.SearchParams{}, w["eta"]))
	wantHits(t, "its new text", search(t, s, store.SearchParams{}, w["theta"]), "rewritten")

	wantHits(t, "before the revert", search(t, s, store.SearchParams{}, w["iota"]), "reverted")
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
		RemoveMessages: []string{"reverted"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	wantHits(t, "after the revert", search(t, s, store.SearchParams{}, w["iota"]))

	if err := s.DeleteConversation(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	for _, word := range []string{w["epsilon"], w["theta"]} {
		wantHits(t, "a deleted conversation", search(t, s, store.SearchParams{}, word))
	}
}

// testSearchLongAndOddText: of a long message, the first
// store.SearchIndexedChars characters are found; text with the snippet
// markers and what looks like a NUL escape in it is written and found, and
// its snippet marks only what was found. (A NUL itself no store takes: see
// testNULRefusedAlike; rows written with one before are still found, see
// UpgradeIndexesMessages.)
func testSearchLongAndOddText(t *testing.T, s store.Store) {
	w := searchWords("kappa", "lambda", "mu", "nu", "xi")
	id := newMembersConversation(t, s, "", "a")
	var long strings.Builder
	long.WriteString(w["kappa"] + " ")
	for i := 0; long.Len() < store.SearchIndexedChars+1000; i++ {
		fmt.Fprintf(&long, "w%x ", i) // many words, each its own
	}
	long.WriteString(w["lambda"])
	odd := w["mu"] + " \x02not marked\x03 a\x01b \\u0000 \\\\u0000 " + w["nu"]
	middle := strings.Repeat("before ", 60) + w["xi"] + strings.Repeat(" after", 60)
	appendMessages(t, s, id, 1, said(id, "long", "a", long.String(), t0), said(id, "odd", "a", odd, t0), said(id, "middle", "a", middle, t0))
	hits := search(t, s, store.SearchParams{}, w["kappa"])
	wantHits(t, "the start of a long message", hits, "long")
	if text := snippetText(hits[0]); !strings.HasPrefix(text, w["kappa"]) || !strings.HasSuffix(text, "…") || len(text) > 1000 {
		t.Fatalf("the snippet of the start of a long message: %q", text)
	}
	hits = search(t, s, store.SearchParams{}, w["xi"])
	wantHits(t, "the middle of a message", hits, "middle")
	if text := snippetText(hits[0]); !strings.HasPrefix(text, "…") || !strings.HasSuffix(text, "…") || !strings.Contains(text, "before") || !strings.Contains(text, "after") {
		t.Fatalf("the snippet of the middle of a message: %q", text)
	}
	wantHits(t, "past what is indexed", search(t, s, store.SearchParams{}, w["lambda"]))
	hits = search(t, s, store.SearchParams{}, w["nu"]+" "+w["mu"])
	wantHits(t, "odd text", hits, "odd")
	if m := matched(hits[0]); !slices.Equal(m, []string{w["mu"], w["nu"]}) {
		t.Fatalf("the snippet %+v marks %v", hits[0].Snippet, m)
	}
	if text := snippetText(hits[0]); strings.ContainsAny(text, parley.SnippetStart+parley.SnippetEnd) || !strings.Contains(text, "not marked") {
		t.Fatalf("the snippet's text is %q", text)
	}
}

// testSearchHostileQueries: whatever is typed, a search answers without
// an error: the syntax of the stores' query languages is text.
func testSearchHostileQueries(t *testing.T, s store.Store) {
	w := searchWords("omicron")
	id := newMembersConversation(t, s, "", "a")
	appendMessages(t, s, id, 1, said(id, "target", "a", w["omicron"]+" or near not and body conv star", t0))
	for _, q := range []string{
		`OR`, `AND`, `NOT`, `NEAR`, `NEAR(`, `*`, `^`, `-`, `+`, `:`, `(`, `)`, `{`, `}`, `"`, `""`, `"""`, `'`, `''`, `\`, `%`, `_`,
		`body:x`, `conv : x`, `{conv body}: x`, `x*`, `^x`, `x NOT y`, `NEAR(x y, 2)`, `!`, `&`, `|`, `<->`, `!!x`, `x:*`, `x & y`, `'x':*`,
		`)(`, `"unbalanced`, `unbalanced"`, `a"b"c`, `-x`, `x -`, `\u0000`, "\x02", "\x03", "\x01\x1f\x7f", "\ue000", "\ue000616263",
		"🙂", "a\u0301", "ﬁ", "İ", "ß", "日本語", "مرحبا", "𞤀", strings.Repeat("x", 1000), strings.Repeat("ab-", 30), strings.Repeat(`"a" `, 30),
	} {
		for _, withWord := range []bool{false, true} {
			text := q
			if withWord {
				text = w["omicron"] + " " + q
			}
			query, err := store.ParseSearch(text)
			if err != nil {
				t.Fatalf("ParseSearch(%q): %v", text, err)
			}
			if _, err := s.Search(ctx(t), store.SearchParams{Query: query, Limit: 10}); err != nil {
				t.Fatalf("Search(%q): %v", text, err)
			}
		}
	}
	// The words of operators are words.
	for _, q := range []string{"OR", "near", "NOT", "and", "body: conv:", `"body conv"`, "star*"} {
		wantHits(t, q, search(t, s, store.SearchParams{}, w["omicron"]+" "+q), "target")
	}
	// Terms a caller made by hand, not read by ParseSearch.
	for _, term := range []string{`" OR conv : x`, `")`, "\x00", "a\x00b", "\ue000", ` `, "", `NEAR("a" "b")`} {
		if _, err := s.Search(ctx(t), store.SearchParams{Query: SearchQueryOf(w["omicron"], term), Limit: 10}); err != nil {
			t.Fatalf("Search of the term %q: %v", term, err)
		}
	}
	for _, p := range []store.SearchParams{{Limit: 10}, {Query: SearchQueryOf(w["omicron"])}, {Query: SearchQueryOf(w["omicron"]), Limit: 10, Offset: -1}} {
		if hits, err := s.Search(ctx(t), p); err != nil || len(hits) != 0 {
			t.Fatalf("Search(%+v) = %v, %v; want nothing", p, hitIDs(hits), err)
		}
	}
}
