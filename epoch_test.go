package parley

import "testing"

// TestValidEpoch: every epoch the server makes is valid, and nothing else
// of the shapes a client might send is.
func TestValidEpoch(t *testing.T) {
	t.Parallel()
	for range 1000 {
		if e := NewEpoch(); !ValidEpoch(e) {
			t.Fatalf("NewEpoch made %q, which ValidEpoch refuses", e)
		}
	}
	for _, s := range []string{"", "0123456", "012345678", "0123456G", "ABCDEF01", "0123:567", " 1234567", "stale", "e", "0123456\x00"} {
		if ValidEpoch(s) {
			t.Errorf("ValidEpoch(%q) is true", s)
		}
	}
}
