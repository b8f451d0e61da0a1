package parley

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ParseEvent reads an event. The form AppendJSON writes (every event a
// server sends) is read without reflection, unless a string in it holds an
// escape; any other JSON of an event is read by encoding/json, to the same
// Event.
func ParseEvent(data []byte) (Event, error) {
	if e, ok := parseEventFast(string(data)); ok {
		return e, nil
	}
	var e Event
	err := json.Unmarshal(data, &e)
	return e, err
}

// parseEventFast reads s as AppendJSON writes an event, or reports false.
func parseEventFast(s string) (e Event, ok bool) {
	rest := s
	// lit consumes a fixed piece of text.
	lit := func(p string) bool {
		if !strings.HasPrefix(rest, p) {
			return false
		}
		rest = rest[len(p):]
		return true
	}
	str := func(key string) (string, bool) {
		if !lit(key) || !lit(`"`) {
			return "", false
		}
		i := indexQuoteOrBackslash(rest)
		if i < 0 || rest[i] != '"' {
			return "", false
		}
		v := rest[:i]
		rest = rest[i+1:]
		return v, true
	}
	num := func(key string) (int64, bool) {
		if !lit(key) {
			return 0, false
		}
		i := 0
		for i < len(rest) && (rest[i] == '-' || ('0' <= rest[i] && rest[i] <= '9')) {
			i++
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || (i > 1 && rest[0] == '0') || (i > 2 && rest[:2] == "-0") {
			return 0, false // not as JSON writes a number
		}
		rest = rest[i:]
		return n, true
	}
	if e.ConversationID, ok = str(`{"conversationId":`); !ok {
		return e, false
	}
	if e.Seq, ok = num(`,"seq":`); !ok {
		return e, false
	}
	if e.Type, ok = str(`,"type":`); !ok {
		return e, false
	}
	turn, ok := num(`,"turn":`)
	if !ok || turn != int64(int(turn)) {
		return e, false
	}
	e.Turn = int(turn)
	if strings.HasPrefix(rest, `,"turnId":`) {
		if e.TurnID, ok = str(`,"turnId":`); !ok {
			return e, false
		}
	}
	if strings.HasPrefix(rest, `,"agentId":`) {
		if e.AgentID, ok = str(`,"agentId":`); !ok {
			return e, false
		}
	}
	fin, ok := str(`,"finality":`)
	if !ok {
		return e, false
	}
	e.Finality = Finality(fin)
	if lit(`,"ts":null`) {
		e.Time = Time{}
	} else {
		ts, ok := str(`,"ts":`)
		if !ok {
			return e, false
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return e, false
		}
		e.Time = NewTime(t)
	}
	if !lit(`,"data":`) || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return e, false
	}
	raw := []byte(rest[:len(rest)-1])
	if isSpace(raw[0]) || isSpace(raw[len(raw)-1]) || !json.Valid(raw) {
		return e, false
	}
	e.Data = raw
	return e, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
