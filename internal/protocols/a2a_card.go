package protocols

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
)

// The Agent Card of each agent: its name, description and skills from the
// configuration (ReadA2ACards), a default one for an agent it does not
// name; the rest is the server's: where it is served (the request's own
// scheme and host, the server trusting no X-Forwarded-Proto), in both
// versions' fields, so that a 1.0 client (supportedInterfaces) and a 0.3
// one (url, preferredTransport, protocolVersion) both read it.

// ReadA2ACards reads the cards' configuration: a JSON object mapping an
// agent id to {name, description, skills: [{id, name, description, tags,
// examples}]}. Errors say which agent and what.
func ReadA2ACards(path string) (map[string]A2ACard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent cards: %w", err)
	}
	var cards map[string]A2ACard
	if err := json.Unmarshal(data, &cards); err != nil {
		return nil, fmt.Errorf("agent cards %s: not a JSON object mapping an agent id to {name, description, skills}: %w", path, err)
	}
	for id, c := range cards {
		if !parley.ValidID(id) {
			return nil, fmt.Errorf("agent cards %s: %q is not an agent id (1-128 characters of A-Z a-z 0-9 . _ : -)", path, id)
		}
		for i, sk := range c.Skills {
			if sk.ID == "" || sk.Name == "" {
				return nil, fmt.Errorf("agent cards %s: agent %s: skills[%d] needs an id and a name", path, id, i)
			}
		}
	}
	return cards, nil
}

// bearerText describes the card's one security scheme.
const bearerText = "a Parley token: an agent's sends as that agent; an admin's as params.metadata.agentId; a viewer's only reads"

// a2aCardDoc is the card as served: 1.0's card with 0.3's top-level
// fields beside.
type a2aCardDoc struct {
	a2a.AgentCard
	URL                string `json:"url"`
	PreferredTransport string `json:"preferredTransport"`
	ProtocolVersion    string `json:"protocolVersion"`
	// SupportsAuthenticatedExtendedCard is 0.3's; there is none.
	SupportsAuthenticatedExtendedCard bool `json:"supportsAuthenticatedExtendedCard"`
	// SecuritySchemes holds each scheme in both versions' forms: 1.0's
	// httpAuthSecurityScheme and 0.3's type and scheme.
	SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
	// Security is 0.3's form of securityRequirements.
	Security []map[string][]string `json:"security"`
}

// A2ACard serves GET /v1/a2a/{agentId}/.well-known/agent-card.json: the
// agent's card, to any valid token (the card names the agent, which is
// not every reader's to know on a server whose agents are private).
func (s *Server) A2ACard(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	agent := r.PathValue("agentId")
	if !parley.ValidID(agent) {
		s.host.WriteError(w, parley.Errorf(parley.EINVALIDVALUE, "agent id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", agent))
		return
	}
	conf, ok := s.opts.A2ACards[agent]
	if !ok {
		conf = A2ACard{Name: agent, Description: "The Parley agent " + agent + ": a message to it is a prompt to it in a Parley conversation."}
	}
	if conf.Name == "" {
		conf.Name = agent
	}
	skills := conf.Skills
	if len(skills) == 0 {
		skills = []a2a.AgentSkill{{ID: "chat", Name: "Chat", Description: "Answers a text message, streaming its answer.", Tags: []string{"chat"}}}
	}
	for i := range skills {
		if skills[i].Tags == nil {
			skills[i].Tags = []string{}
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	url := scheme + "://" + r.Host + "/v1/a2a/" + agent
	card := a2aCardDoc{
		AgentCard: a2a.AgentCard{
			Name: conf.Name, Description: conf.Description, Version: "1.0.0",
			SupportedInterfaces: []a2a.AgentInterface{
				{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: a2a.ProtocolVersion},
				{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: a2a.LegacyProtocolVersion},
			},
			Provider:             &a2a.AgentProvider{Organization: "Parley", URL: scheme + "://" + r.Host},
			Capabilities:         a2a.AgentCapabilities{Streaming: true},
			SecurityRequirements: []a2a.SecurityRequirement{{Schemes: map[string]a2a.StringList{"bearer": {List: []string{}}}}},
			DefaultInputModes:    []string{"text/plain", "application/json"},
			DefaultOutputModes:   []string{"text/plain", "application/json"},
			Skills:               skills,
		},
		URL: url, PreferredTransport: "JSONRPC", ProtocolVersion: "0.3.0",
		Security: []map[string][]string{{"bearer": {}}},
		SecuritySchemes: map[string]map[string]any{"bearer": {
			"httpAuthSecurityScheme": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: bearerText},
			"type":                   "http", "scheme": "bearer", "description": bearerText}},
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(card)
}
