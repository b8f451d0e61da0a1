package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
)

// ImportOptions tune an import.
type ImportOptions struct {
	// ID, if set, is the id of the imported conversation instead of the
	// file's (a Parley export) or a new one (legacy rows).
	ID string
	// Participants, for legacy rows, are the conversation's agents. When
	// empty they are the agents found in the first MiB of the file.
	Participants []string
	// Title, for legacy rows, is the conversation's title.
	Title string
	// CreatedBy is who imports (the conversation's createdBy for legacy rows).
	CreatedBy string
	// Progress, if set, is called after each batch is written.
	Progress func(ImportStats)
}

// ImportStats counts what an import has written so far.
type ImportStats struct {
	Events   int64 `json:"events"`
	Messages int64 `json:"messages"`
	// Bytes is how much of the input has been read.
	Bytes int64 `json:"bytes"`
}

// Warning reports one oddity of imported legacy data and what the import
// did about it: nothing is changed silently.
type Warning struct {
	// Row is the 1-based row (line, or array element) of the input.
	Row       int    `json:"row"`
	Kind      string `json:"kind"`
	MessageID string `json:"messageId,omitempty"`
	Text      string `json:"text"`
}

// Warning kinds.
const (
	WarnNoID          = "no-id"
	WarnNoReplyTo     = "no-reply-to"
	WarnMissingParent = "missing-parent"
	WarnSelfReply     = "self-reply"
	WarnTooDeep       = "too-deep"
	WarnOutOfOrder    = "out-of-order"
	WarnNoTime        = "no-time"
	WarnBadRole       = "bad-role"
	WarnNoSender      = "no-sender"
	WarnNewAgent      = "new-agent"
	WarnChats         = "chats-merged"
	WarnSeenBy        = "seen-by-full"
)

// MaxWarnings is how many warnings an ImportResult lists; WarningCounts
// counts them all.
const MaxWarnings = 1000

// ImportResult says what an import wrote.
type ImportResult struct {
	Conversation parley.Conversation `json:"conversation"`
	// Source is "export" (a Parley export) or "legacy" (message rows).
	Source string `json:"source"`
	ImportStats
	Warnings          []Warning      `json:"warnings"`
	WarningCounts     map[string]int `json:"warningCounts"`
	WarningsTruncated bool           `json:"warningsTruncated"`
}

func (r *ImportResult) warn(w Warning) {
	r.WarningCounts[w.Kind]++
	if len(r.Warnings) < MaxWarnings {
		r.Warnings = append(r.Warnings, w)
	} else {
		r.WarningsTruncated = true
	}
}

// Limits of the input.
const (
	// MaxValueBytes bounds one JSON value (a line, an event, a message row).
	MaxValueBytes = 16 << 20
	// batchSize is how many events or rows are written per transaction.
	batchSize = 1000
	// peekBytes is how much of the input is looked at before importing.
	peekBytes = 1 << 20
)

