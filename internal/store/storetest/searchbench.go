package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// SearchBenchEnv names the variable that sets how many messages the search
// benchmarks search: 1000000 for the measurement of BENCHMARKS.md. Unset,
// they search 20,000, so that a run of every benchmark once stays short.
const SearchBenchEnv = "PARLEY_SEARCH_BENCH_MESSAGES"

// SearchBenchVersion changes whenever the corpus does, so that a cached
// corpus of another version is never taken for this one.
const SearchBenchVersion = 1

// SearchCorpus is the shape of the benchmarks' corpus: Conversations
// conversations of PerConversation messages each, of 8 to 40 words drawn
// from a 20,000-word vocabulary by Zipf's law (as words are in text).
type SearchCorpus struct {
	Conversations, PerConversation int
}

// Messages is how many messages the corpus holds.
func (c SearchCorpus) Messages() int { return c.Conversations * c.PerConversation }

// Name tells caches of corpora apart, by version and size.
func (c SearchCorpus) Name() string {
	return fmt.Sprintf("v%d-%dx%d", SearchBenchVersion, c.Conversations, c.PerConversation)
}

// SearchBenchCorpus returns the corpus to measure: SearchBenchEnv
// messages (1000 per conversation), or 20,000 without it.
func SearchBenchCorpus(tb testing.TB) SearchCorpus {
	n := 20_000
	if v := os.Getenv(SearchBenchEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			tb.Fatalf("%s=%q: want a number of messages, 1000 or more", SearchBenchEnv, v)
		}
	}
	per := min(1000, n/20)
	return SearchCorpus{Conversations: n / per, PerConversation: per}
}

// The words the benchmarks search for. benchRare is written into ten
// messages of the corpus, whatever its size; the others are the
// vocabulary's first (in 94% of the messages), its 30th (8%) and its
// 3000th (0.05%).
const (
	benchRare   = "quokkaberry"
	benchScout  = "scout" // an agent that takes part in one conversation in a hundred
	benchWords  = 20_000
	benchRanked = 3000
)

// benchWord is the vocabulary's i-th word, made of syllables.
func benchWord(i int) string {
	syl := []string{"ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze", "bo", "da", "fi", "gu", "he", "jo"}
	var b strings.Builder
	for {
		b.WriteString(syl[i%len(syl)])
		i /= len(syl)
		if i == 0 {
			return b.String()
		}
		i--
	}
}

func benchConversation(i int) string { return fmt.Sprintf("search-bench-%05d", i) }

// BuildSearchCorpus writes corpus c into s: its conversations, then their
// messages, 500 per append, on several writers at once.
func BuildSearchCorpus(ctx context.Context, s store.Store, c SearchCorpus) error {
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, benchWords-1)
	texts := make([]string, c.Messages())
	rareEvery := c.Messages() / 10
	for i := range texts {
		var b strings.Builder
		n := 8 + (i*7919)%33
		for w := range n {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(benchWord(int(z.Uint64())))
		}
		if i%rareEvery == rareEvery/2 {
			b.WriteString(" " + benchRare)
		}
		texts[i] = b.String()
	}
	for i := range c.Conversations {
		id := benchConversation(i)
		members := []string{"alice", "bob"}
		if i%100 == 0 {
			members = append(members, benchScout)
		}
		conv := parley.Conversation{ID: id, Epoch: "ep", Title: "bench " + strconv.Itoa(i), Participants: members,
			TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedBy: "admin", CreatedAt: t0}
		if err := s.CreateConversation(ctx, store.CreateConversationParams{Conversation: conv, Members: members,
			Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)}); err != nil {
			return err
		}
	}
	const batch = 500
	errs := make(chan error, c.Conversations)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for ci := range c.Conversations {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := benchConversation(ci)
			for start, seq := 0, int64(1); start < c.PerConversation; start += batch {
				var ms []*parley.Message
				for j := start; j < min(start+batch, c.PerConversation); j++ {
					text := texts[ci*c.PerConversation+j]
					ms = append(ms, &parley.Message{ID: fmt.Sprintf("m%d", j), ConversationID: id, Seq: seq + 1, Role: parley.RoleAssistant,
						AgentID: []string{"alice", "bob"}[j%2], Parts: []parley.Part{{Type: parley.PartText, Text: text}}, Content: text,
						Status: parley.StatusComplete, Turn: 1, TurnID: "t", Finality: parley.FinalityNone, CreatedAt: t0, UpdatedAt: t0})
				}
				if err := s.Append(ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: []parley.Event{event(id, seq+1, "alice")},
					Messages: ms, State: []byte(`{}`)}); err != nil {
					errs <- err
					return
				}
				seq++
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkSearch measures searches of corpus c in s, a page of 20 each:
// a word in most messages (94%), one in 8%, one in 0.05%, a rare word (ten
// messages),
// a phrase of two common words, two words, a common word and a frequent one
// in one conversation, and a common word in the conversations of an agent
// that takes part in one in a hundred.
func BenchmarkSearch(b *testing.B, s store.Store, c SearchCorpus) {
	cases := []struct {
		name string
		p    store.SearchParams
	}{
		{"common", store.SearchParams{Query: SearchQueryOf(benchWord(0))}},
		{"frequent", store.SearchParams{Query: SearchQueryOf(benchWord(30))}},
		{"uncommon", store.SearchParams{Query: SearchQueryOf(benchWord(benchRanked))}},
		{"rare", store.SearchParams{Query: SearchQueryOf(benchRare)}},
		{"phrase", store.SearchParams{Query: SearchQueryOf(benchWord(0) + " " + benchWord(1))}},
		{"two-words", store.SearchParams{Query: SearchQueryOf(benchWord(1), benchWord(30))}},
		{"narrowed", store.SearchParams{Query: SearchQueryOf(benchWord(0)), ConversationID: benchConversation(c.Conversations / 2)}},
		{"narrowed-frequent", store.SearchParams{Query: SearchQueryOf(benchWord(30)), ConversationID: benchConversation(c.Conversations / 2)}},
		{"member", store.SearchParams{Query: SearchQueryOf(benchWord(0)), Member: benchScout}},
		// Search as you type: a prefix of two letters begins a sixteenth
		// of the vocabulary, its most common word among them.
		{"prefix-short", store.SearchParams{Query: prefixQueryOf(benchWord(0)[:2])}},
		{"prefix-uncommon", store.SearchParams{Query: prefixQueryOf(benchWord(benchRanked)[:4])}},
		{"word-then-prefix", store.SearchParams{Query: prefixQueryOf(benchWord(1), benchWord(30)[:3])}},
		{"prefix-narrowed", store.SearchParams{Query: prefixQueryOf(benchWord(0)[:2]), ConversationID: benchConversation(c.Conversations / 2)}},
		{"prefix-member", store.SearchParams{Query: prefixQueryOf(benchWord(0)[:2]), Member: benchScout}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			tc.p.Limit = 20
			hits := 0
			for b.Loop() {
				hs, err := s.Search(context.Background(), tc.p)
				if err != nil {
					b.Fatal(err)
				}
				hits = len(hs)
			}
			if hits == 0 {
				b.Fatalf("%s found nothing", tc.name)
			}
			b.ReportMetric(float64(hits), "hits")
		})
	}
}

