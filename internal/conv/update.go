package conv

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// UpdateConversation changes a conversation's title, metadata,
// participants or members (conversation.updated). Only its owner or an
// admin may; the result is held to the bounds a new conversation is.
type UpdateConversation struct {
	Actor
	Patch parley.ConversationPatch
}

func (c UpdateConversation) authorize(s State) error {
	if c.Admin || c.AgentID != "" && c.AgentID == Owner(s.Conversation) {
		return nil
	}
	return parley.Errorf(parley.EFORBIDDEN, "only the agent that created conversation %s or an admin may change it; not %s", s.Conversation.ID, c.AgentID)
}

func (c UpdateConversation) decide(d *decider) error { return d.update(c) }

// update decides a change of the conversation: nothing is written if it
// changes nothing.
func (d *decider) update(c UpdateConversation) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	old := d.s.Conversation
	next, err := Patched(old, c.Patch, d.env.Limits)
	if err != nil {
		return err
	}
	if sameSettings(old, next) {
		return nil
	}
	// Whoever leaves may hold no part of the open turn or the claim on the
	// next: those are ended first (an abort, or the turn's close).
	after := State{Conversation: next}
	for _, agent := range Members(old) {
		if after.IsMember(agent) {
			continue
		}
		switch {
		case d.s.Open != nil && d.s.Open.Owner == agent:
			return d.conflict(parley.ETURNCONFLICT, "%s owns the open turn %d of conversation %s: abort its turn or wait for it to close before removing it", agent, d.s.Open.Turn, old.ID)
		case d.s.delegated(agent):
			return d.conflict(parley.ETURNCONFLICT, "%s is delegated into the open turn %d of conversation %s: abort that turn or wait for it to close before removing it", agent, d.s.Open.Turn, old.ID)
		case d.s.Claim != nil && d.s.Claim.AgentID == agent:
			return d.conflict(parley.ECLAIMCONFLICT, "%s holds the claim on turn %d of conversation %s: wait for it to take the turn or for the claim to lapse before removing it", agent, d.s.Claim.Turn, old.ID)
		}
	}
	by := c.AgentID
	if by == "" {
		by = string(parley.TokenAdmin)
	}
	u := parley.ConversationUpdate{Title: next.Title, Metadata: next.Metadata, Participants: next.Participants, Members: next.Members, UpdatedBy: by}
	if u.Members == nil {
		u.Members = []string{}
	}
	e := d.emit(parley.EventConversationUpdated, 0, "", by, parley.FinalityNone, u)
	d.out.Result.Seq = e.Seq
	return nil
}

// Patched returns the conversation c with patch p applied, checked as a
// new conversation's settings are (title, metadata, participants and
// members, their ids and their bounds). Names removed must be valid ids
// too; a name added that is there already, or removed that is not, is
// left as it is.
func Patched(c parley.Conversation, p parley.ConversationPatch, l Limits) (parley.Conversation, error) {
	if l == (Limits{}) {
		l = DefaultLimits
	}
	if p.Empty() {
		return c, parley.Errorf(parley.EINVALID, "the patch changes nothing: give at least one of title, metadata, participants, members")
	}
	if p.Title != nil {
		c.Title = *p.Title
	}
	if p.Metadata != nil {
		m, err := mergeMetadata(c.Metadata, p.Metadata)
		if err != nil {
			return c, err
		}
		c.Metadata = m
	}
	var err error
	if c.Participants, err = changeNames("participants", c.Participants, p.Participants, l); err != nil {
		return c, err
	}
	if c.Members, err = changeNames("members", c.Members, p.Members, l); err != nil {
		return c, err
	}
	if c.Participants == nil {
		c.Participants = []string{}
	}
	if len(c.Members) == 0 {
		c.Members = nil
	}
	return c, checkConversation(c, l)
}

// changeNames applies ch to list (a copy); the result is checked with
// the rest of the conversation.
func changeNames(field string, list []string, ch *parley.NameChanges, l Limits) ([]string, error) {
	if ch == nil {
		return list, nil
	}
	if n := len(ch.Add) + len(ch.Remove); n > 2*l.MaxParticipants {
		return nil, parley.Errorf(parley.ETOOLARGE, "%s names %d agents to add and remove; the limit is %d", field, n, 2*l.MaxParticipants)
	}
	for i, r := range ch.Remove {
		if !parley.ValidID(r) {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "%s.remove[%d] %q is not a valid agent id", field, i, r)
		}
	}
	out := slices.DeleteFunc(slices.Clone(list), func(a string) bool { return slices.Contains(ch.Remove, a) })
	for i, a := range ch.Add {
		if !parley.ValidID(a) {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "%s.add[%d] %q is not a valid agent id", field, i, a)
		}
		if !slices.Contains(out, a) && !slices.Contains(ch.Remove, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// mergeMetadata applies the JSON merge patch (RFC 7396) patch to the
// metadata old; no metadata is null. A result of null is no metadata.
func mergeMetadata(old, patch json.RawMessage) (json.RawMessage, error) {
	if !json.Valid(patch) {
		return nil, parley.Errorf(parley.EINVALID, "metadata is not valid JSON")
	}
	var target any
	if len(old) > 0 {
		if err := decodeExact(old, &target); err != nil {
			return nil, parley.Errorf(parley.EINVALID, "the stored metadata is not valid JSON")
		}
	}
	var p any
	if err := decodeExact(patch, &p); err != nil {
		return nil, parley.Errorf(parley.EINVALID, "metadata is not valid JSON")
	}
	merged := mergePatch(target, p)
	if merged == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(merged); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decodeExact decodes JSON keeping each number as it was written
// (json.Number), so that a merge leaves every value it does not change,
// and every one it sets, exactly as sent: a float64 would round a large
// integer, and cannot hold some numbers at all.
func decodeExact(data []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// mergePatch is RFC 7396's MergePatch(target, patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// sameSettings reports whether a and b have the same title, metadata (as
// JSON values), participants and members.
func sameSettings(a, b parley.Conversation) bool {
	return a.Title == b.Title && slices.Equal(a.Participants, b.Participants) && slices.Equal(a.Members, b.Members) && sameJSON(a.Metadata, b.Metadata)
}

// sameJSON reports whether two JSON documents (none: null) hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil || len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// applyUpdate folds a conversation.updated event into s.
func applyUpdate(s State, e parley.Event) State {
	var u parley.ConversationUpdate
	if json.Unmarshal(e.Data, &u) == nil {
		s.Conversation = u.Apply(s.Conversation)
	}
	return s
}

// updated checks a replayed conversation.updated event: the conversation
// it leaves passes a new one's checks.
func (r *Replay) updated(e *parley.Event) ([]byte, error) {
	var u parley.ConversationUpdate
	if err := decode(e, &u); err != nil {
		return nil, err
	}
	switch {
	case e.Turn != 0 || e.Finality != parley.FinalityNone:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a conversation.updated event is in turn 0 and closes nothing")
	case !parley.ValidID(u.UpdatedBy):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "updatedBy %q is not a valid agent id", u.UpdatedBy)
	case len(u.Metadata) > 0 && !json.Valid(u.Metadata):
		return nil, parley.Errorf(parley.EINVALID, "metadata is not valid JSON")
	}
	c := u.Apply(r.s.Conversation)
	if u.Members == nil {
		u.Members = []string{}
	}
	return encode(u, checkConversation(c, r.env.Limits))
}
