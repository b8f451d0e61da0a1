package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/internal/a2a"
)

// A2AOptions say which remote A2A (Agent2Agent) agent ServeA2A bridges to.
type A2AOptions struct {
	// URL is the agent's address: its card is read from
	// URL/.well-known/agent-card.json unless CardURL is set.
	URL string
	// CardURL, if set, is where the agent's card is read.
	CardURL string
	// Token, if set, is sent as a bearer token (Authorization) with every
	// request to the agent, the card's fetch included.
	Token string
	// Header holds more fields sent with every request to the agent.
	Header http.Header
	// HTTPClient makes the requests (nil: http.DefaultClient). It must not
	// time out a stream, which stays open while the agent works.
	HTTPClient *http.Client
	// MaxEventBytes bounds one event of the agent's stream, and one answer
	// (8 MiB if 0): a larger one ends the answer with an error.
	MaxEventBytes int
	// CardTimeout bounds the fetch of the agent card (30s if 0).
	CardTimeout time.Duration
	// InputTimeout, if set, is how long a question the agent asks
	// (input-required) waits for an answer in Parley: it then expires, and
	// the remote task is canceled. 0: it waits until answered or stopped.
	InputTimeout time.Duration
}

// A2AAgent is the remote agent ServeA2A found: what its card says and the
// interface chosen.
type A2AAgent struct {
	// Name is the card's name of the agent.
	Name string
	// URL is the JSON-RPC interface's URL.
	URL string
	// ProtocolVersion is the A2A version spoken: "1.0" or "0.3".
	ProtocolVersion string
	// Streaming is whether the agent streams its answers.
	Streaming bool
}

// ErrNoA2AInterface is what ServeA2A returns when the agent's card lists
// no JSON-RPC interface of a version it speaks (1.0 or 0.3).
var ErrNoA2AInterface = errors.New("client: the agent card has no JSON-RPC interface of A2A 1.0 or 0.3")

// ConnectA2A reads the remote agent's card and picks its JSON-RPC
// interface: of protocol version 1.0 if it has one, else 0.3. ServeA2A
// calls it; call it to check an agent before serving.
func ConnectA2A(ctx context.Context, o A2AOptions) (A2AAgent, error) {
	b, err := newA2ABridge(ctx, o)
	if err != nil {
		return A2AAgent{}, err
	}
	return b.agent, nil
}

// ServeA2A answers the runner's prompts with a remote A2A agent until ctx
// ends, the runner is closed or the server ends it (what Runner.Serve
// returns); it returns an error at once if the agent's card cannot be read
// or names no interface it speaks (ErrNoA2AInterface). It reads the card
// (ConnectA2A), then sends each prompt to the agent as a user message,
// streamed (SendStreamingMessage, or 0.3's message/stream) when the card
// says the agent streams, else blocking (SendMessage, message/send), and
// writes the answer as one Parley message:
//
//   - the text of the task's artifacts, as it streams (an artifact update
//     with append continues its artifact); a data part as a JSON code
//     block, a file part as a link (or a line naming it, for bytes);
//   - the text of a Message the agent answers with, and of the message of
//     the task's last status, when they add to what the artifacts said;
//   - a completed task ends the message (end_turn); a failed or rejected
//     one ends it with an error part saying why; one canceled by the agent
//     ends it canceled, as a stop does;
//   - input-required: the status message's text is asked in Parley as a
//     question (Reply.AskQuestion); the answer goes back to the agent as a
//     message of the same task and context, and the answer goes on. A
//     question unanswered for InputTimeout expires: the remote task is
//     canceled and the answer ends with an error.
//
// A stop or a steer in Parley cancels the remote task (CancelTask,
// tasks/cancel) and ends the message canceled. Each Parley conversation
// keeps one A2A context: the contextId of its first answer is sent with
// its later prompts, so that the agent keeps what was said.
func ServeA2A(ctx context.Context, r *Runner, o A2AOptions) error {
	b, err := newA2ABridge(ctx, o)
	if err != nil {
		return err
	}
	b.defaultConv = r.ConversationID()
	return r.Serve(ctx, b)
}

