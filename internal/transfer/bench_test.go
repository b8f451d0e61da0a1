package transfer_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/transfer"
)

// threadedConversation writes n messages by two agents through the engine,
// in chains of depth messages that each reply to the one before.
func threadedConversation(b *testing.B, eng *engine.Engine, n, depth int) string {
	b.Helper()
	id := fmt.Sprintf("bench-%d-%d", n, depth)
	must[*engine.View](b)(eng.CreateConversation(ctxT(b), parley.Conversation{ID: id, Participants: []string{"a", "b"}, Members: []string{"alice", "human"}}))
	prev := ""
	for i := range n {
		agent := []string{"a", "b"}[i%2]
		m := conv.PostMessage{Actor: actor(agent), ID: fmt.Sprintf("m%d", i), Role: parley.RoleAssistant,
			Parts: text(fmt.Sprintf("message %d: a sentence of about sixty bytes of text here.", i)), Finality: parley.FinalityTurn}
		if i%depth != 0 {
			m.ReplyTo = prev
		}
		post(b, eng, id, m)
		prev = m.ID
	}
	return id
}

// BenchmarkExport exports a 10k-message conversation (chains 100 deep) in
// each format, and a conversation that is one 100-deep thread. Seed 004's
// targets: under 100 ms for 10k messages, under 5 s for a 100-deep thread.
func BenchmarkExport(b *testing.B) {
	eng := sqliteEngine(b)
	big := threadedConversation(b, eng, 10_000, 100)
	deep := threadedConversation(b, eng, 100, 100)
	for _, c := range []struct {
		name, id string
		f        transfer.Format
	}{
		{"10k-markdown", big, transfer.Markdown}, {"10k-json", big, transfer.JSON}, {"10k-jsonl", big, transfer.JSONL},
		{"deep100-markdown", deep, transfer.Markdown}, {"deep100-json", deep, transfer.JSON},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				cw := &countWriter{}
				if _, err := transfer.Export(ctxT(b), readerOf(eng), c.id, c.f, cw); err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			b.ReportMetric(float64(size)/1e6, "MB/export")
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkImport imports JSONL exports of 10k and 100k messages and reports
// the peak heap in use while importing: it stays flat as the file grows.
func BenchmarkImport(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		src := sqliteEngine(b)
		must[*transfer.ImportResult](b)(transfer.Import(ctxT(b), src, legacyRows(n), transfer.ImportOptions{ID: "src"}))
		// The file is read from disk, so that the heap holds only what the
		// import itself needs (GC lets garbage grow with the live heap).
		name := filepath.Join(b.TempDir(), "export.jsonl")
		size := len(export(b, src, "src", transfer.JSONL))
		if err := os.WriteFile(name, export(b, src, "src", transfer.JSONL), 0o644); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.Run(fmt.Sprintf("%dk-jsonl", n/1000), func(b *testing.B) {
			var live uint64
			batches := 0
			// Every 20 batches, the live heap after a collection: what the
			// import holds, whatever garbage the collector lets pile up.
			progress := func(transfer.ImportStats) {
				if batches++; batches%20 == 0 {
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					live = max(live, ms.HeapAlloc)
				}
			}
			for b.Loop() {
				b.StopTimer()
				dst := sqliteEngine(b)
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				must[*transfer.ImportResult](b)(transfer.Import(ctxT(b), dst, f, transfer.ImportOptions{Progress: progress}))
				f.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(live)/(1<<20), "max-live-heap-MiB")
			b.ReportMetric(float64(size)/(1<<20), "file-MiB")
		})
	}
}

// legacyRows makes n legacy memory rows: questions by a person, each
// answered by an agent that names it.
func legacyRows(n int) io.Reader {
	var buf bytes.Buffer
	t0 := time.Date(2025, 10, 25, 10, 0, 0, 0, time.UTC)
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		if i%2 == 0 {
			fmt.Fprintf(&buf, `{"agentId":"a1","role":"user","sender":"HUMAN","content":"question %d, with some words to make it a line","messageId":"m%d","createdAt":"%s"}`+"\n", i, i, at)
		} else {
			fmt.Fprintf(&buf, `{"agentId":"a1","role":"assistant","sender":"a1","content":"answer %d, with some more words to make it a line","messageId":"m%d","replyToMessageId":"m%d","createdAt":"%s"}`+"\n", i, i, i-1, at)
		}
	}
	return &buf
}
