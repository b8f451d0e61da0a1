package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/client"
)

// headerFlags is a repeated -remote-header NAME=VALUE flag.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want NAME=VALUE, not %q", v)
	}
	http.Header(h).Add(strings.TrimSpace(name), value)
	return nil
}

// newA2ABridgeFlags declares a2a-bridge's flags (the docs' table is
// checked against them).
func newA2ABridgeFlags(stderr io.Writer) (*flag.FlagSet, *a2aBridgeConfig) {
	fs := newFlags("a2a-bridge", stderr)
	c := &a2aBridgeConfig{header: headerFlags{}}
	fs.StringVar(&c.server, "server", envOr("PARLEY_SERVER", "http://127.0.0.1:7700"), "Parley server URL")
	fs.StringVar(&c.token, "token", envOr("PARLEY_TOKEN", ""), "Parley bearer token: the agent's, or an admin's")
	fs.StringVar(&c.agent, "agent", "", "the Parley agent id the remote agent answers as (required)")
	fs.StringVar(&c.conversation, "conversation", "", "answer in this conversation only (default: every conversation the agent takes part in)")
	fs.StringVar(&c.remote, "remote", "", "the remote A2A agent's URL; its card is read at URL/.well-known/agent-card.json")
	fs.StringVar(&c.card, "card", "", "the remote agent card's URL, when it is not below -remote")
	fs.StringVar(&c.remoteToken, "remote-token", envOr("PARLEY_A2A_TOKEN", ""), "bearer token sent to the remote agent")
	fs.DurationVar(&c.inputTimeout, "input-timeout", 0, "how long a question of the remote agent waits for an answer in Parley before its task is canceled (0: no limit)")
	fs.Var(c.header, "remote-header", "NAME=VALUE header field sent to the remote agent (repeatable)")
	return fs, c
}

// a2aBridgeConfig is what a2a-bridge's flags say.
type a2aBridgeConfig struct {
	server, token, agent, conversation string
	remote, card, remoteToken          string
	header                             headerFlags
	inputTimeout                       time.Duration
}

// runA2ABridge attaches a runner as an agent that a remote A2A agent
// answers for, until ctx ends (a signal) or the server ends the runner.
func runA2ABridge(ctx context.Context, args []string, stderr io.Writer) error {
	fs, c := newA2ABridgeFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return fmt.Errorf("a2a-bridge: unexpected arguments %q", fs.Args())
	case c.agent == "":
		return errors.New("a2a-bridge: -agent is required")
	case c.remote == "" && c.card == "":
		return errors.New("a2a-bridge: -remote (or -card) is required")
	}
	o := client.A2AOptions{URL: c.remote, CardURL: c.card, Token: c.remoteToken, Header: http.Header(c.header), InputTimeout: c.inputTimeout}
	agent, err := client.ConnectA2A(ctx, o)
	if err != nil {
		return fmt.Errorf("a2a-bridge: %w", err)
	}
	pc := client.New(c.server, c.token)
	var r *client.Runner
	if c.conversation != "" {
		r, err = pc.ConnectRunner(ctx, c.conversation, c.agent)
	} else {
		r, err = pc.ConnectAgentRunner(ctx, c.agent)
	}
	if err != nil {
		return fmt.Errorf("a2a-bridge: connecting the runner of %s: %w", c.agent, err)
	}
	defer r.Close()
	mode := "blocking"
	if agent.Streaming {
		mode = "streaming"
	}
	fmt.Fprintf(stderr, "a2a-bridge: %s answers as %q: %s (A2A %s, %s) at %s\n", c.agent, agent.Name, c.remote+c.card, agent.ProtocolVersion, mode, agent.URL)
	err = client.ServeA2A(ctx, r, o)
	if ctx.Err() != nil {
		return nil // stopped by a signal
	}
	return fmt.Errorf("a2a-bridge: %w", err)
}
