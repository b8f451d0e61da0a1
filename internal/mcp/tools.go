package mcp

import (
	"context"
	"encoding/json"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// Bounds of the tools' counts.
const (
	defaultConversations = 20
	maxConversations     = 100
	defaultMessages      = 50
	maxMessages          = 200
	defaultSearch        = 20
	maxSearch            = 100
	maxMetadataFilters   = store.MaxMetadataFilters
)

// addTools adds the tools, acting as who, to srv.
func (s *Server) addTools(srv *gomcp.Server, who parley.Identity) {
	gomcp.AddTool(srv, &gomcp.Tool{Name: "list_conversations", Description: `List the conversations you take part in (an admin or viewer token: all), most recently active first, with each one's head (lastSeq, open turn, closed) and guidance (who speaks next). Filter by title (contains), participant, involves (an agent taking part), or metadata (exact string values). Go on with cursor = nextCursor. Example: {"title": "release"}.`,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, tool(s, who, s.listConversations))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "read_conversation", Description: `Read a conversation's messages after a position (seq), oldest first, with its head and guidance. A page ends at limit messages or about 256 KiB; go on with after = nextAfter. Example: {"conversationId": "c1", "after": 0}.`,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, tool(s, who, s.readConversation))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "search_messages", Description: `Search the messages you may read for words (a phrase in double quotes), best first; narrow it to one conversation with conversationId. Go on with cursor = nextCursor. Example: {"q": "deploy \"staging\""}.`,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, tool(s, who, s.searchMessages))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "wait_for_turn", Description: `Wait until the conversation's guidance names you (start_turn or continue_turn), up to timeoutSeconds (default 30, at most 120). Returns yourTurn, the guidance, the head and the messages after your position (after). Call it before you write; if it times out, call it again. Example: {"conversationId": "c1", "after": 12}.`,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, tool(s, who, s.waitForTurn))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "claim_turn", Description: `Claim the conversation's next turn so that nobody else starts it, for ttlMs (default: the server's). expectTurn, if given, must be that next turn (the guidance's turn from wait_for_turn): the claim fails if the conversation moved on. Example: {"conversationId": "c1"}.`,
		Annotations: &gomcp.ToolAnnotations{}}, tool(s, who, s.claimTurn))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "post_message", Description: `Write a message to the conversation in your turn. finality: "none" (default) keeps the turn open, "turn" ends your turn, "conversation" closes the conversation; next names the agent who speaks next; replyTo threads it under a message. Example: {"conversationId": "c1", "content": "Done: v2 is deployed.", "finality": "turn", "next": "bob"}.`,
		Annotations: &gomcp.ToolAnnotations{}}, tool(s, who, s.postMessage))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "ask_agent", Description: `Ask another agent (to) a question in the conversation, and wait up to timeoutSeconds (default 60, at most 120) for its answer (its runner answers). Returns the answer's message, or, if it has not answered yet, the prompt's id and state. Example: {"conversationId": "c1", "to": "reviewer", "content": "Is this safe to merge?"}.`,
		Annotations: &gomcp.ToolAnnotations{}}, tool(s, who, s.askAgent))
	gomcp.AddTool(srv, &gomcp.Tool{Name: "answer_input", Description: `Answer an input request (a question or an approval an agent asked) of the conversation; the head's pendingInputs lists them. An approval's answer is {"approved": true} or {"approved": false, "reason": "…"}. Example: {"conversationId": "c1", "requestId": "in-1", "answer": {"approved": true}}.`,
		Annotations: &gomcp.ToolAnnotations{}}, tool(s, who, s.answerInput))
}

// ListConversationsInput are list_conversations' arguments.
type ListConversationsInput struct {
	Title       string            `json:"title,omitempty" jsonschema:"only conversations whose title contains this (any case)"`
	Participant string            `json:"participant,omitempty" jsonschema:"only conversations with this agent among their participants"`
	Involves    string            `json:"involves,omitempty" jsonschema:"only conversations this agent takes part in: a participant, a member or their creator"`
	Metadata    map[string]string `json:"metadata,omitempty" jsonschema:"only conversations whose metadata has each key with exactly this string value"`
	Limit       int               `json:"limit,omitempty" jsonschema:"how many, 1 to 100 (default 20)"`
	Cursor      string            `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page"`
}

// ConversationsOutput is list_conversations' answer.
type ConversationsOutput struct {
	Conversations []*engine.View `json:"conversations"`
	NextCursor    string         `json:"nextCursor,omitempty"`
}

