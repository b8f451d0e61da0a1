package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tick"
)

// Import writes a conversation's whole history in batches (parley import).
// Until Commit the conversation is an import in progress: readers and other
// writers do not see it (ENOTFOUND), and its id is taken (EBUSY). If the
// server dies first, SweepImports removes it, so that a conversation is
// imported whole or not at all. The import holds no lock between batches:
// it does not keep the store's writer for the whole upload.
//
// The state is derived as the engine always derives it, by folding the
// imported events with conv.Evolve, after conv.Replay held each to the
// bounds every live write is held to (Check); the message rows are written
// as given. Checking the rows (conv.CheckMessage), and that they agree
// with the events, is the importer's job.
type Import struct {
	e     *Engine
	id    string
	state conv.State
	// replay is the state after the events checked, which may be ahead
	// of state (checked, not written yet).
	replay *conv.Replay
	done   bool
	// stop ends the lease's renewal; renewed is closed when it has ended.
	stop, renewed chan struct{}
}

// BeginImport creates conversation c, as an import in progress, with a new
// epoch and its conversation.created event (seq 1, at c.CreatedAt), and
// returns the import that appends the rest. It returns EINVALID (or
// EINVALIDVALUE, ETOOLARGE) for a conversation the rules refuse and EBUSY
// if the id is taken, by a conversation or by an import in progress. An
// import that holds the id but whose importer is gone (a server that died
// mid-import) is removed first.
func (e *Engine) BeginImport(ctx context.Context, c parley.Conversation) (*Import, error) {
	if e.isClosed() {
		return nil, errClosed
	}
	c.Epoch = parley.NewEpoch()
	now := e.opts.Now()
	if c.CreatedAt.After(now.Add(conv.ClockSkew)) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the conversation's createdAt %s is in this server's future", c.CreatedAt.Format(parley.TimeLayout))
	}
	s, events, err := conv.Create(c, conv.Env{Now: c.CreatedAt.Time, Limits: e.opts.Limits})
	if err != nil {
		return nil, err
	}
	state, queue, err := conv.EncodeStored(s, events...)
	if err != nil {
		return nil, err
	}
	create := func() error {
		return e.store.CreateConversation(ctx, store.CreateConversationParams{Conversation: s.Conversation, Members: conv.Members(s.Conversation), Events: events, State: state, Queue: queue, Import: e.lease()})
	}
	err = create()
	if parley.ErrorCode(err) == parley.EBUSY {
		removed, serr := e.store.SweepImports(ctx, store.SweepImportsParams{Owner: e.owner, Now: parley.NewTime(e.opts.Now()), ConversationID: c.ID})
		if serr != nil {
			return nil, serr
		}
		if len(removed) > 0 {
			e.opts.Logger.Info("removed an unfinished import to import it again", slog.String("conversation", c.ID))
			err = create()
		}
	}
	if err != nil {
		return nil, err
	}
	env := conv.ReplayEnv{Env: conv.Env{Now: now, Limits: e.opts.Limits}, CollectWindow: e.opts.CollectWindow, MaxRemoved: e.opts.MaxRevert}
	im := &Import{e: e, id: c.ID, state: s, replay: conv.NewReplay(s, env), stop: make(chan struct{}), renewed: make(chan struct{})}
	if e.track() {
		go im.renew()
	} else {
		close(im.renewed)
	}
	return im, nil
}

// lease is this engine's import lease as of now.
func (e *Engine) lease() *store.ImportLease {
	return &store.ImportLease{Owner: e.owner, Expires: parley.NewTime(e.opts.Now().Add(e.opts.ImportLease))}
}

// renew renews the import's lease every third of it, so that an import
// whose batches come slowly (a slow upload) is not taken for dead, until
// the import ends or the engine closes.
func (im *Import) renew() {
	defer im.e.wg.Done()
	defer close(im.renewed)
	every := im.e.opts.ImportLease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-im.stop:
			return
		case <-im.e.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := im.e.store.RenewImport(ctx, store.RenewImportParams{ConversationID: im.id, Lease: *im.e.lease()})
		cancel()
		if err != nil {
			im.e.opts.Logger.Warn("renewing an import's lease failed", slog.String("conversation", im.id), slog.Any("err", err))
			if parley.ErrorCode(err) == parley.EBUSY {
				return // the import was swept; its next batch says so
			}
		}
	}
}

// Conversation is the conversation being imported, with its new epoch.
func (im *Import) Conversation() parley.Conversation { return im.state.Conversation }

// LastSeq is the seq of the last event written so far.
func (im *Import) LastSeq() int64 { return im.state.LastSeq }

// State is the conversation's state as of LastSeq.
func (im *Import) State() conv.State { return im.state }

// Message returns a message row this import has written. It returns
// ENOTFOUND if it has written none with that id.
func (im *Import) Message(ctx context.Context, id string) (*parley.Message, error) {
	return im.e.store.GetMessage(ctx, im.id, id)
}

