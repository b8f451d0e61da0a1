package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// patchFields are the fields a PATCH of a conversation may give: what may
// change of a conversation after it was made.
var patchFields = []string{"title", "metadata", "participants", "members"}

// updateConversation serves PATCH /v1/conversations/{id}: its owner or an
// admin changes its title, metadata (a JSON merge patch), participants or
// members; the answer is the conversation's view, as GET gives it.
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot change conversations", who.Kind))
		return
	}
	patch, err := s.decodePatch(w, r)
	if err == nil {
		var v any
		v, err = s.eng.UpdateConversation(r.Context(), r.PathValue("id"), conv.UpdateConversation{
			Actor: conv.Actor{AgentID: who.AgentID, Admin: who.CanManage()}, Patch: patch,
		})
		if err == nil {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	writeErr(w, s.log, err)
}

// decodePatch reads a conversation's patch: one JSON object of the
// fields patchFields names, at least one; another field is refused by
// name (422), as a field that cannot change.
func (s *Server) decodePatch(w http.ResponseWriter, r *http.Request) (parley.ConversationPatch, error) {
	var p parley.ConversationPatch
	var fields map[string]json.RawMessage
	if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &fields); err != nil {
		return p, err
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(patchFields, k) {
			return p, parley.Errorf(parley.EINVALIDVALUE, "field %q cannot be changed: a conversation's title, metadata, participants and members can (its id, turnPolicy, messageFormat and turnLeaseMs are fixed when it is made)", k).With("field", k)
		}
		if k != "metadata" && string(fields[k]) == "null" {
			return p, parley.Errorf(parley.EINVALID, "%s must be %s, not null", k, map[bool]string{true: "a string", false: `an object {"add": [...], "remove": [...]}`}[k == "title"])
		}
	}
	if len(fields) == 0 {
		return p, parley.Errorf(parley.EINVALID, "the patch changes nothing: give at least one of title, metadata, participants, members")
	}
	// The fields again, into their types (each is at most the body).
	raw, err := json.Marshal(fields)
	if err != nil {
		return p, parley.Errorf(parley.EINVALID, "invalid JSON body")
	}
	if err := decodeBytes(raw, int64(len(raw)), &p); err != nil {
		return p, err
	}
	if m, ok := fields["metadata"]; ok {
		p.Metadata = m // null too: it removes the metadata
	}
	return p, nil
}
