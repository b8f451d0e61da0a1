package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

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
		bar = newProgressBar(stderr, size)
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

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws how much of the input was sent, on one line, at most
// five times a second.
type progressBar struct {
	w     io.Writer
	size  int64
	start time.Time
	mu    sync.Mutex
	n     int64
	last  time.Time
	done  bool
}

func newProgressBar(w io.Writer, size int64) *progressBar {
	return &progressBar{w: w, size: size, start: time.Now()}
}

func (p *progressBar) reader(r io.Reader) io.Reader { return &countingReader{r: r, p: p} }

type countingReader struct {
	r io.Reader
	p *progressBar
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n), false)
	return n, err
}

func (p *progressBar) add(n int64, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	now := time.Now()
	if p.done || (!force && now.Sub(p.last) < 200*time.Millisecond) {
		return
	}
	p.last = now
	rate := float64(p.n) / max(now.Sub(p.start).Seconds(), 0.001)
	if p.size > 0 {
		frac := min(float64(p.n)/float64(p.size), 1)
		filled := int(frac * 30)
		fmt.Fprintf(p.w, "\rimporting %3.0f%% [%s%s] %s / %s  %s/s ", frac*100,
			strings.Repeat("#", filled), strings.Repeat(" ", 30-filled), bytesOf(p.n), bytesOf(p.size), bytesOf(int64(rate)))
	} else {
		fmt.Fprintf(p.w, "\rimporting %s  %s/s ", bytesOf(p.n), bytesOf(int64(rate)))
	}
}

// stop draws the final state and ends the line.
func (p *progressBar) stop() {
	p.add(0, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done = true
		fmt.Fprintln(p.w)
	}
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
