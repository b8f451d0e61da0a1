package transport

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/parleyhq/parley"
)

// FuzzPosition feeds the resume position reader arbitrary values. It may
// not panic; what it accepts must be written exactly as the server writes
// it: a Last-Event-ID or an after and epoch accepted come back byte for
// byte from the position read.
func FuzzPosition(f *testing.F) {
	for _, s := range [][3]string{
		{"51294980:117", "", ""}, {"", "117", "51294980"}, {"", "0", ""}, {":5", "", ""}, {"E:+5", "", ""}, {"E:05", "", ""},
		{"E:5:6", "", ""}, {"51294980:5:6", "", ""}, {"", "-1", ""}, {"", "05", ""}, {"", "99999999999999999999", ""},
		{"", "5", "stale"}, {"", "", "51294980"}, {"51294980:9223372036854775807", "1", "ABCDEF01"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, lastEventID, after, epoch string) {
		q := url.Values{}
		if after != "" {
			q.Set("after", after)
		}
		if epoch != "" {
			q.Set("epoch", epoch)
		}
		r := httptest.NewRequest("GET", "/?"+q.Encode(), nil)
		if lastEventID != "" {
			r.Header["Last-Event-Id"] = []string{lastEventID}
		}
		pos, err := Position(r)
		switch {
		case err != nil:
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Fatalf("position refused with %v", err)
			}
		case lastEventID != "":
			if pos == nil || pos.Epoch+":"+strconv.FormatInt(pos.Seq, 10) != lastEventID {
				t.Fatalf("Last-Event-ID %q read as %+v", lastEventID, pos)
			}
		case after != "":
			if pos == nil || strconv.FormatInt(pos.Seq, 10) != after || pos.Epoch != epoch {
				t.Fatalf("after %q epoch %q read as %+v", after, epoch, pos)
			}
		case pos != nil || epoch != "":
			t.Fatalf("no after, epoch %q: read as %+v", epoch, pos)
		}
	})
}