// a2aBridge is the Handler ServeA2A serves with.
type a2aBridge struct {
	agent       A2AAgent
	c           *a2a.Client
	defaultConv string        // the conversation of a conversation's own runner
	inputTTL    time.Duration // A2AOptions.InputTimeout

	mu       sync.Mutex
	contexts map[string]string // conversation → the agent's contextId
}

// maxA2AContexts bounds the contexts a bridge remembers (the oldest are
// then forgotten all at once: their conversations start a new context).
const maxA2AContexts = 10000

func newA2ABridge(ctx context.Context, o A2AOptions) (*a2aBridge, error) {
	base := strings.TrimRight(o.URL, "/")
	cardURL := o.CardURL
	if cardURL == "" {
		if base == "" {
			return nil, errors.New("client: A2AOptions has neither URL nor CardURL")
		}
		cardURL = base + "/" + a2a.CardPath
	}
	header := o.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if o.Token != "" {
		header.Set("Authorization", "Bearer "+o.Token)
	}
	card, err := a2a.FetchCard(ctx, o.HTTPClient, cardURL, header, o.CardTimeout)
	if err != nil {
		return nil, err
	}
	in, ok := a2a.JSONRPCInterface(card)
	if !ok {
		return nil, ErrNoA2AInterface
	}
	return &a2aBridge{
		agent:    A2AAgent{Name: card.Name, URL: in.URL, ProtocolVersion: in.ProtocolVersion, Streaming: card.Capabilities.Streaming},
		c:        &a2a.Client{URL: in.URL, Version: in.ProtocolVersion, Header: header, HTTP: o.HTTPClient, MaxEvent: o.MaxEventBytes},
		contexts: map[string]string{},
		inputTTL: o.InputTimeout,
	}, nil
}

// conversation is the Parley conversation a prompt was asked in.
func (b *a2aBridge) conversation(p Push) string {
	if p.ConversationID != "" {
		return p.ConversationID
	}
	return b.defaultConv
}

func (b *a2aBridge) contextOf(conv string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.contexts[conv]
}

func (b *a2aBridge) keepContext(conv, contextID string) {
	if contextID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.contexts[conv]; !ok && len(b.contexts) >= maxA2AContexts {
		clear(b.contexts)
	}
	b.contexts[conv] = contextID
}

// Answer implements Handler: one prompt, sent to the agent, its answer
// relayed.
func (b *a2aBridge) Answer(ctx context.Context, rp *Reply) error {
	conv := b.conversation(rp.Prompt)
	ans := &a2aAnswer{b: b, rp: rp, conv: conv, contextID: b.contextOf(conv), artifacts: map[string]*a2aArtifact{}}
	err := ans.run(ctx)
	if ctx.Err() != nil {
		ans.cancelRemote(ctx)
		return ctx.Err()
	}
	return err
}

// a2aCancelTimeout bounds the cancel of a remote task after a stop.
const a2aCancelTimeout = 10 * time.Second

// cancelRemote asks the agent to cancel the answer's task, if it has one
// that has not ended, whatever ctx (ended, after a stop) says.
func (a *a2aAnswer) cancelRemote(ctx context.Context) {
	if a.taskID == "" || a.state.Terminal() {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a2aCancelTimeout)
	defer cancel()
	_, _ = a.b.c.CancelTask(cctx, a.taskID) // a task the agent cannot cancel ends on our side all the same
}

// a2aFailure is the error a failed or rejected task ends the answer with.
func a2aFailure(state a2a.TaskState, reason string) error {
	what := "failed"
	switch state {
	case a2a.StateRejected:
		what = "rejected the prompt"
	case a2a.StateAuthRequired:
		what = "asks for authentication, which the bridge cannot give"
	}
	if reason == "" {
		return fmt.Errorf("the A2A agent %s", what)
	}
	return fmt.Errorf("the A2A agent %s: %s", what, reason)
}
