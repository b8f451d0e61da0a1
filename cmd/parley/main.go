// Command parley is the Parley conversation server and its command-line tools.
//
//	parley serve     run the server (default ./parley.db on 127.0.0.1:7700)
//	parley migrate   bring the database schema up to date
//	parley token     create, list and revoke bearer tokens
//	parley tail      follow a conversation's live stream in the terminal
//	parley demo      a server with scripted agents in one conversation, for the web UI
//	parley export    write a conversation as Markdown, JSON or JSON Lines
//	parley import    load an export or legacy message rows into a server
//	parley backup    copy a running server's SQLite store into a new file
//	parley restore   replace a stopped server's SQLite store with a backup
//	parley a2a-bridge  a remote A2A agent answers as a Parley agent
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Parley: a conversation server for multi-agent systems.

Usage:
  parley serve   [-db ./parley.db] [-addr 127.0.0.1:7700] [-allow-open] [-reopen] [-open-host NAME]...
                 [-max-thread-depth 100] [-claim-ttl 30s] [-max-claim-ttl 10m] [-subscriber-buffer 4096]
                 [-runner-grace 30s] [-channel-webhook TYPE=URL]... [-postgres URL] [-log-level info]
                 [-delivery-give-up 24h] [-delivery-retention 7d]
                 [-create-rate 10] [-create-burst 100] [-max-token-connections 1000] [-subscriber-memory 268435456]
                 [-runner-connect-rate 10] [-runner-connect-burst 1000] [-sign-in-rate 1] [-sign-in-burst 10]
                 [-body-timeout 30s] [-header-timeout 10s] [-max-body-memory 268435456]
                 [-max-conns N] [-max-conns-per-addr N]
                 [-chunk-retention 7d]
  parley migrate [-db ./parley.db] [-postgres URL]
  parley token create -kind agent|viewer|admin [-agent ID] [-name TEXT] [-db ./parley.db] [-postgres URL]
  parley token list   [-db ./parley.db] [-postgres URL]
  parley token revoke [-db ./parley.db] [-postgres URL] TOKEN_ID
  parley tail    [-server http://127.0.0.1:7700] [-token T] [-ws] [-after SEQ] CONVERSATION
  parley demo    [-db ./parley-demo.db] [-addr 127.0.0.1:7700] [-every 8s] [-task-every 1m]
  parley export  [-server URL] [-token T] [-format markdown|json|jsonl] [-o FILE] CONVERSATION
  parley import  [-server URL] [-token T] [-id ID] [-title T] [-participants a,b] [-progress auto|on|off] FILE|-
  parley backup  [-db ./parley.db | -server URL -token T] [-progress auto|on|off] FILE
  parley restore [-db ./parley.db] [-progress auto|on|off] FILE
  parley restore -postgres URL   (after pg_restore or point-in-time recovery: new epochs)
  parley a2a-bridge [-server URL] [-token T] -agent ID [-conversation C] -remote URL [-card URL]
                 [-remote-token T] [-remote-header NAME=VALUE]... [-input-timeout 0s]
  parley bench   [-server URL] [-postgres URL] [-nodes 1] [-conversations 10] [-subscribers 1] [-transport ws|sse] [-rate 20] [-json]

Environment: PARLEY_DB, PARLEY_ADDR, PARLEY_POSTGRES_URL, PARLEY_SERVER and
PARLEY_TOKEN set the defaults of -db, -addr, -postgres, -server and -token;
PARLEY_A2A_TOKEN that of a2a-bridge's -remote-token.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := exitStatus(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// exitStatus runs a subcommand as the process does and returns its exit
// status: 0, or 2 after an error, which it prints in one line (but for
// -h's, whose usage is printed already).
func exitStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := run(ctx, args, stdout, stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "parley:", describe(err))
		}
		return 2
	}
	return 0
}

// run dispatches a subcommand; it is main without the process around it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return runServe(ctx, rest, stderr)
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "token":
		return runToken(ctx, rest, stdout, stderr)
	case "tail":
		return runTail(ctx, rest, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stderr)
	case "export":
		return runExport(ctx, rest, stdout, stderr)
	case "import":
		return runImport(ctx, rest, stdout, stderr)
	case "backup":
		return runBackup(ctx, rest, stdout, stderr)
	case "restore":
		return runRestore(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "a2a-bridge":
		return runA2ABridge(ctx, rest, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// envOr returns the environment variable key, or def if it is unset.
func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// newFlags returns a flag set that prints the usage on error.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("parley "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
