package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/parleyhq/parley/internal/loadgen"
)

// runBench drives a server (the one at -server, or one it starts) with
// streaming runners, subscribers and prompts over the real protocols, and
// reports what it sustained beside the raw ceilings measured in the same
// run. See docs/bench.md.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	var cfg loadgen.Config
	fs.StringVar(&cfg.Server, "server", "", "drive the running server at this URL (default: start `parley serve` on a free 127.0.0.1 port with a temporary database)")
	fs.StringVar(&cfg.Token, "token", envOr("PARLEY_TOKEN", ""), "admin token for -server (not needed if it runs open)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "with -server: the server's process id, to read its RSS and CPU from /proc")
	fs.StringVar(&cfg.DBPath, "db", "", "with -server: its SQLite file, to measure bytes stored per text byte")
	fs.StringVar(&cfg.Postgres, "postgres", "", "PostgreSQL URL: the started server stores in a new schema there (with -server: measure that database); the store ceiling runs in a scratch schema there")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the temporary database and the ceiling's scratch file (default: a new temporary directory)")
	fs.StringVar(&cfg.SQLiteSync, "sqlite-sync", "full", "the started server's -sqlite-sync (full or normal), also used by the store ceiling")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the started server's database (file or schema)")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "with -postgres: start this many servers on one schema; runners stream through one node and subscribers follow on the others")
	fs.IntVar(&cfg.Conversations, "conversations", 10, "conversations streaming at once")
	fs.IntVar(&cfg.Subscribers, "subscribers", 1, "subscribers per conversation")
	fs.StringVar(&cfg.Transport, "transport", "ws", "subscribers' transport: ws or sse")
	fs.Float64Var(&cfg.Rate, "rate", 20, "text deltas per second per conversation (0: as fast as acks come back)")
	fs.IntVar(&cfg.DeltaBytes, "delta-bytes", 32, "bytes per text delta (at least 16)")
	fs.IntVar(&cfg.ToolEvery, "tool-every", 50, "a tool call (running, then completed) every K deltas (0: none)")
	fs.IntVar(&cfg.MessageDeltas, "message-deltas", 200, "deltas per streamed message before it is finalized")
	fs.Float64Var(&cfg.PromptRate, "prompt-rate", 1, "prompts per second over HTTP, across all conversations (0: none)")
	fs.IntVar(&cfg.Window, "window", 64, "frames in flight per runner")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "how long to run before measuring")
	fs.DurationVar(&cfg.CeilingDuration, "ceiling-duration", 2*time.Second, "how long each ceiling phase runs")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load generator (this process, not the server) to this file")
	out := fs.String("out", "", "also write the report as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench takes no arguments, got %q", fs.Args())
	}
	if cfg.Server == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this binary to start a server: %w", err)
		}
		// No per-token quotas: every runner, subscriber and creation of the
		// run is the one identity of an open server.
		cfg.ServeCommand = []string{exe, "serve", "-create-rate", "0", "-max-token-connections", "0", "-runner-connect-rate", "0"}
		cfg.Token = "" // the started server runs open
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if rep.Errors.Total > 0 {
		return errors.New("the run had errors (see above)")
	}
	return nil
}
