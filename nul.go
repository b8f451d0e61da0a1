package parley

import "bytes"

// NUL. PostgreSQL refuses the character U+0000 in text and in jsonb (a
// \u0000 escape), which JSON and SQLite accept: a value holding it, once
// stored, fails every query of the other store that reads it as JSON, for
// everyone who shares the query. So Parley holds no NUL anywhere: every
// write refuses a value that holds one, in the rules, at the store, on
// both stores alike, with ErrNUL.

// HasNUL reports whether JSON text holds U+0000: as a \u0000 escape (not
// an escaped backslash followed by "u0000"), or as a raw byte (which no
// valid JSON holds, but a raw value might).
func HasNUL(data []byte) bool {
	if bytes.IndexByte(data, 0) >= 0 {
		return true
	}
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		at := i + j
		// The escape is one if an odd number of backslashes end at it.
		n := 0
		for k := at; k >= 0 && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 1 {
			return true
		}
		i = at + 1
	}
}

// ErrNUL is the EINVALIDVALUE of a value that holds U+0000; what names
// the value (a field, "the request", "the event's data").
func ErrNUL(what string) *Error {
	return Errorf(EINVALIDVALUE, "%s holds the character U+0000 (NUL), which Parley stores nowhere: remove it", what)
}