// Check checks event e, the one after the last one checked, against the
// bounds every live write is held to (conv.Replay.Add: it returns the
// error a live write would get, and may make e.Data what the server
// writes), so that Append may write it. Checking events as they are read
// lets the importer say where a refused one was.
func (im *Import) Check(e *parley.Event) error {
	return im.replay.Add(e)
}

// CheckRow checks a message row against the bounds every message is held
// to and against the events checked so far (conv.Replay.CheckRow).
func (im *Import) CheckRow(m *parley.Message) error {
	return im.replay.CheckRow(m)
}

// Append writes events, which must carry the seqs after LastSeq, and message
// rows (inserted, or replacing the row with the same id) in one transaction,
// and renews the import's lease. The events not checked yet are checked
// first (see Check), and the batch is refused whole if one is refused
// (saying which seq). The events' conversation id is set to the import's.
// It returns EBUSY if the import was swept (its lease ended).
func (im *Import) Append(ctx context.Context, events []parley.Event, messages []*parley.Message) error {
	if im.done {
		return parley.Errorf(parley.EINTERNAL, "import of %s has ended", im.id)
	}
	for i := range events {
		e := &events[i]
		e.ConversationID = im.id
		if e.Seq <= im.replay.State().LastSeq {
			continue
		}
		if err := im.Check(e); err != nil {
			return parley.Errorf(parley.ErrorCode(err), "event %d (%s): %s", e.Seq, e.Type, parley.ErrorMessage(err))
		}
	}
	for _, m := range messages {
		m.ConversationID = im.id
	}
	next := im.replay.State()
	if n := len(events); n == 0 || events[n-1].Seq != next.LastSeq {
		next = conv.Evolve(im.state, events...) // events checked beyond this batch
	}
	state, queue, err := conv.EncodeStored(next, events...)
	if err != nil {
		return err
	}
	err = im.e.store.Append(ctx, store.AppendParams{ConversationID: im.id, ExpectSeq: im.state.LastSeq, Events: events, Names: conv.Names(im.state, events), Messages: messages, State: state, Queue: queue, Import: im.e.lease(), Conversation: conversationChange(next, events)})
	if err != nil {
		return err
	}
	im.state = next
	return nil
}

// Commit ends the import: the conversation becomes visible and writable,
// its claim lapses on time, and its streaming messages are finalized
// canceled after the runner grace period unless their runner comes back.
// If the import cannot be finished, what it wrote is removed.
func (im *Import) Commit(ctx context.Context) error {
	if im.done {
		return nil
	}
	im.end()
	if err := im.e.store.FinishImport(ctx, im.id, im.e.owner); err != nil {
		// If the outcome is unknown and it did finish, this removes nothing.
		if aerr := im.abort(); aerr != nil {
			err = fmt.Errorf("%w (and removing the import failed: %v)", err, aerr)
		}
		return err
	}
	c, err := im.e.lockLoaded(ctx, im.id) // loading arms the claim's expiry and the orphans' grace period
	if err != nil {
		return err
	}
	c.mu.Unlock()
	return nil
}

// Abort removes everything the import wrote. It is a no-op after Commit.
func (im *Import) Abort() error {
	if im.done {
		return nil
	}
	im.end()
	return im.abort()
}

// abort removes the import from the store, unless it is gone already.
func (im *Import) abort() error {
	// The caller's context may be what failed; the clean-up must still run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := im.e.store.AbortImport(ctx, im.id, im.e.owner)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nil // swept already, or finished after all
	}
	return err
}

// end marks the import ended and stops renewing its lease.
func (im *Import) end() {
	im.done = true
	close(im.stop)
	<-im.renewed
}

// SweepImports removes the imports in progress whose importer is gone, by
// the store's rule (on SQLite, which one server owns, every import that
// another run of the server left; on PostgreSQL, those whose lease ended),
// and returns how many it removed. The server calls it as it starts.
func (e *Engine) SweepImports(ctx context.Context) (int, error) {
	const page = 100
	n := 0
	for {
		removed, err := e.sweep(ctx, parley.NewTime(e.opts.Now()), page)
		n += len(removed)
		if err != nil || len(removed) < page {
			return n, err
		}
	}
}

// SweepImportsEvery removes dead imports at every interval until ctx ends or
// the engine closes, so that the imports of a server that died are removed
// once their lease ends (on PostgreSQL, where servers may share the store).
func (e *Engine) SweepImportsEvery(ctx context.Context, every time.Duration) {
	if !e.track() {
		return
	}
	defer e.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick.Every(ctx, every, func() {
		if _, err := e.sweep(ctx, parley.NewTime(e.opts.Now()), 100); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("reading unfinished imports failed", slog.Any("err", err))
		}
	})
}

// sweep removes up to limit dead imports as of now, saying which.
func (e *Engine) sweep(ctx context.Context, now parley.Time, limit int) ([]string, error) {
	removed, err := e.store.SweepImports(ctx, store.SweepImportsParams{Owner: e.owner, Now: now, Limit: limit})
	for _, id := range removed {
		e.opts.Logger.Info("removed an unfinished import", slog.String("conversation", id))
	}
	return removed, err
}
