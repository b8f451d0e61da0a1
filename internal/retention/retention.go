// Package retention compacts what a store keeps of streamed messages once
// they are old: a streamed message's row holds all its text and tool calls
// once it ended, so its chunk and part.updated events serve only readers
// that resume from inside its stream. After the retention they become
// tombstones (store.Store.Compact): the log keeps its dense seqs and every
// other event, and a reader resuming from any position still folds to the
// stored messages.
//
// A Sweeper does it in the background, in passes of bounded work: each pass
// looks at the compaction cursors of a page of conversations (in id order,
// going round), and compacts those that are due, a bounded number of rows
// at a time. Several nodes on one PostgreSQL database may each run one.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Options configure a Sweeper. Zero values take the defaults.
type Options struct {
	// Retention is how long after a message ended its chunk events are
	// kept. It must be positive.
	Retention time.Duration
	// Every is the pause between passes (default an eighth of the
	// retention, at least a second and at most a minute).
	Every time.Duration
	// Conversations bounds the compaction cursors one pass reads
	// (default 5000): a pass goes that far round the conversations.
	Conversations int
	// Rows bounds the stored rows one pass reads to compact (default
	// 20,000), and RowsPerWrite those of one transaction (default 2000:
	// on SQLite, writers wait while it commits).
	Rows, RowsPerWrite int
	// Logger receives a line per pass that compacted something, and the
	// failures (default: none).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Sweeper compacts a store's old chunk events, pass after pass.
type Sweeper struct {
	st    store.Store
	opts  Options
	after string // where the next pass starts, in id order
}

// New returns a sweeper of st.
func New(st store.Store, opts Options) *Sweeper {
	if opts.Every <= 0 {
		opts.Every = min(max(opts.Retention/8, time.Second), time.Minute)
	}
	if opts.Conversations <= 0 {
		opts.Conversations = 5000
	}
	if opts.Rows <= 0 {
		opts.Rows = 20_000
	}
	if opts.RowsPerWrite <= 0 {
		opts.RowsPerWrite = 2000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Sweeper{st: st, opts: opts}
}

// Stats counts what passes did.
type Stats struct {
	// Conversations counts the conversations compacted (or looked at and
	// found with nothing to compact), Events the events made tombstones,
	// Rows the stored rows removed, Refs the events stored as references to
	// their message's row.
	Conversations int
	Events        int64
	Rows          int
	Refs          int
	// Round is true when the pass reached the last conversation (the next
	// starts from the first).
	Round bool
}

// Run runs a pass every opts.Every until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Every)
	defer t.Stop()
	for {
		st, err := s.Pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.opts.Logger.Warn("compacting chunk events failed", slog.Any("err", err))
		}
		if st.Events > 0 || st.Refs > 0 {
			s.opts.Logger.Info("compacted the chunk events of old messages", slog.Int("conversations", st.Conversations),
				slog.Int64("events", st.Events), slog.Int("rowsRemoved", st.Rows), slog.Int("eventsReferringToRows", st.Refs))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass makes one pass of bounded work and says what it did. A conversation
// deleted or changed meanwhile, or compacted by another node, is skipped.
func (s *Sweeper) Pass(ctx context.Context) (Stats, error) {
	var st Stats
	cursors, err := s.st.CompactionCursors(ctx, store.CompactionCursorsParams{After: s.after, Limit: s.opts.Conversations})
	if err != nil {
		return st, err
	}
	now := s.opts.Now()
	budget := s.opts.Rows
	for _, c := range cursors {
		if !c.Pending(now) {
			s.after = c.ConversationID
			continue
		}
		if budget <= 0 {
			return st, nil // the next pass starts with this one
		}
		st.Conversations++
		more := true
		for more && budget > 0 && ctx.Err() == nil {
			res, err := s.st.Compact(ctx, store.CompactParams{ConversationID: c.ConversationID, Now: parley.NewTime(now),
				Before: parley.NewTime(now.Add(-s.opts.Retention)), MaxRows: min(budget, s.opts.RowsPerWrite)})
			switch parley.ErrorCode(err) {
			case "":
			case parley.ENOTFOUND, parley.EBUSY:
				more = false
				continue
			default:
				return st, err
			}
			budget -= s.opts.RowsPerWrite
			st.Events += res.Compacted
			st.Rows += res.Removed
			st.Refs += res.Referenced
			more = res.More
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		if more {
			return st, nil // out of budget: the next pass goes on with this one
		}
		s.after = c.ConversationID
	}
	if len(cursors) < s.opts.Conversations {
		s.after, st.Round = "", true
	}
	return st, nil
}