// Import reads a Parley export (JSON or JSONL) or legacy message rows (a JSON
// array or JSON Lines of the rows of an older agent-memory store, one row per
// message an agent remembered, as docs/export.md describes) from r and
// writes the conversation through the engine, in batches: memory stays
// bounded whatever the size of r. Until it commits, the conversation is seen
// by no reader; a failed import removes what it wrote, and one cut short by
// a crash is removed by engine.SweepImports. It returns EINVALID for input
// it cannot read and EINVALIDVALUE for values it refuses (both saying
// where), ETOOLARGE for a value, message or event over its limit, and EBUSY
// if the conversation id is taken.
func Import(ctx context.Context, eng *engine.Engine, r io.Reader, opts ImportOptions) (*ImportResult, error) {
	in := &input{r: r}
	br := bufio.NewReaderSize(in, 256<<10)
	head, err := br.Peek(peekBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	head = bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(head) == 0 {
		return nil, parley.Errorf(parley.EINVALID, "the input is empty")
	}
	dec := json.NewDecoder(br)
	dec.UseNumber()
	res := &ImportResult{WarningCounts: map[string]int{}, Warnings: []Warning{}}
	imp := &importer{eng: eng, dec: dec, in: in, opts: opts, res: res}
	if isExport(head) {
		res.Source = "export"
		err = imp.export(ctx)
	} else {
		res.Source = "legacy"
		err = imp.legacy(ctx, head)
	}
	if err != nil {
		if imp.im != nil {
			if aerr := imp.im.Abort(); aerr != nil {
				err = fmt.Errorf("%w (and removing the partial import failed: %v)", err, aerr)
			}
		}
		return nil, err
	}
	if err := imp.im.Commit(ctx); err != nil {
		return nil, err
	}
	res.Conversation = imp.im.Conversation()
	return res, nil
}

// isExport reports whether the input starts with an export header: an
// object whose first key is "parley".
func isExport(head []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	t, err := dec.Token()
	return err == nil && t == "parley"
}

// input counts the bytes read and bounds how much one JSON value may take.
type input struct {
	r     io.Reader
	n     int64
	mark  int64
	limit bool
}

func (in *input) Read(p []byte) (int, error) {
	if in.limit {
		// Room for the value and the buffers' read-ahead; one Read may not
		// take more than that either.
		room := in.mark + MaxValueBytes + 512<<10 - in.n
		if room <= 0 {
			return 0, parley.Errorf(parley.ETOOLARGE, "a JSON value is over %d bytes", MaxValueBytes)
		}
		if int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := in.r.Read(p)
	in.n += int64(n)
	return n, err
}

// importer holds one import's progress.
type importer struct {
	eng  *engine.Engine
	dec  *json.Decoder
	in   *input
	opts ImportOptions
	res  *ImportResult
	im   *engine.Import
	row  int
	// events and msgs are the batch not yet written.
	events []parley.Event
	msgs   []*parley.Message
	// batch indexes msgs by id.
	batch map[string]*parley.Message
	// created is set once the export's conversation.created event was read.
	created bool
	// header is the export's header, once read: the import begins with
	// the first event or row (see start).
	header *Header
	// lastRowSeq is the seq of the last message row checked.
	lastRowSeq int64
}

// next decodes the next JSON value of the input into v, counting rows.
func (imp *importer) next(v any) error {
	// The value starts at the decoder's offset; what was read past it is
	// the value so far (plus at most the buffers' read-ahead).
	imp.in.mark, imp.in.limit = imp.dec.InputOffset(), true
	imp.row++
	if err := imp.dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		var pe *parley.Error
		if errors.As(err, &pe) { // the input's own error: too large, say
			return parley.Errorf(pe.Code, "row %d: %s", imp.row, pe.Message)
		}
		return parley.Errorf(parley.EINVALID, "row %d: %v", imp.row, err)
	}
	return nil
}

// flush writes the batch.
func (imp *importer) flush(ctx context.Context) error {
	if len(imp.events) == 0 && len(imp.msgs) == 0 {
		return nil
	}
	if err := imp.im.Append(ctx, imp.events, imp.msgs); err != nil {
		return err
	}
	imp.res.Events += int64(len(imp.events))
	imp.res.Messages += int64(len(imp.msgs))
	imp.res.Bytes = imp.in.n
	imp.events, imp.msgs, imp.batch = imp.events[:0], imp.msgs[:0], nil
	if imp.opts.Progress != nil {
		imp.opts.Progress(imp.res.ImportStats)
	}
	return nil
}

// lookup finds a message of this import: in the batch, or already written.
func (imp *importer) lookup(ctx context.Context, id string) (*parley.Message, error) {
	if m, ok := imp.batch[id]; ok {
		return m, nil
	}
	m, err := imp.im.Message(ctx, id)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nil, nil
	}
	return m, err
}

func (imp *importer) add(m *parley.Message) {
	if imp.batch == nil {
		imp.batch = map[string]*parley.Message{}
	}
	imp.batch[m.ID] = m
	imp.msgs = append(imp.msgs, m)
}