func (s *Server) listConversations(ctx context.Context, who parley.Identity, in *ListConversationsInput) (*ConversationsOutput, error) {
	limit, err := bounded("limit", in.Limit, defaultConversations, maxConversations)
	if err != nil {
		return nil, err
	}
	if len(in.Metadata) > maxMetadataFilters {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "%d metadata filters; at most %d", len(in.Metadata), maxMetadataFilters)
	}
	p := store.ListConversationsParams{Cursor: in.Cursor, Limit: limit, Title: in.Title, Participant: in.Participant, Involves: in.Involves, MaxBytes: s.opts.PageBytes}
	for k, v := range in.Metadata {
		p.Metadata = append(p.Metadata, store.MetadataFilter{Key: k, Value: v})
	}
	views, next, err := s.host.Conversations(ctx, who, p)
	if err != nil {
		return nil, err
	}
	if views == nil {
		views = []*engine.View{}
	}
	return &ConversationsOutput{Conversations: views, NextCursor: next}, nil
}

// ReadConversationInput are read_conversation's arguments.
type ReadConversationInput struct {
	ConversationID string `json:"conversationId" jsonschema:"the conversation's id"`
	After          int64  `json:"after,omitempty" jsonschema:"read the messages after this seq (0: from the start; give the previous page's nextAfter)"`
	Limit          int    `json:"limit,omitempty" jsonschema:"how many messages, 1 to 200 (default 50)"`
}

// ConversationOutput is read_conversation's answer, and wait_for_turn's.
type ConversationOutput struct {
	// YourTurn (wait_for_turn) is true when the guidance names the agent.
	YourTurn *bool `json:"yourTurn,omitempty"`
	// TimedOut (wait_for_turn) is true when the wait ended first.
	TimedOut     bool                `json:"timedOut,omitempty"`
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
	Messages     []*parley.Message   `json:"messages"`
	// NextAfter is where the next page starts, when there may be more.
	NextAfter int64 `json:"nextAfter,omitempty"`
}

func (s *Server) readConversation(ctx context.Context, who parley.Identity, in *ReadConversationInput) (*ConversationOutput, error) {
	limit, err := bounded("limit", in.Limit, defaultMessages, maxMessages)
	if err == nil {
		err = s.readable(ctx, who, in.ConversationID)
	}
	if err != nil {
		return nil, err
	}
	return s.page(ctx, in.ConversationID, in.After, limit)
}

// readable checks that who may read conversation id, as every read of the
// HTTP API does first.
func (s *Server) readable(ctx context.Context, who parley.Identity, id string) error {
	if err := checkID("conversationId", id); err != nil {
		return err
	}
	return s.eng.Require(ctx, id, func(st conv.State) error { return st.CanRead(who) })
}

// page reads the conversation's view and a page of its messages after
// after, bounded in count and bytes.
func (s *Server) page(ctx context.Context, id string, after int64, limit int) (*ConversationOutput, error) {
	if after < 0 {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "after must be a seq, 0 or more, not %d", after)
	}
	v, err := s.eng.Conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	ms, err := s.rd.Messages(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: limit, MaxBytes: s.opts.PageBytes})
	if err != nil {
		return nil, err
	}
	out := &ConversationOutput{Conversation: v.Conversation, Head: v.Head, Guidance: v.Guidance, Messages: ms}
	if ms == nil {
		out.Messages = []*parley.Message{}
	}
	if reads.PageFull(ms, limit, s.opts.PageBytes) {
		out.NextAfter = ms[len(ms)-1].Seq
	}
	return out, nil
}

// SearchInput are search_messages' arguments.
type SearchInput struct {
	Q              string `json:"q" jsonschema:"the words to search for; a phrase in double quotes"`
	ConversationID string `json:"conversationId,omitempty" jsonschema:"search only this conversation"`
	Limit          int    `json:"limit,omitempty" jsonschema:"how many hits, 1 to 100 (default 20)"`
	Cursor         string `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page, with the same q and conversationId"`
}

// SearchOutput is search_messages' answer.
type SearchOutput struct {
	Hits       []parley.SearchHit `json:"hits"`
	NextCursor string             `json:"nextCursor,omitempty"`
}

func (s *Server) searchMessages(ctx context.Context, who parley.Identity, in *SearchInput) (*SearchOutput, error) {
	limit, err := bounded("limit", in.Limit, defaultSearch, maxSearch)
	if err != nil {
		return nil, err
	}
	hits, next, err := s.host.Search(ctx, who, in.Q, in.ConversationID, limit, in.Cursor)
	if err != nil {
		return nil, err
	}
	if hits == nil {
		hits = []parley.SearchHit{}
	}
	return &SearchOutput{Hits: hits, NextCursor: next}, nil
}

