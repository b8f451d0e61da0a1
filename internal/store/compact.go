package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
)

// Retention: once a streamed message has ended, its row holds all its text
// and tool calls, and its chunk and part.updated events matter only to a
// reader that resumes from a position inside its stream. Compaction replaces
// runs of such events, of messages that ended before a cutoff, with one
// stored row per run: a span. A span is stored at the seq of the last event
// it replaces, with type parley.EventCompacted and data {"from":FIRST}; a
// read expands it into one tombstone event per seq (type compacted, data
// {}), so that seqs stay dense and every read by position stays exact: a
// reader that resumes inside a span gets the tombstones after its position,
// then the message.updated that ends the message, and folds to the row.
// Tombstones carry no text, so nothing is ever shown twice, and the
// message.updated that follows them carries everything they did.
//
// The event whose data is a message's row (its message.updated that ended
// it, or the message event of one posted whole) need not hold that data
// twice either: once the message ended before the cutoff, compaction
// stores the event as a reference to the row (its ref column names the
// message, its data is empty), and reads give it the row's JSON again,
// byte for byte: the event is referenced only when the row gives back its
// data exactly. A message's row changes no more once it ended, but a
// revert removes it: the backend then puts the data back into the event
// (Unref) before the row goes. So the log reads the same before and after
// compaction, but for the tombstones, and the text of an ended message is
// stored once, in its row.

// TombstoneData is the data of a tombstone event, as every read returns it.
var TombstoneData = json.RawMessage(`{}`)

// SpanData is the stored data of a span whose first seq is from.
func SpanData(from int64) []byte {
	return append(strconv.AppendInt([]byte(`{"from":`), from, 10), '}')
}

// spanFrom reads the first seq of a stored compacted row: its data's
// "from", or seq itself for a single tombstone (data {}). A from that is
// not before seq is taken as seq.
func spanFrom(seq int64, data []byte) int64 {
	var d struct {
		From int64 `json:"from"`
	}
	if json.Unmarshal(data, &d) != nil || d.From <= 0 || d.From > seq {
		return seq
	}
	return d.From
}

// Expand appends to out the events a stored row stands for, reading after
// seq after (a page's position), at most n of them: the row itself, or for
// a compacted row the tombstones of its seqs after both after and prev, the
// seq of the row before it in the page (0 for none), so that whatever a
// span's data says no seq is returned twice.
func Expand(out []parley.Event, row parley.Event, after, prev int64, n int) []parley.Event {
	if n <= 0 {
		return out
	}
	if row.Type != parley.EventCompacted {
		return append(out, row)
	}
	from := max(spanFrom(row.Seq, row.Data), after+1, prev+1)
	for seq := from; seq <= row.Seq && n > 0; seq++ {
		e := row
		e.Seq, e.Data = seq, TombstoneData
		out = append(out, e)
		n--
	}
	return out
}

// EventPage turns the stored rows of a ReadEvents page (seq > p.After, in
// seq order) into its events: at most the backend's bound on p.Limit of
// them and, with p.MaxBytes, ending after the event that brings their data
// to it. Backends read rows with their own query and hand them to Add, row
// by row, until it says the page is full.
type EventPage struct {
	p      ReadEventsParams
	limit  int
	prev   int64
	size   int
	Events []parley.Event
}

// NewEventPage starts a page for p; limit is the bound the backend applies
// to p.Limit.
func NewEventPage(p ReadEventsParams, limit int) *EventPage {
	return &EventPage{p: p, limit: max(limit, 1), prev: p.After}
}

// Add adds the events of one stored row and reports whether the page is
// full.
func (x *EventPage) Add(row parley.Event) bool {
	start := len(x.Events)
	x.Events = Expand(x.Events, row, x.p.After, x.prev, x.limit-start)
	x.prev = row.Seq
	for i := start; i < len(x.Events); i++ {
		x.size += len(x.Events[i].Data)
		if i+1 >= x.limit || (x.p.MaxBytes > 0 && x.size >= x.p.MaxBytes) {
			x.Events = x.Events[:i+1]
			return true
		}
	}
	return false
}

