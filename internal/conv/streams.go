package conv

import (
	"bytes"
	"encoding/json"
	"iter"
	"slices"
	"strings"
)

// Streams are a conversation's messages still streaming, by message id.
//
// They are a short list, not a map: a conversation streams a few messages
// at once (Limits.MaxStreaming), and a State is a value that is copied on
// write, once for every delta folded into it, while runs and readers hold
// the states before. Copying a list of one stream allocates about a tenth
// of what copying the smallest map does. In JSON (the stored snapshot)
// they are an object keyed by message id, as when they were a map.
//
// The zero value holds no stream. Methods that change Streams return a new
// value and leave the receiver as it was.
type Streams struct {
	list []namedStream // in id order, so that equal Streams are alike
}

// namedStream is one entry of Streams.
type namedStream struct {
	id string
	st Stream
}

// byID orders namedStreams by id.
func byID(n namedStream, id string) int { return strings.Compare(n.id, id) }

// Len is the number of messages streaming.
func (s Streams) Len() int { return len(s.list) }

// IsZero reports whether no message streams (for omitzero).
func (s Streams) IsZero() bool { return len(s.list) == 0 }

// Get returns the stream of message id, if it streams.
func (s Streams) Get(id string) (Stream, bool) {
	for _, n := range s.list {
		if n.id == id {
			return n.st, true
		}
	}
	return Stream{}, false
}

// All yields each streaming message's id and stream, in id order.
func (s Streams) All() iter.Seq2[string, Stream] {
	return func(yield func(string, Stream) bool) {
		for _, n := range s.list {
			if !yield(n.id, n.st) {
				return
			}
		}
	}
}

// With returns s with message id's stream set to st.
func (s Streams) With(id string, st Stream) Streams {
	i, found := slices.BinarySearchFunc(s.list, id, byID)
	if found {
		out := slices.Clone(s.list)
		out[i].st = st
		return Streams{out}
	}
	out := make([]namedStream, 0, len(s.list)+1)
	out = append(out, s.list[:i]...)
	out = append(out, namedStream{id, st})
	return Streams{append(out, s.list[i:]...)}
}

// Without returns s without the streams of ids (s itself if it holds none
// of them).
func (s Streams) Without(ids ...string) Streams {
	gone := func(n namedStream) bool { return slices.Contains(ids, n.id) }
	if !slices.ContainsFunc(s.list, gone) {
		return s
	}
	out := slices.DeleteFunc(slices.Clone(s.list), gone)
	if len(out) == 0 {
		return Streams{}
	}
	return Streams{out}
}

// MarshalJSON writes s as an object keyed by message id, in id order.
func (s Streams) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range s.list {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(n.id)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(n.st)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object keyed by message id (or null).
func (s *Streams) UnmarshalJSON(data []byte) error {
	var m map[string]Stream
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*s = Streams{}
	for id, st := range m {
		s.list = append(s.list, namedStream{id, st})
	}
	slices.SortFunc(s.list, func(a, b namedStream) int { return strings.Compare(a.id, b.id) })
	return nil
}
