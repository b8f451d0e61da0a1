package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/tokens"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stderr)
	dbPath := fs.String("db", envOr("PARLEY_DB", "./parley.db"), "SQLite database file")
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: migrate that database instead of the SQLite file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	where := *dbPath
	var from, to int64
	var err error
	if *pgURL != "" {
		where = "postgres"
		from, to, err = postgres.Migrate(ctx, *pgURL)
	} else {
		from, to, err = sqlite.Migrate(ctx, *dbPath)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: schema version %d -> %d\n", where, from, to)
	return nil
}

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("token: say create, list or revoke")
	}
	fs := newFlags("token "+args[0], stderr)
	dbPath := fs.String("db", envOr("PARLEY_DB", "./parley.db"), "SQLite database file")
	pgURL := fs.String("postgres", envOr("PARLEY_POSTGRES_URL", ""), "a PostgreSQL URL: the tokens of that database instead of the SQLite file's")
	kind := fs.String("kind", "", "agent, viewer or admin (create)")
	agent := fs.String("agent", "", "the agent id an agent token binds (create)")
	name := fs.String("name", "", "a note to recognise the token by (create)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "create" {
		if err := checkTokenFlags(parley.TokenKind(*kind), *agent); err != nil {
			return err
		}
	}
	db, _, err := openStore(ctx, *dbPath, *pgURL, sqlite.SyncFull, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	tk := tokens.New(db, tokens.Options{})

	switch args[0] {
	case "create":
		secret, t, err := tk.CreateToken(ctx, parley.TokenKind(*kind), *agent, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created %s token %s; the secret below is shown only once\n", t.Kind, t.ID)
		fmt.Fprintln(stdout, secret)
	case "list":
		ts, err := tk.ListTokens(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tKIND\tAGENT\tNAME\tCREATED\tREVOKED")
		for _, t := range ts {
			revoked := ""
			if !t.RevokedAt.IsZero() {
				revoked = t.RevokedAt.Format(parley.TimeLayout)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.AgentID, t.Name, t.CreatedAt.Format(parley.TimeLayout), revoked)
		}
		return w.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return fmt.Errorf("token revoke: give one token id")
		}
		if err := tk.RevokeToken(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "revoked %s\n", fs.Arg(0))
	default:
		return fmt.Errorf("token: unknown subcommand %q (create, list, revoke)", args[0])
	}
	return nil
}

// checkTokenFlags refuses the flags of "token create" that cannot make a
// token, naming the flag to give, before the store is opened.
func checkTokenFlags(kind parley.TokenKind, agent string) error {
	switch {
	case kind == "":
		return fmt.Errorf("token create: give -kind agent, viewer or admin")
	case !kind.Valid():
		return fmt.Errorf("token create: -kind %q is not one of agent, viewer, admin", kind)
	case kind == parley.TokenAgent && agent == "":
		return fmt.Errorf("token create: -kind agent needs -agent ID, the agent the token acts as")
	case kind == parley.TokenAgent && !parley.ValidID(agent):
		return fmt.Errorf("token create: -agent %q is not an agent id (1-128 characters of A-Z a-z 0-9 . _ : -, not . or ..)", agent)
	case kind != parley.TokenAgent && agent != "":
		return fmt.Errorf("token create: -agent is for -kind agent only; a %s token acts as no agent", kind)
	}
	return nil
}
