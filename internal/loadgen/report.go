package loadgen

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured. Rates are per second over the measured
// window; ratios are Parley's figure divided by the same run's ceiling.
type Report struct {
	Config        ReportConfig `json:"config"`
	Server        string       `json:"server"`
	Store         string       `json:"store"`         // sqlite, postgres or unknown
	StoreLocation string       `json:"storeLocation"` // the file or schema
	WindowSeconds float64      `json:"windowSeconds"`
	// OfferedDeltasPerSec is Rate × Conversations (0: unthrottled).
	OfferedDeltasPerSec float64 `json:"offeredDeltasPerSec"`
	// DurableDeltasPerSec counts text deltas acknowledged with their seq.
	DurableDeltasPerSec float64 `json:"durableDeltasPerSec"`
	// EventsDeliveredPerSec counts every event frame the subscribers got.
	EventsDeliveredPerSec float64 `json:"eventsDeliveredPerSec"`
	// DeltasDeliveredPerSec counts the text deltas in the chunk events the
	// subscribers got: a chunk event holds every delta of a runner that
	// came while its conversation's last append was being written.
	DeltasDeliveredPerSec float64 `json:"deltasDeliveredPerSec"`
	Latency               Latency `json:"deltaToSubscriberLatency"`
	AckLatency            Latency `json:"deltaToAckLatency"`
	ToolAckLatency        Latency `json:"toolUpdateToAckLatency"`
	Counts                Counts  `json:"counts"`
	Errors                Errors  `json:"errors"`
	Process               Process `json:"serverProcess"`
	BenchCPUCores         float64 `json:"benchCpuCores"`
	// Writer is what the server's SQLite writer did in the window (nil
	// with PostgreSQL, or when the server's /metrics did not answer).
	Writer   *Writer  `json:"sqliteWriter,omitempty"`
	Storage  Storage  `json:"storage"`
	Ceilings Ceilings `json:"ceilings"`
	Ratios   Ratios   `json:"ratios"`
	Warnings []string `json:"warnings,omitempty"`
}

// ReportConfig echoes the run's parameters.
type ReportConfig struct {
	Nodes           int     `json:"nodes"`
	Conversations   int     `json:"conversations"`
	Subscribers     int     `json:"subscribers"`
	Transport       string  `json:"transport"`
	Rate            float64 `json:"rate"`
	DeltaBytes      int     `json:"deltaBytes"`
	ToolEvery       int     `json:"toolEvery"`
	MessageDeltas   int     `json:"messageDeltas"`
	PromptRate      float64 `json:"promptRate"`
	Window          int     `json:"window"`
	DurationSeconds float64 `json:"durationSeconds"`
	WarmupSeconds   float64 `json:"warmupSeconds"`
	CeilingSeconds  float64 `json:"ceilingSeconds"`
}

// Latency is a distribution's percentiles, in milliseconds.
type Latency struct {
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	P999Ms  float64 `json:"p999Ms"`
	MaxMs   float64 `json:"maxMs"`
	Samples int64   `json:"samples"`
}

// Counts are totals over the whole run (warmup, window and the end).
type Counts struct {
	DeltasSent      int64 `json:"deltasSent"`
	DeltasAcked     int64 `json:"deltasAcked"`
	ToolFramesAcked int64 `json:"toolFramesAcked"`
	TextBytes       int64 `json:"textBytes"`
	EventsDelivered int64 `json:"eventsDelivered"`
	// ChunksDelivered counts chunk events: each holds one delta, or the
	// deltas of a runner that came while a commit was under way.
	ChunksDelivered int64 `json:"chunksDelivered"`
	Prompts         int64 `json:"prompts"`
	PromptsAnswered int64 `json:"promptsAnswered"`
	PromptsSkipped  int64 `json:"promptsSkipped"`
	// MissingDeliveries sums, over subscribers, the acked deltas of their
	// conversation they did not get; ExtraDeliveries the deltas they got
	// beyond those (deltas made durable but never acked).
	MissingDeliveries int64 `json:"missingDeliveries"`
	ExtraDeliveries   int64 `json:"extraDeliveries"`
}

// Errors counts what went wrong during the load, with a few messages.
type Errors struct {
	Total      int64    `json:"total"`
	Runner     int64    `json:"runner"`
	Subscriber int64    `json:"subscriber"`
	Prompt     int64    `json:"prompt"`
	Samples    []string `json:"samples,omitempty"`
}

