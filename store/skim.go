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
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, 0, false
	}
	head = append(make([]byte, 0, 512), '{')
	texts, hasContent := 0, false
	for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		key, vstart, vend, next, ok := member(data, i)
		if !ok {
			return nil, 0, false
		}
		switch string(key) {
		case "parts":
			if texts, ok = textSizes(data[vstart:vend]); !ok {
				return nil, 0, false
			}
		case "content":
			hasContent = true
		case "metadata", "legacy":
		default:
			if len(head) > 1 {
				head = append(head, ',')
			}
			head = append(head, data[i:vend]...)
		}
		i = next
	}
	if i >= len(data) {
		return nil, 0, false
	}
	if !hasContent { // left out: it is the text parts' text
		extra = len(contentKey) + 2 + texts
	}
	return append(head, '}'), extra, true
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

// textSizes adds up, over the parts of type text in the array arr, the
// size of each one's text in JSON less its quotes, as ReadRowHead counts
// it.
func textSizes(arr []byte) (int, bool) {
	if len(arr) < 2 || arr[0] != '[' {
		return 0, len(arr) == 4 && string(arr) == "null"
	}
	total := 0
	for i := skipSpace(arr, 1); i < len(arr) && arr[i] != ']'; {
		end := skipValue(arr, i)
		if end < 0 || arr[i] != '{' {
			return 0, false
		}
		isText, text := false, 0
		for j := skipSpace(arr, i+1); j < end-1; {
			key, vstart, vend, next, ok := member(arr[:end], j)
			if !ok {
				return 0, false
			}
			switch string(key) {
			case "type":
				isText = string(arr[vstart:vend]) == `"text"`
			case "text":
				text = vend - vstart
			}
			j = next
		}
		if isText && text > 2 {
			total += text - 2
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return total, true
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
