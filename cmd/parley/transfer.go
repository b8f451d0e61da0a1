package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parleyhq/parley/client"
)

// runExport writes a conversation's export to stdout or to a file.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	server := fs.String("server", envOr("PARLEY_SERVER", "http://127.0.0.1:7700"), "server URL")
	token := fs.String("token", envOr("PARLEY_TOKEN", ""), "bearer token (viewer is enough)")
	format := fs.String("format", "markdown", "markdown, json or jsonl")
	out := fs.String("o", "", "write to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("export: give one conversation id")
	}
	c := client.New(*server, *token)
	if *out == "" {
		_, err := c.Export(ctx, fs.Arg(0), *format, stdout)
		return err
	}
	// Into a temporary file beside the target, renamed when complete, so
	// that a failed export never leaves half a file under the name.
	f, err := os.CreateTemp(filepath.Dir(*out), ".parley-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := c.Export(ctx, fs.Arg(0), *format, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), *out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %s to %s (%d bytes)\n", fs.Arg(0), *out, n)
	return nil
}

// runImport sends a file to the server's import and reports what it did.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", stderr)
	server := fs.String("server", envOr("PARLEY_SERVER", "http://127.0.0.1:7700"), "server URL")
	token := fs.String("token", envOr("PARLEY_TOKEN", ""), "bearer token (admin)")
	id := fs.String("id", "", "the imported conversation's id (default: the export's, or a new one)")
	title := fs.String("title", "", "legacy rows: the conversation's title")
	participants := fs.String("participants", "", "legacy rows: the agents, comma separated (default: those found in the first MiB)")
	progress := fs.String("progress", "auto", "show a progress bar: auto (when stderr is a terminal), on or off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("import: give one file (- for stdin)")
	}
	var in io.Reader = os.Stdin
	var size int64 = -1
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		in = f
	}
	show := *progress == "on" || (*progress == "auto" && isTerminal(stderr))
	var bar *progressBar
	if show {
		bar = newProgressBar(stderr, "importing", size, bytesOf, true)
		in = bar.reader(in)
		defer bar.stop()
	}
	opts := client.ImportOptions{ID: *id, Title: *title}
	if *participants != "" {
		opts.Participants = strings.Split(*participants, ",")
	}
	res, err := client.New(*server, *token).Import(ctx, in, opts)
	if bar != nil {
		bar.stop()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %s (%s): %d events, %d messages, epoch %s\n",
		res.Conversation.ID, res.Source, res.Events, res.Messages, res.Conversation.Epoch)
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: row %d: %s: %s\n", w.Row, w.Kind, w.Text)
	}
	total := 0
	for _, n := range res.WarningCounts {
		total += n
	}
	if res.WarningsTruncated {
		fmt.Fprintf(stderr, "warning: … %d more warnings not listed\n", total-len(res.Warnings))
	}
	if total > 0 {
		fmt.Fprintf(stderr, "%d warnings: %v\n", total, res.WarningCounts)
	}
	return nil
}