// export imports a Parley export: the header, the events (the first one,
// conversation.created, is made again with the new epoch), then the rows.
func (imp *importer) export(ctx context.Context) error {
	var h struct {
		Header
		Events   json.RawMessage `json:"events"`
		Messages json.RawMessage `json:"messages"`
	}
	// The header is read key by key so that a one-document export's arrays
	// stream instead of being decoded whole.
	if _, err := imp.dec.Token(); err != nil {
		return parley.Errorf(parley.EINVALID, "the export header: %v", err)
	}
	imp.row = 1
	sawEvents := false
	for imp.dec.More() {
		t, err := imp.dec.Token()
		if err != nil {
			return parley.Errorf(parley.EINVALID, "the export header: %v", err)
		}
		key, _ := t.(string)
		switch key {
		case "parley":
			err = imp.dec.Decode(&h.Parley)
		case "version":
			err = imp.dec.Decode(&h.Version)
		case "lastSeq":
			err = imp.dec.Decode(&h.LastSeq)
		case "conversation":
			err = imp.dec.Decode(&h.Conversation)
		case "events", "messages":
			if !sawEvents {
				if err := imp.begin(ctx, h.Header); err != nil {
					return err
				}
			}
			sawEvents = true
			err = imp.array(ctx, key)
		default:
			var skip json.RawMessage
			err = imp.dec.Decode(&skip)
		}
		if err != nil {
			return asInvalid(err, "the export header field %q", key)
		}
	}
	if _, err := imp.dec.Token(); err != nil {
		return parley.Errorf(parley.EINVALID, "the export header: %v", err)
	}
	if !sawEvents {
		// JSON Lines: the header was the first line; events and rows follow.
		if err := imp.begin(ctx, h.Header); err != nil {
			return err
		}
		for {
			var l line
			err := imp.next(&l)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			switch {
			case l.Event != nil && l.Message == nil:
				err = imp.event(ctx, l.Event)
			case l.Message != nil && l.Event == nil:
				err = imp.message(ctx, l.Message)
			default:
				err = parley.Errorf(parley.EINVALID, "row %d: a line holds one \"event\" or one \"message\"", imp.row)
			}
			if err != nil {
				return err
			}
		}
	}
	if err := imp.start(ctx, nil); err != nil {
		return err
	}
	if err := imp.flush(ctx); err != nil {
		return err
	}
	if last := imp.im.LastSeq(); last != h.LastSeq {
		return parley.Errorf(parley.EINVALID, "the export ends at seq %d but its header says lastSeq %d", last, h.LastSeq)
	}
	return nil
}

// asInvalid keeps a *parley.Error and makes anything else EINVALID.
func asInvalid(err error, format string, args ...any) error {
	var pe *parley.Error
	if errors.As(err, &pe) {
		return err
	}
	return parley.Errorf(parley.EINVALID, format+": %v", append(args, err)...)
}

// begin checks the header and creates the conversation.
func (imp *importer) begin(_ context.Context, h Header) error {
	switch {
	case imp.header != nil:
		return nil
	case h.Parley != "export":
		return parley.Errorf(parley.EINVALID, "not a Parley export: \"parley\" is %q, not \"export\"", h.Parley)
	case h.Version != Version:
		return parley.Errorf(parley.EINVALIDVALUE, "export version %d; this Parley reads version %d", h.Version, Version)
	case h.LastSeq < 1:
		return parley.Errorf(parley.EINVALIDVALUE, "the export header's lastSeq is %d", h.LastSeq)
	}
	if h.Conversation.CreatedAt.IsZero() {
		return parley.Errorf(parley.EINVALIDVALUE, "the exported conversation has no createdAt")
	}
	imp.header = &h
	return nil
}

// start begins the import, once: the conversation is the header's as it
// was made, as created (the data of the export's conversation.created,
// if it comes first) says: the header has it as it is now, and the
// conversation.updated events of the log change it again.
func (imp *importer) start(ctx context.Context, created *parley.Conversation) error {
	if imp.im != nil {
		return nil
	}
	if imp.header == nil {
		return parley.Errorf(parley.EINVALID, "the export has no header")
	}
	c := imp.header.Conversation
	if created != nil {
		c.Title, c.Metadata, c.Participants, c.Members = created.Title, created.Metadata, created.Participants, created.Members
	}
	if imp.opts.ID != "" {
		c.ID = imp.opts.ID
	}
	im, err := imp.eng.BeginImport(ctx, c)
	if err != nil {
		return err
	}
	imp.im, imp.res.Events = im, 1
	return nil
}