// CompactionCursor is where compaction of one conversation stands.
type CompactionCursor struct {
	ConversationID string
	// LastSeq is the seq of the conversation's last event.
	LastSeq int64
	// Through is the seq up to which every event was looked at: it is 0 for
	// a conversation never compacted (or whose epoch changed since).
	Through int64
	// Due is when compaction may next find something to do; zero if never.
	Due parley.Time
}

// Pending reports whether compaction of the conversation is due at now.
func (c CompactionCursor) Pending(now time.Time) bool {
	return c.LastSeq > c.Through && !c.Due.After(now)
}

// CompactionCursorsParams are the arguments of Store.CompactionCursors.
type CompactionCursorsParams struct {
	// After is the id after which the page starts ("" for the first).
	After string
	Limit int
}

// CompactParams are the arguments of Store.Compact.
type CompactParams struct {
	ConversationID string
	// Before: the events of messages that ended before it are compacted
	// (now less the retention).
	Before parley.Time
	// Now is when the compaction runs.
	Now parley.Time
	// MaxRows bounds the stored rows one call reads (default 2000).
	MaxRows int
}

// Rows returns MaxRows, or its default.
func (p CompactParams) Rows() int {
	if p.MaxRows <= 0 {
		return 2000
	}
	return p.MaxRows
}

// CompactResult says what one Compact did.
type CompactResult struct {
	// Compacted counts the events it made tombstones of, and Removed the
	// stored rows it removed (a span replaces many rows with one).
	Compacted int64
	Removed   int
	// Referenced counts the events it made references to their message's
	// row.
	Referenced int
	// Through is the seq up to which the conversation was looked at.
	Through int64
	// Due is when another call may find more to compact; More says it may
	// at once (the call stopped at MaxRows).
	Due  parley.Time
	More bool
}

// LogRow is what compaction reads of one stored row of a log.
type LogRow struct {
	// Seq is its seq (of a span, the last), From its first (Seq, but for a
	// span).
	Seq, From int64
	Type      string
	// MessageID is the message of a chunk or part.updated event ("" for a
	// chunk of no message: the stream frames of messageFormat v1), or of a
	// message or message.updated event not yet referenced.
	MessageID string
	Time      parley.Time
}

// ReadLogRow makes the LogRow of a stored row: data is the row's data for
// a chunk, part.updated or compacted row, and messageID the id in the data
// of a message or message.updated event that is not a reference (backends
// read it with the query, not the data).
func ReadLogRow(seq int64, typ string, ts parley.Time, data []byte, messageID string) LogRow {
	r := LogRow{Seq: seq, From: seq, Type: typ, Time: ts}
	switch typ {
	case parley.EventMessage, parley.EventMessageUpdated:
		r.MessageID = messageID
	case parley.EventCompacted:
		r.From = spanFrom(seq, data)
	case parley.EventChunk:
		c, _ := parley.ParseChunk(data)
		r.MessageID = c.MessageID
	case parley.EventPartUpdated, parley.EventInputAnswered, parley.EventInputAcked:
		var u struct {
			MessageID string `json:"messageId"`
		}
		_ = json.Unmarshal(data, &u)
		r.MessageID = u.MessageID
	}
	return r
}

// MessageIDs returns the messages that rows name, each once.
func MessageIDs(rows []LogRow) []string {
	seen := map[string]bool{}
	var ids []string
	for _, r := range rows {
		if r.MessageID != "" && !seen[r.MessageID] {
			seen[r.MessageID] = true
			ids = append(ids, r.MessageID)
		}
	}
	return ids
}

// MessageEnd is what compaction knows of a message named by events.
type MessageEnd struct {
	// Found is false for a message whose row is gone (reverted).
	Found bool
	// Ended is true once the message no longer streams; At is when it
	// ended (its row's updatedAt).
	Ended bool
	At    parley.Time
	// RowSeq is the seq of the event that last wrote its row (its
	// updatedSeq, or its seq).
	RowSeq int64
}

