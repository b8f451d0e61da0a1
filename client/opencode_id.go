package client

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// OpenCode's ids are a prefix ("msg" for messages), an underscore, 12 hex
// digits of the time they were made (milliseconds × 4096 plus a counter,
// the low 48 bits), then 14 random base-62 digits: ids made later sort
// after those made before, and OpenCode relies on it (a session's newest
// user message is the one with the greatest id).
var openCodeIDs struct {
	sync.Mutex
	last uint64 // the time part of the last id made
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewOpenCodeMessageID returns a new id for an OpenCode user message, made
// as OpenCode makes its own: it sorts after every message id made before
// it on this machine. Send it as the messageID of a prompt (POST
// /session/{id}/prompt_async) and give it to OpenCodeAdapter.PromptedAs.
func NewOpenCodeMessageID() string { return newOpenCodeID("msg", "") }

// newOpenCodeID makes an id of the given prefix that sorts after the ids
// this process made before and after after (an id OpenCode made, perhaps
// by a clock ahead of ours; "" for none).
func newOpenCodeID(prefix, after string) string {
	openCodeIDs.Lock()
	t := uint64(time.Now().UnixMilli())*0x1000 + 1
	if t <= openCodeIDs.last {
		t = openCodeIDs.last + 1
	}
	if rest, ok := strings.CutPrefix(after, prefix+"_"); ok && len(rest) >= 12 {
		var b [8]byte
		if _, err := hex.Decode(b[2:], []byte(rest[:12])); err == nil {
			if v := uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7]); t&(1<<48-1) <= v {
				t = v + 1
			}
		}
	}
	openCodeIDs.last = t
	openCodeIDs.Unlock()
	t &= 1<<48 - 1
	var random [14]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read does not fail
	id := make([]byte, 0, len(prefix)+1+12+14)
	id = append(id, prefix...)
	id = append(id, '_')
	id = hex.AppendEncode(id, []byte{byte(t >> 40), byte(t >> 32), byte(t >> 24), byte(t >> 16), byte(t >> 8), byte(t)})
	for _, r := range random {
		id = append(id, base62[int(r)%len(base62)])
	}
	return string(id)
}
