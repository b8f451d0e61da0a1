package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar shows how far a long job went: on a terminal one line
// redrawn at most five times a second (bar true), else a plain line at each
// tenth of the way and at the end.
type progressBar struct {
	w     io.Writer
	label string
	size  int64 // the whole; 0 or less when unknown
	unit  func(int64) string
	// suffix follows the whole in a plain line (" pages").
	suffix string
	bar    bool
	start  time.Time
	mu     sync.Mutex
	n      int64
	last   time.Time
	tenth  int64 // the last tenth of the way a plain line was written for
	done   bool
}

func newProgressBar(w io.Writer, label string, size int64, unit func(int64) string, bar bool) *progressBar {
	return &progressBar{w: w, label: label, size: size, unit: unit, bar: bar, start: time.Now(), tenth: -1}
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

// set says how far the job went, of how much (which may change).
func (p *progressBar) set(n, size int64) {
	p.mu.Lock()
	p.n, p.size = n, size
	p.mu.Unlock()
	p.add(0, false)
}

func (p *progressBar) add(n int64, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	now := time.Now()
	if p.done {
		return
	}
	rate := float64(p.n) / max(now.Sub(p.start).Seconds(), 0.001)
	if !p.bar {
		tenth := int64(-1)
		if p.size > 0 {
			tenth = min(10*p.n/p.size, 10)
		}
		if !force && (tenth <= p.tenth || tenth < 0) {
			return
		}
		p.tenth = tenth
		if p.size > 0 {
			fmt.Fprintf(p.w, "%s: %d%% (%s of %s%s)\n", p.label, 10*tenth, p.unit(p.n), p.unit(p.size), p.suffix)
		} else {
			fmt.Fprintf(p.w, "%s: %s\n", p.label, p.unit(p.n))
		}
		return
	}
	if !force && now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	if p.size > 0 {
		frac := min(float64(p.n)/float64(p.size), 1)
		filled := int(frac * 30)
		fmt.Fprintf(p.w, "\r%s %3.0f%% [%s%s] %s / %s  %s/s ", p.label, frac*100,
			strings.Repeat("#", filled), strings.Repeat(" ", 30-filled), p.unit(p.n), p.unit(p.size), p.unit(int64(rate)))
	} else {
		fmt.Fprintf(p.w, "\r%s %s  %s/s ", p.label, p.unit(p.n), p.unit(int64(rate)))
	}
}

// stop draws the final state and ends the line.
func (p *progressBar) stop() {
	p.mu.Lock()
	stopped := p.done
	p.mu.Unlock()
	if stopped {
		return
	}
	if p.bar || p.tenth < 10 {
		p.add(0, true)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done = true
		if p.bar {
			fmt.Fprintln(p.w)
		}
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