// CompactSpan is one run of rows, seqs From to To, that compaction
// replaces with one stored span.
type CompactSpan struct {
	From, To int64
	// Rows is how many stored rows it replaces, Fresh how many of its seqs
	// were not compacted before.
	Rows  int
	Fresh int64
	// Time is the time of its last event.
	Time parley.Time
}

// CompactRef is a message or message.updated event that compaction
// stores as a reference to its message's row, if the row gives back its
// data exactly.
type CompactRef struct {
	Seq       int64
	MessageID string
}

// CompactionPlan is what Compact does with the rows it read.
type CompactionPlan struct {
	Spans   []CompactSpan
	Refs    []CompactRef
	Through int64
	Due     parley.Time
	More    bool
}

// PlanCompaction decides, of the rows of one log read after seq through
// (in seq order; complete when they reach the log's end), which runs become
// spans: a chunk or part.updated event of a message that ended before
// p.Before, or whose row is gone and which is itself older than p.Before,
// and rows compacted before. Runs of one row already compacted are left as
// they are. The event that last wrote the row of a message that ended
// before p.Before becomes a reference to the row (Refs), if its data is
// the row's. The cursor moves to the row before the first event whose
// message may still become compactable (one that streams, or ended after
// p.Before), or to the last row read; Due is when that event may become
// compactable, or, with nothing left undecided, an eighth of the retention
// from now (new events cannot become compactable sooner than the retention).
func PlanCompaction(rows []LogRow, ends map[string]MessageEnd, through int64, complete bool, p CompactParams) CompactionPlan {
	retention := p.Now.Sub(p.Before.Time)
	plan := CompactionPlan{Through: through}
	undecided := false
	var due time.Time
	wait := func(at time.Time) {
		if due.IsZero() || at.Before(due) {
			due = at
		}
	}
	// hold keeps the cursor before r, the first row that is not decided yet.
	hold := func(r LogRow) {
		if !undecided {
			undecided = true
			plan.Through = r.From - 1
		}
	}
	var run []LogRow
	flush := func() {
		if len(run) > 1 || len(run) == 1 && run[0].Type != parley.EventCompacted {
			s := CompactSpan{From: run[0].From, To: run[len(run)-1].Seq, Rows: len(run), Time: run[len(run)-1].Time}
			for _, r := range run {
				if r.Type != parley.EventCompacted {
					s.Fresh += r.Seq - r.From + 1
				}
			}
			plan.Spans = append(plan.Spans, s)
		}
		run = run[:0]
	}
	next := through + 1
	for _, r := range rows {
		if r.From != next {
			flush() // not adjacent (never, in a dense log): no span across
		}
		next = r.Seq + 1
		compactable := r.Type == parley.EventCompacted
		if (r.Type == parley.EventMessage || r.Type == parley.EventMessageUpdated) && r.MessageID != "" {
			// Only the event that last wrote an ended message's row can hold
			// the row's data: of a message reverted, still streaming (it ends
			// with an event to come) or written again since, none is looked at.
			switch end := ends[r.MessageID]; {
			case !end.Found || !end.Ended || end.RowSeq != r.Seq:
			case end.At.Before(p.Before.Time):
				plan.Refs = append(plan.Refs, CompactRef{Seq: r.Seq, MessageID: r.MessageID})
			default:
				wait(end.At.Add(retention))
				hold(r)
			}
		}
		if streamEvent(r.Type) && r.MessageID != "" {
			switch end := ends[r.MessageID]; {
			case !end.Found:
				compactable = r.Time.Before(p.Before.Time)
				if !compactable {
					wait(r.Time.Add(retention))
				}
			case end.Ended && end.At.Before(p.Before.Time):
				compactable = true
			case end.Ended:
				wait(end.At.Add(retention))
			default:
				wait(p.Now.Add(retention)) // it streams: it ends no sooner than now
			}
			if !compactable {
				hold(r)
			}
		}
		if compactable {
			run = append(run, r)
		} else {
			flush()
		}
		if !undecided {
			plan.Through = r.Seq
		}
	}
	flush()
	switch {
	case undecided:
		plan.Due = parley.NewTime(due)
	case !complete:
		plan.Due, plan.More = p.Now, true
	default:
		plan.Due = parley.NewTime(p.Now.Add(retention / 8))
	}
	return plan
}