// array streams the "events" or "messages" array of a one-document export.
func (imp *importer) array(ctx context.Context, key string) error {
	if t, err := imp.dec.Token(); err != nil || t != json.Delim('[') {
		return parley.Errorf(parley.EINVALID, "%q is not an array", key)
	}
	imp.row = 0
	for imp.dec.More() {
		var err error
		if key == "events" {
			var e parley.Event
			if err = imp.next(&e); err == nil {
				err = imp.event(ctx, &e)
			}
		} else {
			var m parley.Message
			if err = imp.next(&m); err == nil {
				err = imp.message(ctx, &m)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	_, err := imp.dec.Token()
	return err
}

// event adds one event of an export to the batch, once the import's
// replay has held it to the bounds of a live write (engine.Import.Check).
func (imp *importer) event(ctx context.Context, e *parley.Event) error {
	if imp.im == nil {
		var first *parley.Conversation
		if e.Seq == 1 && e.Type == parley.EventConversationCreated {
			first = new(parley.Conversation)
			if err := json.Unmarshal(e.Data, first); err != nil {
				return parley.Errorf(parley.EINVALID, "row %d: conversation.created: %v", imp.row, err)
			}
		}
		if err := imp.start(ctx, first); err != nil {
			return err
		}
	}
	want := imp.im.LastSeq() + int64(len(imp.events)) + 1
	if e.Seq == 1 && e.Type == parley.EventConversationCreated && !imp.created {
		imp.created = true // made again by BeginImport, with the new epoch
		return nil
	}
	switch {
	case e.Seq != want:
		return parley.Errorf(parley.EINVALID, "row %d: event seq %d where %d comes next (seqs are dense from 1, conversation.created first)", imp.row, e.Seq, want)
	case !parley.KnownEventType(e.Type) || e.Type == parley.EventConversationCreated:
		return parley.Errorf(parley.EINVALIDVALUE, "row %d: event %d has type %q", imp.row, e.Seq, e.Type)
	case len(e.Data) == 0:
		return parley.Errorf(parley.EINVALID, "row %d: event %d has no data", imp.row, e.Seq)
	}
	// Stored data is compact and HTML-escaped, as json.Marshal writes it.
	data, err := json.Marshal(e.Data)
	if err != nil {
		return parley.Errorf(parley.EINVALID, "row %d: event %d: data: %v", imp.row, e.Seq, err)
	}
	e.Data = data
	if err := imp.im.Check(e); err != nil {
		return parley.Errorf(parley.ErrorCode(err), "row %d: event %d (%s): %s", imp.row, e.Seq, e.Type, parley.ErrorMessage(err))
	}
	imp.events = append(imp.events, *e)
	if len(imp.events) >= batchSize {
		return imp.flush(ctx)
	}
	return nil
}

// message adds one message row of an export to the batch, after checking it
// against the rows before it: rows come in seq order, and a reply's parent
// is an earlier row of the same conversation with one level less.
func (imp *importer) message(ctx context.Context, m *parley.Message) error {
	if err := imp.start(ctx, nil); err != nil {
		return err
	}
	if len(imp.events) > 0 {
		// Rows follow the events: write the events first.
		if err := imp.flush(ctx); err != nil {
			return err
		}
	}
	if err := imp.checkRow(ctx, m); err != nil {
		return parley.Errorf(parley.ErrorCode(err), "row %d: message %q: %s", imp.row, m.ID, parley.ErrorMessage(err))
	}
	imp.add(m)
	if len(imp.msgs) >= batchSize {
		return imp.flush(ctx)
	}
	return nil
}

// checkRow checks a message row: as every message is checked, and against
// the log (engine.Import.CheckRow), in seq order, and in its thread.
func (imp *importer) checkRow(ctx context.Context, m *parley.Message) error {
	last := imp.im.LastSeq()
	prev := imp.lastRowSeq
	if m.Seq <= prev || m.Seq > last {
		return parley.Errorf(parley.EINVALID, "seq %d is not after the row before (%d) and within the log (%d)", m.Seq, prev, last)
	}
	if err := imp.im.CheckRow(m); err != nil {
		return err
	}
	imp.lastRowSeq = m.Seq
	if m.ReplyTo == "" {
		if m.Depth != 0 {
			return parley.Errorf(parley.EINVALID, "depth %d without a replyTo", m.Depth)
		}
		return nil
	}
	if m.ReplyTo == m.ID {
		return parley.Errorf(parley.EINVALID, "replies to itself")
	}
	parent, err := imp.lookup(ctx, m.ReplyTo)
	if err != nil {
		return err
	}
	if parent == nil {
		if m.Legacy != nil && m.Depth == 0 {
			return nil // legacy data may name a parent that is missing
		}
		return parley.Errorf(parley.EINVALID, "replyTo %q is not an earlier message", m.ReplyTo)
	}
	if m.Depth != parent.Depth+1 {
		return parley.Errorf(parley.EINVALID, "depth %d but its parent %q has depth %d", m.Depth, parent.ID, parent.Depth)
	}
	return nil
}
