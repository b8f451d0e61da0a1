package transport

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/parleyhq/parley"
)

// ParseSeq reads the seq of a resume position exactly as the server writes
// it: a whole number without sign or leading zeros that fits in 64 bits.
func ParseSeq(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// Position reads a resume position from Last-Event-ID or ?after=SEQ[&epoch=E],
// exactly as the server writes them: "<epoch>:<seq>", where an epoch is
// what the server makes (parley.ValidEpoch) and a seq is ParseSeq's. The
// header wins over the query, but both must be well formed; anything else,
// a parameter given twice, or an epoch without after, is EINVALID. nil
// means no position: start with a snapshot. An empty Last-Event-ID is none,
// as a browser that has no id sends none.
func Position(r *http.Request) (*parley.Position, error) {
	q := r.URL.Query()
	afters, epochs, ids := q["after"], q["epoch"], r.Header.Values("Last-Event-ID")
	if len(afters) > 1 || len(epochs) > 1 || len(ids) > 1 {
		return nil, parley.Errorf(parley.EINVALID, "give after, epoch and Last-Event-ID at most once each")
	}
	var from *parley.Position
	switch {
	case len(afters) == 1:
		n, ok := ParseSeq(afters[0])
		if !ok {
			return nil, parley.Errorf(parley.EINVALID, "after must be a seq (digits, no sign or leading zeros), not %q", afters[0])
		}
		from = &parley.Position{Seq: n}
		if len(epochs) == 1 {
			if !parley.ValidEpoch(epochs[0]) {
				return nil, parley.Errorf(parley.EINVALID, "epoch must be %d characters of 0-9 a-f, as the server sends it, not %q", parley.EpochLen, epochs[0])
			}
			from.Epoch = epochs[0]
		}
	case len(epochs) == 1:
		return nil, parley.Errorf(parley.EINVALID, "epoch is given without after")
	}
	if len(ids) == 0 || ids[0] == "" {
		return from, nil
	}
	epoch, seq, _ := strings.Cut(ids[0], ":")
	n, ok := ParseSeq(seq)
	if !ok || !parley.ValidEpoch(epoch) {
		return nil, parley.Errorf(parley.EINVALID, "Last-Event-ID must be \"<epoch>:<seq>\" as the server sent it, not %q", ids[0])
	}
	return &parley.Position{Seq: n, Epoch: epoch}, nil
}