// SearchQueryOf is a query of these terms, as ParseSearch would make it.
func SearchQueryOf(terms ...string) store.SearchQuery { return store.SearchQuery{Terms: terms} }

// prefixQueryOf is a query of these terms whose last word is a prefix.
func prefixQueryOf(terms ...string) store.SearchQuery {
	return store.SearchQuery{Terms: terms, Prefix: true}
}

// BenchmarkAppendMessages measures writing messages into s: appends of ten
// finished messages of about 200 bytes of text each, on 8 writers at once,
// each writing to conversations of its own. Run on a store with the search
// index and on one without it, it measures what the index costs a write.
func BenchmarkAppendMessages(b *testing.B, s store.Store) {
	ctx := context.Background()
	const writers, per = 8, 10
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, benchWords-1)
	text := func() string {
		var w []string
		for n := 0; n < 200; n += len(w[len(w)-1]) + 1 {
			w = append(w, benchWord(int(z.Uint64())))
		}
		return strings.Join(w, " ")
	}
	texts := make([]string, 1000)
	for i := range texts {
		texts[i] = text()
	}
	convs := make([]string, writers)
	for i := range convs {
		convs[i] = newBenchConversation(b, s)
	}
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, seq := convs[w], int64(1)
			for {
				next.Lock()
				if n >= b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				ms := make([]*parley.Message, per)
				for j := range ms {
					t := texts[(int(seq)*per+j)%len(texts)]
					ms[j] = &parley.Message{ID: fmt.Sprintf("m%d-%d", seq, j), ConversationID: id, Seq: seq + 1, Role: parley.RoleAssistant, AgentID: "a",
						Parts: []parley.Part{{Type: parley.PartText, Text: t}}, Content: t, Status: parley.StatusComplete, Finality: parley.FinalityNone, CreatedAt: t0, UpdatedAt: t0}
				}
				if err := s.Append(ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: []parley.Event{event(id, seq+1, "a")},
					Messages: ms, State: []byte(`{}`)}); err != nil {
					b.Error(err)
					return
				}
				seq++
			}
		}()
	}
	wg.Wait()
	// A store that indexes a moment after the write indexes now, in the time measured.
	if ix, ok := s.(interface{ IndexSearch(context.Context) error }); ok {
		if err := ix.IndexSearch(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "msgs/s")
}

func newBenchConversation(b *testing.B, s store.Store) string {
	id := uuid.NewString()
	c := parley.Conversation{ID: id, Epoch: "ep", TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedBy: "admin", CreatedAt: t0}
	if err := s.CreateConversation(context.Background(), store.CreateConversationParams{Conversation: c,
		Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)}); err != nil {
		b.Fatal(err)
	}
	return id
}

// BenchDeltas returns n text deltas of about 32 bytes each, of words drawn
// from the corpus's vocabulary, as a model streams them.
func BenchDeltas(n int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, benchWords-1)
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < 32 {
			b.WriteString(benchWord(int(z.Uint64())) + " ")
		}
		out[i] = b.String()
	}
	return out
}
