// Package flatjson reads the JSON objects that carry most of a runner's
// traffic, a text delta ({"type":"text","turnId":"m1","delta":"…"}), without
// reflection: a flat object whose values are all strings. Anything else (a
// number, a nested value, invalid JSON) is left to encoding/json: Each
// reports false and the caller decodes the usual way, so that every error
// and every unusual input is handled there, once.
package flatjson

import (
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Each calls field with each key and value of s, a JSON object whose
// values are all strings, in order, and reports whether s was one (and
// every call returned true). Values without escapes are substrings of s.
// It reports false, having perhaps called field for some keys already, for
// anything else: another kind of value, a duplicate key, invalid UTF-8,
// invalid JSON, or text after the object.
func Each(s string, field func(key, value string) bool) bool {
	var seen [24]string // keys so far, to refuse duplicates (few keys)
	n := 0
	return members(s, func(key string, at int) (int, bool) {
		if n >= len(seen) || slices.Contains(seen[:n], key) {
			return 0, false
		}
		seen[n] = key
		n++
		val, next, ok := str(s, at)
		return next, ok && field(key, val)
	})
}

// members walks the JSON object s: for each key, member is given the key
// and the index of its value, and returns the index after the value. It
// reports whether s was an object with nothing after it (and every call
// succeeded).
func members(s string, member func(key string, at int) (next int, ok bool)) bool {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return skipSpace(s, i+1) == len(s)
	}
	for {
		key, j, ok := str(s, i)
		if !ok {
			return false
		}
		i = skipSpace(s, j)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		if i, ok = member(key, skipSpace(s, i+1)); !ok {
			return false
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return skipSpace(s, i+1) == len(s)
		default:
			return false
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// str reads the JSON string starting at s[i] and returns its value and the
// index after it.
func str(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[start:j]
			if !utf8.ValidString(v) {
				return "", 0, false // encoding/json would replace the bytes
			}
			return v, j + 1, true
		case c == '\\':
			return unescape(s, start, j)
		case c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// unescape reads the rest of a string from s[start:] whose first escape is
// at s[j], and returns its value and the index after it.
func unescape(s string, start, j int) (string, int, bool) {
	var b strings.Builder
	b.Grow(j - start + 16)
	b.WriteString(s[start:j])
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"':
			v := b.String()
			if !utf8.ValidString(v) {
				return "", 0, false
			}
			return v, j + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(s) {
			return "", 0, false
		}
		switch s[j+1] {
		case '"', '\\', '/':
			b.WriteByte(s[j+1])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, j+2)
			if !ok {
				return "", 0, false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				// A pair, or (as encoding/json reads it) U+FFFD.
				r2, ok := rune(-1), false
				if j+6 <= len(s) && s[j] == '\\' && s[j+1] == 'u' {
					r2, ok = hex4(s, j+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					j += 6
				} else {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
			continue
		default:
			return "", 0, false
		}
		j += 2
	}
	return "", 0, false
}

// hex4 reads the four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Strings calls field with each key of the JSON object s and, where the
// key's value is a string, that value (isString true); other values
// (numbers, literals, arrays, objects) are skipped over without being read,
// and field gets them as "" with isString false. It is for picking a few
// string fields out of a large object that was written by encoding/json,
// such as the head of a stored message: only the object's own level is
// checked, so a skipped value must be valid JSON. It reports false, having
// perhaps called field for some keys, if s is not an object, a string is
// malformed, or field returns false.
func Strings(s string, field func(key, value string, isString bool) bool) bool {
	return members(s, func(key string, at int) (int, bool) {
		if at < len(s) && s[at] == '"' {
			val, next, ok := str(s, at)
			return next, ok && field(key, val, true)
		}
		next, ok := skipValue(s, at)
		return next, ok && field(key, "", false)
	})
}

// StringsOf is Strings over the bytes of b, read in place rather than
// copied into a string first (a stored message's row is kilobytes): the
// keys and values field gets may be bytes of b, valid only until StringsOf
// returns, so a caller copies what it keeps; b must not change meanwhile.
func StringsOf(b []byte, field func(key, value string, isString bool) bool) bool {
	return Strings(unsafe.String(unsafe.SliceData(b), len(b)), field)
}

// skipValue returns the index after the JSON value that is not a string
// starting at s[i]: an array or object (to its matching bracket, past the
// strings in it), or a number or literal (to the next delimiter).
func skipValue(s string, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	if c := s[i]; c != '[' && c != '{' {
		start := i
		for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			i++
		}
		return i, i > start
	}
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			// To the closing quote: one not escaped by a backslash.
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return 0, false
			}
		}
	}
	return 0, false
}
