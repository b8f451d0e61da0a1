// Package loadgen is the load generator behind `parley bench`: it drives a
// Parley server over its real protocols (runners streaming text deltas and
// tool calls over the runner WebSocket, subscribers following over WebSocket
// or SSE, prompts over HTTP), measures what the server sustains, and measures
// in the same run the raw ceilings of the parts it is built from: batched
// inserts of the same event rows into the same kind of store, and a bare
// WebSocket broadcast with the same fan-out and payload sizes.
//
// It sends traffic only to the server it is given, or to the one it starts
// itself on 127.0.0.1, and to the PostgreSQL database it is given; the
// broadcast ceiling runs in-process over loopback.
package loadgen

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
)

// Transports of the subscribers.
const (
	TransportWS  = "ws"
	TransportSSE = "sse"
)

// Config is what one bench run does. Zero values take the defaults given.
type Config struct {
	// Server is the base URL (http or https) of a running server to drive.
	// Empty: the run starts one with ServeCommand on a free 127.0.0.1 port,
	// on a temporary SQLite file (or in a new schema of Postgres), and stops
	// it at the end.
	Server string
	// Token is the bearer token sent to Server: an admin token, since the
	// runners write as the agent "bot" and the prompts as "bench-user".
	// Leave it empty for a server running open. Never sent to a server the
	// run started itself (that one runs open).
	Token string
	// ServerPID is the process whose RSS and CPU are read from /proc when
	// Server is given (0: not measured).
	ServerPID int
	// DBPath is the SQLite file of the server at Server, for the bytes stored
	// per text byte (empty: not measured unless Postgres is given). Its
	// directory also holds the scratch file of the store ceiling.
	DBPath string
	// ServeCommand is the command that runs `parley serve` (such as
	// {os.Executable(), "serve"}), needed when Server is empty; the run adds
	// -db, -addr, -log-level and -postgres.
	ServeCommand []string
	// Postgres is a PostgreSQL URL. Without Server, the started server stores
	// in a new schema of that database (dropped at the end unless Keep);
	// either way the store ceiling runs in a scratch schema there.
	Postgres string
	// Dir holds the temporary database of a started server and the store
	// ceiling's scratch file (default: a new directory under os.TempDir).
	Dir string
	// Keep leaves the started server's database (file or schema) in place.
	Keep bool
	// SQLiteSync is the synchronous setting, "full" (the default) or
	// "normal", of a started server's SQLite file (-sqlite-sync) and of the
	// store ceiling's scratch file, so that both pay for the same durability.
	SQLiteSync string

	// Nodes is how many servers the run starts on one PostgreSQL schema
	// (default 1; more needs Postgres and no Server). The runner of
	// conversation i connects to node i mod Nodes, and its subscribers to
	// the nodes after it, so that with several nodes every delta crosses
	// from one node to another before a subscriber gets it.
	Nodes int

	// Conversations is how many conversations stream at once (default 10).
	Conversations int
	// Subscribers is how many subscribers follow each conversation (0: none).
	Subscribers int
	// Transport is TransportWS (default) or TransportSSE for the subscribers.
	Transport string
	// Rate is the text deltas per second each conversation's runner sends;
	// 0 sends as fast as the acks come back (with Window frames in flight).
	Rate float64
	// DeltaBytes is the size of each text delta (default 32, at least 16:
	// the first 16 bytes carry the send time).
	DeltaBytes int
	// ToolEvery adds a tool call (a running then a completed tool-update)
	// before every ToolEvery-th delta (0: no tool calls).
	ToolEvery int
	// MessageDeltas is how many deltas each streamed message has before it
	// is finalized and the next one starts (default 200).
	MessageDeltas int
	// PromptRate is the prompts per second sent over HTTP across all
	// conversations, each to a conversation with none outstanding (0: none).
	PromptRate float64
	// Window bounds the frames each runner has in flight (default 64).
	Window int
	// Duration is the measured window (default 10s); Warmup runs before it
	// (default 2s) and is not measured.
	Duration, Warmup time.Duration
	// CeilingDuration is how long each ceiling phase runs (default 2s).
	CeilingDuration time.Duration
	// Progress receives one line per second while the run streams (nil: none).
	Progress io.Writer
}

// setDefaults fills what the config leaves zero, then checks it.
func (c *Config) setDefaults() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Conversations, 10)
	def(&c.DeltaBytes, 32)
	def(&c.MessageDeltas, 200)
	def(&c.Window, 64)
	def(&c.Nodes, 1)
	defDuration := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDuration(&c.Duration, 10*time.Second)
	defDuration(&c.Warmup, 2*time.Second)
	defDuration(&c.CeilingDuration, 2*time.Second)
	if c.Transport == "" {
		c.Transport = TransportWS
	}
	if c.SQLiteSync == "" {
		c.SQLiteSync = "full"
	}
	return cmp.Or(c.checkShape(), c.checkStreams(), c.checkServer())
}

// checkShape checks how many conversations, subscribers and nodes the run has.
func (c *Config) checkShape() error {
	switch {
	case c.Conversations < 1 || c.Conversations > 100000:
		return errors.New("conversations must be 1..100000")
	case c.Subscribers < 0 || c.Subscribers > 1000:
		return errors.New("subscribers must be 0..1000 per conversation")
	case c.Conversations*max(c.Subscribers, 1) > 200000:
		return errors.New("conversations × subscribers must be at most 200000")
	case c.Nodes < 1 || c.Nodes > 8:
		return errors.New("nodes must be 1..8")
	case c.Nodes > 1 && (c.Postgres == "" || c.Server != ""):
		return errors.New("several nodes need -postgres, and start their own servers (no -server)")
	}
	return nil
}

// checkStreams checks what each conversation streams, and for how long.
func (c *Config) checkStreams() error {
	switch {
	case c.Transport != TransportWS && c.Transport != TransportSSE:
		return fmt.Errorf("transport must be %q or %q, not %q", TransportWS, TransportSSE, c.Transport)
	case c.SQLiteSync != "full" && c.SQLiteSync != "normal":
		return fmt.Errorf("sqlite sync must be full or normal, not %q", c.SQLiteSync)
	case c.Rate < 0 || c.PromptRate < 0:
		return errors.New("rates must not be negative")
	case c.DeltaBytes < stampLen || c.DeltaBytes > 64<<10:
		return fmt.Errorf("delta bytes must be %d..65536", stampLen)
	case c.ToolEvery < 0 || c.MessageDeltas < 1 || c.Window < 1 || c.Window > 4096:
		return errors.New("tool-every must be ≥ 0, message deltas ≥ 1 and window 1..4096")
	case c.Duration < 0 || c.Warmup < 0 || c.CeilingDuration < 0:
		return errors.New("durations must not be negative")
	}
	return nil
}

// checkServer checks the server the run measures, or how it starts one,
// and the PostgreSQL URL.
func (c *Config) checkServer() error {
	if c.Server != "" {
		u, err := url.Parse(c.Server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("server must be an http or https URL, not %q", c.Server)
		}
	} else if len(c.ServeCommand) == 0 {
		return errors.New("no server given and no command to start one")
	}
	if c.Postgres != "" {
		u, err := url.Parse(c.Postgres)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return errors.New("postgres must be a postgres:// URL")
		}
	}
	return nil
}
