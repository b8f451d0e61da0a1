package parley

import "bytes"

// Numbers. PostgreSQL reads a JSON number as its numeric type, which
// refuses an exponent beyond ±1000 (and, past that, the digits it can
// hold), where JSON and SQLite take any: a conversation whose metadata
// held 1e200000 made every list that reads metadata as JSON fail on
// PostgreSQL, for everyone. So no JSON Parley stores holds a number with
// more than MaxNumberDigits digits or an exponent beyond ±MaxNumberDigits:
// every write refuses one, in the rules and at the store, as for NUL.

// MaxNumberDigits bounds a stored JSON number: its digits, and its
// exponent either way (PostgreSQL's own bound on the exponent).
const MaxNumberDigits = 1000

// HasOversizedNumber reports whether JSON text holds a number (outside its
// strings) with more than MaxNumberDigits digits, or an exponent beyond
// ±MaxNumberDigits.
func HasOversizedNumber(data []byte) bool {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			i = stringEnd(data, i+1)
		case c == '-' || c >= '0' && c <= '9':
			var over bool
			i, over = scanNumber(data, i)
			if over {
				return true
			}
		default:
			i++
		}
	}
	return false
}

// stringEnd returns the index after the string whose body starts at i.
func stringEnd(data []byte, i int) int {
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		at := i + j
		n := 0 // backslashes before the quote: an odd number escapes it
		for k := at - 1; k >= i && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return at + 1
		}
		i = at + 1
	}
}

// scanNumber reads the number at i and reports where it ends and whether
// it is beyond the bounds.
func scanNumber(data []byte, i int) (int, bool) {
	digits, exp, inExp := 0, 0, false
	for ; i < len(data); i++ {
		c := data[i]
		switch {
		case c >= '0' && c <= '9':
			if inExp {
				if exp <= MaxNumberDigits {
					exp = exp*10 + int(c-'0')
				}
			} else {
				digits++
			}
		case c == 'e' || c == 'E':
			inExp = true
		case c == '-' || c == '+' || c == '.':
		default:
			return i, digits > MaxNumberDigits || exp > MaxNumberDigits
		}
	}
	return i, digits > MaxNumberDigits || exp > MaxNumberDigits
}

// ErrNumber is the EINVALIDVALUE of a value that holds a number beyond the
// bounds; what names the value.
func ErrNumber(what string) *Error {
	return Errorf(EINVALIDVALUE, "%s holds a number with more than %d digits or an exponent beyond ±%d, which Parley stores nowhere (PostgreSQL cannot read it): send it as a string", what, MaxNumberDigits, MaxNumberDigits)
}
