package store

import (
	"bytes"
)

// A summary of a large message needs its head (a few hundred bytes) and
// its size in JSON, which a row gives without its text being decoded:
// decoding the row with encoding/json still reads every byte of it twice,
// some 8 ms for a row of a MB. skimRow walks the row's top level instead,
// jumping over each string to its closing quote (bytes.IndexByte), and
// copies out only the small members. A row is JSON that encoding/json
// wrote (EncodeRow); what skimRow does not expect, it leaves to the
// decoder (ok false).

// skimRow splits a stored row into the JSON of its head (every member but
// parts, content, metadata and legacy) and the sizes its parts' texts and
// its content add to the message's JSON (see ReadRowHead).
func skimRow(data []byte) (head []byte, extra int, ok bool) {
	head = append(make([]byte, 0, 512), '{')
	texts, hasContent := 0, false
	ok = eachMember(data, func(key []byte, at, vstart, vend int) bool {
		switch string(key) {
		case "parts":
			return eachText(data[vstart:vend], func(text []byte) { texts += len(text) - 2 })
		case "content":
			hasContent = true
		case "metadata", "legacy":
		default:
			if len(head) > 1 {
				head = append(head, ',')
			}
			head = append(head, data[at:vend]...)
		}
		return true
	})
	if !ok {
		return nil, 0, false
	}
	if !hasContent { // left out: it is the text parts' text
		extra = len(contentKey) + 2 + texts
	}
	return append(head, '}'), extra, true
}

// wireOf is WireRow without decoding the row: the row itself when it
// holds its content, else the row with its content put back after its
// parts (where encoding/json writes it), joined from its text parts'
// texts as the row holds them, escaped; a text written after another is
// escaped as the two were together. ok is false for a row it does not
// expect, or that held bytes that are not UTF-8 (written \ufffd): two
// parts may have split a character, and a string decoded and encoded
// again is not written so.
func wireOf(data []byte) ([]byte, bool) {
	partsEnd, hasContent := -1, false
	var texts [][]byte
	ok := eachMember(data, func(key []byte, _, vstart, vend int) bool {
		switch string(key) {
		case "parts":
			partsEnd = vend
			return eachText(data[vstart:vend], func(text []byte) {
				if len(text) > 2 {
					texts = append(texts, text[1:len(text)-1])
				}
			})
		case "content":
			hasContent = true
		}
		return true
	})
	switch {
	case !ok || partsEnd < 0:
		return nil, false
	case hasContent:
		return data, true
	}
	if bytes.Contains(data, []byte(`\ufffd`)) {
		return nil, false // decoded, those become U+FFFD, which encoding/json writes as it is
	}
	size := len(data) + len(contentKey) + 2
	for _, t := range texts {
		size += len(t)
	}
	out := make([]byte, 0, size)
	out = append(out, data[:partsEnd]...)
	out = append(out, contentKey...)
	out = append(out, '"')
	for _, t := range texts {
		out = append(out, t...)
	}
	out = append(out, '"')
	return append(out, data[partsEnd:]...), true
}

// eachMember calls fn with each member of the object data holds, whole:
// its key, where it starts, and where its value starts and ends. It
// returns false for data it does not expect, or when fn does.
func eachMember(data []byte, fn func(key []byte, at, vstart, vend int) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		key, vstart, vend, next, ok := member(data, i)
		if !ok || !fn(key, i, vstart, vend) {
			return false
		}
		i = next
	}
	return i < len(data)
}

// member reads the object member at data[i:] (`"key": value`): its key,
// where its value starts and ends, and where the next member starts (past
// the comma, or at the closing brace).
func member(data []byte, i int) (key []byte, vstart, vend, next int, ok bool) {
	if data[i] != '"' {
		return nil, 0, 0, 0, false
	}
	kend := skipString(data, i)
	if kend < 0 || bytes.IndexByte(data[i:kend], '\\') >= 0 {
		return nil, 0, 0, 0, false
	}
	key = data[i+1 : kend-1]
	j := skipSpace(data, kend)
	if j >= len(data) || data[j] != ':' {
		return nil, 0, 0, 0, false
	}
	vstart = skipSpace(data, j+1)
	vend = skipValue(data, vstart)
	if vend < 0 {
		return nil, 0, 0, 0, false
	}
	next = skipSpace(data, vend)
	switch {
	case next >= len(data):
		return nil, 0, 0, 0, false
	case data[next] == ',':
		next = skipSpace(data, next+1)
	case data[next] != '}':
		return nil, 0, 0, 0, false
	}
	return key, vstart, vend, next, true
}

// eachText calls fn with the text, as JSON (quoted), of each part of type
// text with a text in the array arr (null: none). It returns false for an
// array it does not expect.
func eachText(arr []byte, fn func(text []byte)) bool {
	if len(arr) < 2 || arr[0] != '[' {
		return string(arr) == "null"
	}
	for i := skipSpace(arr, 1); i < len(arr) && arr[i] != ']'; {
		end := skipValue(arr, i)
		if end < 0 || arr[i] != '{' {
			return false
		}
		isText, text := false, []byte(nil)
		for j := skipSpace(arr, i+1); j < end-1; {
			key, vstart, vend, next, ok := member(arr[:end], j)
			if !ok {
				return false
			}
			switch string(key) {
			case "type":
				isText = string(arr[vstart:vend]) == `"text"`
			case "text":
				text = arr[vstart:vend]
			}
			j = next
		}
		if isText && len(text) >= 2 {
			fn(text)
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return true
}

// skipValue returns where the JSON value at data[i:] ends, or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				if j = skipString(data, j); j < 0 {
					return -1
				}
				j-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i // a number, true, false or null: up to what follows it
	for j < len(data) && !ends(data[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// ends reports whether c ends a number or a literal.
func ends(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// skipString returns where the JSON string that starts at data[i] ends
// (past its closing quote), or -1.
func skipString(data []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}
