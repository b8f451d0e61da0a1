package engine

import "github.com/google/uuid"

// EpochLen is the length of an epoch: eight lowercase hexadecimal digits.
const EpochLen = 8

// newEpoch returns a random epoch: the first EpochLen hexadecimal digits of
// a random UUID.
func newEpoch() string { return uuid.NewString()[:EpochLen] }

// ValidEpoch reports whether s is an epoch as this server makes them
// (newEpoch): exactly EpochLen characters of 0-9 a-f. A resume position
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

// NewEpoch returns a new random epoch, as the server makes them: for a
// restore, which gives every conversation a new one.
func NewEpoch() string { return newEpoch() }