// Process is the server process as /proc saw it during the window.
type Process struct {
	PID        int     `json:"pid"`
	RSSMiB     float64 `json:"rssMiB"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	CPUCores   float64 `json:"cpuCores"`
}

// Storage is how much the store grew per byte of streamed text.
type Storage struct {
	Method           string  `json:"method,omitempty"`
	Bytes            int64   `json:"bytes"`
	TextBytes        int64   `json:"textBytes"`
	BytesPerTextByte float64 `json:"bytesPerTextByte"`
}

// Ceilings are the raw figures measured in the same run.
type Ceilings struct {
	Store     StoreCeiling     `json:"store"`
	Broadcast BroadcastCeiling `json:"broadcast"`
}

// StoreCeiling is batched inserts of the same event rows.
type StoreCeiling struct {
	Kind             string  `json:"kind"`
	Method           string  `json:"method"`
	Rows             int64   `json:"rows"`
	RowsPerSec       float64 `json:"rowsPerSec"`
	BytesPerTextByte float64 `json:"bytesPerTextByte"`
}

// BroadcastCeiling is a bare WebSocket broadcast with the same fan-out.
type BroadcastCeiling struct {
	Method     string `json:"method"`
	FrameBytes int    `json:"frameBytes"`
	// FramesPerSec is delivered frames per second, sending as fast as the
	// connections take them.
	FramesPerSec float64 `json:"framesPerSec"`
	// PacedRate is the frames per second per conversation of the latency
	// phase: Parley's measured durable delta rate.
	PacedRate float64 `json:"pacedRatePerConversation"`
	Latency   Latency `json:"latency"`
}

// Ratios divide Parley's figures by their ceilings: under 1 for rates (the
// share of the ceiling reached), over 1 for latency and bytes (how many
// times the ceiling's). 0 when either side was not measured.
type Ratios struct {
	DurableDeltas    float64 `json:"durableDeltas"`
	EventsDelivered  float64 `json:"eventsDelivered"`
	DeltasDelivered  float64 `json:"deltasDelivered"`
	LatencyP50       float64 `json:"latencyP50"`
	LatencyP99       float64 `json:"latencyP99"`
	LatencyP999      float64 `json:"latencyP999"`
	BytesPerTextByte float64 `json:"bytesPerTextByte"`
}

func newReport(cfg Config) *Report {
	return &Report{Config: ReportConfig{Nodes: cfg.Nodes, Conversations: cfg.Conversations, Subscribers: cfg.Subscribers, Transport: cfg.Transport,
		Rate: cfg.Rate, DeltaBytes: cfg.DeltaBytes, ToolEvery: cfg.ToolEvery, MessageDeltas: cfg.MessageDeltas, PromptRate: cfg.PromptRate,
		Window: cfg.Window, DurationSeconds: cfg.Duration.Seconds(), WarmupSeconds: cfg.Warmup.Seconds(), CeilingSeconds: cfg.CeilingDuration.Seconds()},
		OfferedDeltasPerSec: cfg.Rate * float64(cfg.Conversations)}
}

func latencyOf(h *histogram) Latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return Latency{P50Ms: ms(h.quantile(0.5)), P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)), MaxMs: ms(time.Duration(h.max)), Samples: h.total}
}

// fillLoad computes the Parley side of the report once the load is over.
func (b *bench) fillLoad(rep *Report, s0, s1 snapshot, p0, p1, self0, self1 procSample, peakRSS int64, pid int) {
	w := time.Duration(b.winEnd.Load() - b.winStart.Load()).Seconds()
	rep.WindowSeconds = w
	if w > 0 {
		rep.DurableDeltasPerSec = float64(s1.deltasAcked-s0.deltasAcked) / w
		rep.EventsDeliveredPerSec = float64(s1.events-s0.events) / w
		rep.DeltasDeliveredPerSec = float64(s1.deltasDelivered-s0.deltasDelivered) / w
	}
	var frameBytes, frames int64
	for _, c := range b.convs {
		for _, s := range c.subs {
			frameBytes += s.frameBytes
			frames += s.frames
			got, want := s.deltas.Load(), c.acked.Load()
			rep.Counts.MissingDeliveries += max(0, want-got)
			rep.Counts.ExtraDeliveries += max(0, got-want)
		}
	}
	if frames > 0 {
		rep.Ceilings.Broadcast.FrameBytes = int(frameBytes / frames)
	}
	rep.Latency, rep.AckLatency, rep.ToolAckLatency = latencyOf(b.lat.merged()), latencyOf(b.ack.merged()), latencyOf(b.toolAck.merged())
	c := &b.cnt
	rep.Counts.DeltasSent, rep.Counts.DeltasAcked, rep.Counts.ToolFramesAcked = c.deltasSent.Load(), c.deltasAcked.Load(), c.toolAcked.Load()
	rep.Counts.TextBytes, rep.Counts.EventsDelivered, rep.Counts.ChunksDelivered = c.textBytes.Load(), c.events.Load(), c.chunks.Load()
	rep.Counts.Prompts, rep.Counts.PromptsAnswered, rep.Counts.PromptsSkipped = c.prompts.Load(), c.promptsAnswered.Load(), c.promptsSkipped.Load()
	rep.Errors = Errors{Runner: c.runnerErrors.Load(), Subscriber: c.subscriberErrors.Load(), Prompt: c.promptErrors.Load()}
	rep.Errors.Total = rep.Errors.Runner + rep.Errors.Subscriber + rep.Errors.Prompt
	b.errMu.Lock()
	rep.Errors.Samples = append([]string(nil), b.errSamples...)
	b.errMu.Unlock()
	if pid > 0 {
		rep.Process = Process{PID: pid, RSSMiB: mib(p1.rss), PeakRSSMiB: mib(max(peakRSS, p1.rss, p0.rss)), CPUCores: round2(cores(p0, p1))}
	}
	rep.BenchCPUCores = round2(cores(self0, self1))
	if rep.OfferedDeltasPerSec > 0 && rep.DurableDeltasPerSec < 0.9*rep.OfferedDeltasPerSec {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("overloaded: %s of the %s deltas/s offered were acked; the latencies include the time deltas waited behind the runners' windows (-window %d)",
			commas(rep.DurableDeltasPerSec), commas(rep.OfferedDeltasPerSec), b.cfg.Window))
	}
}

// ratios fills in Ratios once both sides are known.
func (r *Report) ratios() {
	div := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return math.Round(a/b*10000) / 10000
	}
	bl := r.Ceilings.Broadcast.Latency
	r.Ratios = Ratios{
		DurableDeltas:    div(r.DurableDeltasPerSec, r.Ceilings.Store.RowsPerSec),
		EventsDelivered:  div(r.EventsDeliveredPerSec, r.Ceilings.Broadcast.FramesPerSec),
		DeltasDelivered:  div(r.DeltasDeliveredPerSec, r.Ceilings.Broadcast.FramesPerSec),
		LatencyP50:       div(r.Latency.P50Ms, bl.P50Ms),
		LatencyP99:       div(r.Latency.P99Ms, bl.P99Ms),
		LatencyP999:      div(r.Latency.P999Ms, bl.P999Ms),
		BytesPerTextByte: div(r.Storage.BytesPerTextByte, r.Ceilings.Store.BytesPerTextByte),
	}
}

// WriteTable writes the report for people: Parley's figures beside their
// ceilings, then the rest.
func (r *Report) WriteTable(w io.Writer) error {
	cfg := r.Config
	var b strings.Builder
	rate := "as fast as acked"
	if cfg.Rate > 0 {
		rate = fmt.Sprintf("%s deltas/s each (offered %s/s)", num(cfg.Rate), commas(r.OfferedDeltasPerSec))
	}
	tools := "no tool calls"
	if cfg.ToolEvery > 0 {
		tools = fmt.Sprintf("a tool call every %d deltas", cfg.ToolEvery)
	}
	fmt.Fprintf(&b, "parley bench: %d conversations × %d %s subscribers, %s, %d-byte deltas, %d per message, %s, prompts %s/s\n",
		cfg.Conversations, cfg.Subscribers, cfg.Transport, rate, cfg.DeltaBytes, cfg.MessageDeltas, tools, num(cfg.PromptRate))
	fmt.Fprintf(&b, "server %s, store %s (%s); measured %.1f s after %.1f s of warmup\n\n", r.Server, r.Store, r.StoreLocation, r.WindowSeconds, cfg.WarmupSeconds)

	row := func(label, parley, ceiling, which, ratio string) {
		fmt.Fprintf(&b, "%-28s %12s %12s %-2s %14s\n", label, parley, ceiling, which, ratio)
	}
	row("", "Parley", "ceiling", "", "Parley/ceiling")
	share := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", v*100)
	}
	times := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f×", v)
	}
	ms := func(v float64) string { return fmt.Sprintf("%.2f ms", v) }
	c := r.Ceilings
	row("durable deltas/s", commas(r.DurableDeltasPerSec), commas(c.Store.RowsPerSec), "a", share(r.Ratios.DurableDeltas))
	row("events delivered/s", commas(r.EventsDeliveredPerSec), commas(c.Broadcast.FramesPerSec), "b", share(r.Ratios.EventsDelivered))
	row("deltas delivered/s", commas(r.DeltasDeliveredPerSec), commas(c.Broadcast.FramesPerSec), "b", share(r.Ratios.DeltasDelivered))
	row("delta → subscriber p50", ms(r.Latency.P50Ms), ms(c.Broadcast.Latency.P50Ms), "b", times(r.Ratios.LatencyP50))
	row("delta → subscriber p99", ms(r.Latency.P99Ms), ms(c.Broadcast.Latency.P99Ms), "b", times(r.Ratios.LatencyP99))
	row("delta → subscriber p999", ms(r.Latency.P999Ms), ms(c.Broadcast.Latency.P999Ms), "b", times(r.Ratios.LatencyP999))
	row("bytes stored per text byte", fmt.Sprintf("%.1f", r.Storage.BytesPerTextByte), fmt.Sprintf("%.1f", c.Store.BytesPerTextByte), "a", times(r.Ratios.BytesPerTextByte))
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "delta → durable ack\tp50 %s, p99 %s, p999 %s (%s samples)\n", ms(r.AckLatency.P50Ms), ms(r.AckLatency.P99Ms), ms(r.AckLatency.P999Ms), commas(float64(r.AckLatency.Samples)))
	if r.ToolAckLatency.Samples > 0 {
		fmt.Fprintf(tw, "tool-update → durable ack\tp50 %s, p99 %s, p999 %s (%s samples)\n", ms(r.ToolAckLatency.P50Ms), ms(r.ToolAckLatency.P99Ms), ms(r.ToolAckLatency.P999Ms), commas(float64(r.ToolAckLatency.Samples)))
	}
	fmt.Fprintf(tw, "errors\t%d (runner %d, subscriber %d, prompt %d)\n", r.Errors.Total, r.Errors.Runner, r.Errors.Subscriber, r.Errors.Prompt)
	for _, s := range r.Errors.Samples {
		fmt.Fprintf(tw, "\t  %s\n", s)
	}
	check := fmt.Sprintf("every acked delta reached every subscriber (%s deltas × %d)", commas(float64(r.Counts.DeltasAcked)), cfg.Subscribers)
	if r.Counts.MissingDeliveries > 0 || r.Counts.ExtraDeliveries > 0 {
		check = fmt.Sprintf("%d acked deltas missing at subscribers, %d delivered but not acked", r.Counts.MissingDeliveries, r.Counts.ExtraDeliveries)
	}
	fmt.Fprintf(tw, "delivery\t%s\n", check)
	fmt.Fprintf(tw, "tool frames acked\t%s\n", commas(float64(r.Counts.ToolFramesAcked)))
	fmt.Fprintf(tw, "prompts\t%d queued, %d answered, %d skipped (the conversation had one outstanding)\n", r.Counts.Prompts, r.Counts.PromptsAnswered, r.Counts.PromptsSkipped)
	if r.Process.PID > 0 {
		fmt.Fprintf(tw, "server process\tpid %d: RSS %.1f MiB (peak %.1f), CPU %.2f cores\n", r.Process.PID, r.Process.RSSMiB, r.Process.PeakRSSMiB, r.Process.CPUCores)
	} else {
		fmt.Fprintf(tw, "server process\tnot measured (give -server-pid)\n")
	}
	fmt.Fprintf(tw, "load generator\tCPU %.2f cores (on the same machine)\n", r.BenchCPUCores)
	if w := r.Writer; w != nil {
		fmt.Fprintf(tw, "SQLite writer\tbusy %.0f%% of the window: %s commits/s of %.1f writes each\n", w.BusyShare*100, commas(w.CommitsPerSec), w.WritesPerCommit)
	}
	if r.Storage.Method != "" {
		fmt.Fprintf(tw, "storage\t%s bytes for %s text bytes (%s)\n", commas(float64(r.Storage.Bytes)), commas(float64(r.Storage.TextBytes)), r.Storage.Method)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\na: %s\nb: %s\n", c.Store.Method, c.Broadcast.Method)
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mib(b int64) float64 { return round2(float64(b) / (1 << 20)) }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// num formats a rate without needless decimals.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// commas formats a non-negative number rounded to a whole one, with
// thousands separators.
func commas(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
