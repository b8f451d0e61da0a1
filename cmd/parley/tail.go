package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tail", stderr)
	server := fs.String("server", envOr("PARLEY_SERVER", "http://127.0.0.1:7700"), "server URL")
	token := fs.String("token", envOr("PARLEY_TOKEN", ""), "bearer token (viewer is enough)")
	ws := fs.Bool("ws", false, "use the WebSocket stream instead of SSE")
	after := fs.Int64("after", -1, "replay events after this seq (0: the whole log); default: a snapshot, then live")
	asJSON := fs.Bool("json", false, "print each frame as one JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("tail: give one conversation id")
	}
	// A server never reached is not resumed: it is likely not there (a
	// wrong -server, or none running). One reached and then lost is.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	reached := false
	var unreachable error
	opts := client.SubscribeOptions{
		Transport: client.SSE,
		OnReconnect: func(err error) {
			if !reached {
				unreachable = fmt.Errorf("tail: cannot reach the server at %s: %w", *server, err)
				stop()
				return
			}
			fmt.Fprintf(stderr, "-- connection lost (%v); resuming\n", err)
		},
	}
	if *ws {
		opts.Transport = client.WebSocket
	}
	if *after >= 0 {
		opts.From = &parley.Position{Seq: *after}
	}
	st := client.New(*server, *token).Subscribe(ctx, fs.Arg(0), opts)
	defer st.Close()
	for {
		f, err := st.Next(ctx)
		if err != nil && unreachable != nil {
			return unreachable
		}
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		reached = true
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(f); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(stdout, formatFrame(f))
	}
}

// formatFrame renders one frame as one line for people.
func formatFrame(f client.Frame) string {
	switch {
	case f.Init != nil:
		in := f.Init
		state := "snapshot"
		if in.Recovered {
			state = "resumed"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "== %s %q (%s at seq %d, epoch %s, last turn %d)", in.Conversation.ID, in.Conversation.Title, state, in.Position.Seq, in.Position.Epoch, in.Head.LastTurn)
		for _, m := range in.Messages {
			text := oneLine(m.Content, 200)
			if m.Summarized != nil { // too large for the snapshot: its text is not here
				text = fmt.Sprintf("(%s, summarized; GET …/messages/%s has it)", bytesOf(int64(m.Summarized.Bytes)), m.ID)
			}
			fmt.Fprintf(&b, "\n#%d t%d [%s] %s: %s", m.Seq, m.Turn, m.AgentID, m.Role, text)
			if m.Status != parley.StatusComplete {
				fmt.Fprintf(&b, " (%s)", m.Status) // streaming so far, or how it ended
			}
		}
		if in.Guidance != nil {
			b.WriteString("\n" + formatGuidance(in.Guidance))
		}
		return b.String()
	case f.Guidance != nil:
		return formatGuidance(f.Guidance)
	case f.Event != nil:
		return formatEvent(f.Event)
	}
	return "?? " + f.Type
}

func formatEvent(e *parley.Event) string {
	prefix := fmt.Sprintf("#%d t%d [%s] %s", e.Seq, e.Turn, e.AgentID, e.Type)
	if e.Finality != "" && e.Finality != parley.FinalityNone {
		prefix += " (closes " + string(e.Finality) + ")"
	}
	if e.Type == parley.EventChunk {
		var c parley.Chunk
		if json.Unmarshal(e.Data, &c) == nil {
			return prefix + " " + c.MessageID + " += " + oneLine(c.Content, 200)
		}
	}
	if e.Type == parley.EventInputAnswered {
		var a parley.InputAnswered
		if json.Unmarshal(e.Data, &a) == nil {
			line := prefix + " " + a.MessageID + " asks " + a.RequestID + ": " + a.Status
			if len(a.Answer) > 0 {
				line += " " + oneLine(string(a.Answer), 200)
			}
			if a.Reason != "" {
				line += " (" + a.Reason + ")"
			}
			return line
		}
	}
	if e.Type == parley.EventPartUpdated {
		var u parley.PartUpdate
		if json.Unmarshal(e.Data, &u) == nil && u.Part.Type == parley.PartInputRequest {
			return prefix + " " + u.MessageID + " asks " + u.Part.RequestID + " (" + u.Part.Kind + "): " + oneLine(u.Part.Title, 200)
		}
		if json.Unmarshal(e.Data, &u) == nil {
			p := u.Part
			line := prefix + " " + u.MessageID + " tool " + p.CallID
			if p.ToolName != "" {
				line += " " + p.ToolName
			}
			line += " " + p.Status
			for _, f := range []struct {
				name string
				v    []byte
			}{{"args", p.Args}, {"result", p.Result}, {"error", []byte(p.Error)}} {
				if len(f.v) > 0 {
					line += " " + f.name + " " + oneLine(string(f.v), 80)
				}
			}
			return line
		}
	}
	if e.Type == parley.EventMessage || e.Type == parley.EventMessageUpdated {
		var m parley.Message
		if json.Unmarshal(e.Data, &m) == nil {
			text := oneLine(m.Content, 200)
			if m.ReplyTo != "" {
				text = "(reply to " + m.ReplyTo + ") " + text
			}
			return prefix + " " + string(m.Role) + ": " + text
		}
	}
	return prefix + " " + oneLine(string(e.Data), 200)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func formatGuidance(g *parley.Guidance) string {
	who := g.NextAgentID
	if who == "" {
		who = "anyone"
	}
	return fmt.Sprintf("   -> %s: %s turn %d", who, g.Kind, g.Turn)
}