// ClaimTurnInput are claim_turn's arguments.
type ClaimTurnInput struct {
	ConversationID string `json:"conversationId" jsonschema:"the conversation's id"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"with an admin token: the agent to act as (an agent token acts as its agent)"`
	ExpectTurn     int    `json:"expectTurn,omitempty" jsonschema:"claim only if this is the next turn (lastTurn+1, the turn of wait_for_turn's guidance)"`
	TTLMs          int64  `json:"ttlMs,omitempty" jsonschema:"how long the claim holds, in milliseconds (default: the server's)"`
}

func (s *Server) claimTurn(ctx context.Context, who parley.Identity, in *ClaimTurnInput) (*engine.TurnResult, error) {
	act, err := s.writer(who, in.AgentID, in.ConversationID)
	if err != nil {
		return nil, err
	}
	ttl, err := s.host.ClaimTTL(in.TTLMs)
	if err != nil {
		return nil, err
	}
	return s.eng.Claim(ctx, in.ConversationID, conv.ClaimTurn{Actor: act, ExpectTurn: in.ExpectTurn, TTL: ttl})
}

// writer decides who a write acts as, and checks the conversation's id.
func (s *Server) writer(who parley.Identity, agentID, id string) (conv.Actor, error) {
	act, err := s.host.Actor(who, agentID)
	if err == nil {
		err = checkID("conversationId", id)
	}
	return act, err
}

// PostMessageInput are post_message's arguments.
type PostMessageInput struct {
	ConversationID string          `json:"conversationId" jsonschema:"the conversation's id"`
	AgentID        string          `json:"agentId,omitempty" jsonschema:"with an admin token: the agent to write as (an agent token writes as its agent)"`
	Content        string          `json:"content" jsonschema:"the message's text (Markdown)"`
	ReplyTo        string          `json:"replyTo,omitempty" jsonschema:"the id of the message this one answers"`
	Finality       parley.Finality `json:"finality,omitempty" jsonschema:"none (default: the turn stays open), turn (ends your turn) or conversation (closes it)"`
	Next           string          `json:"next,omitempty" jsonschema:"with finality turn: the agent who speaks next"`
	// ClientRequestID makes a retried post_message harmless, as the HTTP
	// API's clientRequestId does.
	ClientRequestID string `json:"clientRequestId,omitempty" jsonschema:"an id of your choosing that makes a retry harmless: the same clientRequestId with the same arguments returns the first answer and writes nothing; with other arguments it is refused"`
}

func (s *Server) postMessage(ctx context.Context, who parley.Identity, in *PostMessageInput) (*engine.MessageResult, error) {
	act, err := s.writer(who, in.AgentID, in.ConversationID)
	if err != nil {
		return nil, err
	}
	switch in.Finality {
	case "", parley.FinalityNone, parley.FinalityTurn, parley.FinalityConversation:
	default:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "finality must be none, turn or conversation, not %q", in.Finality)
	}
	var hash string
	if in.ClientRequestID != "" {
		if err := checkID("clientRequestId", in.ClientRequestID); err != nil {
			return nil, err
		}
		args := *in
		args.ClientRequestID = "" // as the HTTP API hashes a body: without its key
		hash = parley.RequestHash(&args)
	}
	return s.eng.PostMessage(ctx, in.ConversationID, conv.PostMessage{
		Actor: act, Role: parley.RoleAssistant, Parts: []parley.Part{{Type: parley.PartText, Text: in.Content}},
		ReplyTo: in.ReplyTo, Finality: in.Finality, Next: in.Next, NeedsContent: true,
		ClientRequestID: in.ClientRequestID, RequestHash: hash,
	})
}

// AnswerInputInput are answer_input's arguments.
type AnswerInputInput struct {
	ConversationID string `json:"conversationId" jsonschema:"the conversation's id"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"with an admin token: the agent to answer as"`
	RequestID      string `json:"requestId" jsonschema:"the input request's id (head.pendingInputs)"`
	Answer         any    `json:"answer" jsonschema:"the answer: for an approval {approved, reason?}; for a question what it asks for"`
}

func (s *Server) answerInput(ctx context.Context, who parley.Identity, in *AnswerInputInput) (*parley.AnswerInputResult, error) {
	act, err := s.writer(who, in.AgentID, in.ConversationID)
	if err != nil {
		return nil, err
	}
	answer, err := json.Marshal(in.Answer)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "answer must be JSON")
	}
	return s.host.AnswerInput(ctx, in.ConversationID, in.RequestID, answer, act)
}
