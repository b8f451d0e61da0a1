package conv_test

import "testing"

// FuzzDecide reads the fuzz input as a sequence of commands: its first byte
// picks the turn policy and the number of participants, and every later byte
// is one choice of the command generator of the property tests (past the end
// of the input every choice is 0). After each command it checks the same
// invariants as TestRandomCommandSequences.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 5, 2, 6, 1, 0, 3, 7, 7, 7, 2, 2, 9, 9, 9, 4})
	f.Add([]byte{2, 0, 1, 0, 3, 2, 1, 11, 0, 1, 0, 12, 1, 0, 13, 2, 1, 9, 0, 3})
	f.Add([]byte{4, 7, 0, 1, 2, 16, 5, 17, 11, 8, 1, 0, 0, 0, 9, 2, 0, 0, 18, 11, 19})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice over"))
	f.Add([]byte("\x05claim, wait, claim again; reset and claim; abort; delegate; stream x; finalize"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 2048 {
			return
		}
		sc := newScript(t, policies[int(data[0])%3], agents[:3+int(data[0]/3)%2]...)
		sc.env.Limits = randomLimits(uint64(data[0] / 6))
		sc.env.Limits.MaxQueuedPrompts = smallQueue
		pos := 1
		next := func(n int) int {
			if pos >= len(data) {
				return 0
			}
			v := int(data[pos]) % n
			pos++
			return v
		}
		g := &gen{sc: sc, next: next, fullEvery: 64}
		for pos < len(data) {
			g.step()
		}
		checkInvariants(sc)
	})
}
