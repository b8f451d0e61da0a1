package parley

import "github.com/google/uuid"

// EpochLen is the length of an epoch: eight lowercase hexadecimal digits.
const EpochLen = 8

// ValidEpoch reports whether s is an epoch as this server makes them
// (NewEpoch): exactly EpochLen characters of 0-9 a-f. A resume position
// with anything else in it was not made by a server.
func ValidEpoch(s string) bool {
	if len(s) != EpochLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NewEpoch returns a new random epoch: the first EpochLen hexadecimal
// digits of a random UUID. A conversation gets one when it is made, and a
// new one when its history is replaced (a restore, a machine that went
// down under SQLite).
func NewEpoch() string { return uuid.NewString()[:EpochLen] }