// ErrCompactionRaced is the EBUSY of a compaction whose rows changed
// between its read and its write (the conversation was deleted, or made
// again): nothing was written.
func ErrCompactionRaced(id string) error {
	return parley.Errorf(parley.EBUSY, "conversation %s changed while it was compacted; nothing was written", id)
}

// RenewEpochsParams are the arguments of Store.RenewEpochs.
type RenewEpochsParams struct {
	// Epoch makes a new epoch; it is called once per conversation.
	Epoch func() string
}

// EpochRenewal is one conversation as RenewEpochs reads and writes it:
// its record's data and its conversation.created event's (nil if it has
// none), as stored, and the epoch they say (Head.Epoch: written by
// RenewAll).
type EpochRenewal struct {
	ID            string
	Data, Created []byte
	Epoch         string
}

// RenewAll is RenewEpochs over a backend's two steps: read reads the
// conversations after an id, in id order, a batch at a time (none once
// done); write stores one with its new epoch. It returns how many it
// renewed.
func RenewAll(p RenewEpochsParams, read func(after string) ([]EpochRenewal, error), write func(EpochRenewal) error) (int, error) {
	n := 0
	for after := ""; ; {
		batch, err := read(after)
		if err != nil || len(batch) == 0 {
			return n, err
		}
		for _, r := range batch {
			epoch := p.Epoch()
			r.Epoch = epoch
			if r.Data, err = WithEpoch(r.Data, epoch); err != nil {
				return n, err
			}
			if r.Created != nil {
				if r.Created, err = WithEpoch(r.Created, epoch); err != nil {
					return n, err
				}
			}
			if err := write(r); err != nil {
				return n, err
			}
			n++
		}
		after = batch[len(batch)-1].ID
	}
}

// RenewBatch is how many conversations RenewAll reads at a time.
const RenewBatch = 1000

// WithEpoch returns the JSON of a conversation (data, as stored: an
// object with an "epoch" string) with its epoch set to epoch, every other
// byte as it was.
func WithEpoch(data []byte, epoch string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	bad := fmt.Errorf("a conversation's JSON has no epoch: %.80s", data)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if key != "epoch" {
			continue
		}
		end := dec.InputOffset()
		// The value starts after the colon and any space after the key.
		start += int64(bytes.IndexByte(data[start:end], ':') + 1)
		for start < end && (data[start] == ' ' || data[start] == '\t' || data[start] == '\n' || data[start] == '\r') {
			start++
		}
		quoted, _ := json.Marshal(epoch)
		out := make([]byte, 0, len(data)+len(quoted))
		out = append(append(append(out, data[:start]...), quoted...), data[end:]...)
		return out, nil
	}
	return nil, bad
}

// RefData is the data of a stored event that refers to the row of message
// ref: the row's JSON as clients read it. row is nil when the row is gone,
// which Unref never lets happen.
func RefData(seq int64, ref string, row []byte) ([]byte, error) {
	if row == nil {
		return nil, fmt.Errorf("event %d refers to the row of message %s, which is gone", seq, ref)
	}
	return WireRow(row)
}

// Unref returns, for the row of a message about to be removed, the data
// that goes back into the event that may refer to it, and the seqs such an
// event may have (its row's seq, and its updatedSeq).
func Unref(row []byte) (data []byte, seqs []int64, err error) {
	head, _, err := ReadRowHead(row)
	if err != nil {
		return nil, nil, err
	}
	data, err = WireRow(row)
	return data, []int64{head.Seq, max(head.UpdatedSeq, head.Seq)}, err
}

// streamEvent reports whether events of type typ carry a piece of a
// streaming message that its row holds once it ends (text, a tool call's
// change, an input request opened, ended or taken): those compaction
// replaces.
func streamEvent(typ string) bool {
	switch typ {
	case parley.EventChunk, parley.EventPartUpdated, parley.EventInputAnswered, parley.EventInputAcked:
		return true
	}
	return false
}
