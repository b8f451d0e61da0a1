package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley"
)

// NewToken is the body of CreateToken.
type NewToken = parley.CreateTokenRequest

// CreatedToken is a new token with its secret, which the server shows
// this once.
type CreatedToken struct {
	// Secret is the bearer token to give New.
	Secret string `json:"token"`
	parley.Token
}

// CreateToken creates a token (admin only). On a server running open, the
// first token ends open mode at once: requests without a token are then
// refused.
func (c *Client) CreateToken(ctx context.Context, t NewToken) (*CreatedToken, error) {
	return call[CreatedToken](ctx, c, http.MethodPost, "/v1/tokens", t)
}

// Tokens returns every token, oldest first, without secrets (admin only).
func (c *Client) Tokens(ctx context.Context) ([]*parley.Token, error) {
	r, err := call[struct {
		Tokens []*parley.Token `json:"tokens"`
	}](ctx, c, http.MethodGet, "/v1/tokens", nil)
	if err != nil {
		return nil, err
	}
	return r.Tokens, nil
}

// RevokeToken revokes a token (admin only): it stops working at once, and
// its streams and runner connections end.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// Identity is who the client's token acts as.
type Identity struct {
	Kind parley.TokenKind `json:"kind"`
	// AgentID is the agent of an agent token; empty otherwise.
	AgentID string `json:"agentId"`
	// Open is true on a server running without tokens, where every request
	// acts as an admin.
	Open bool `json:"open"`
}

// WhoAmI returns who the client's token acts as.
func (c *Client) WhoAmI(ctx context.Context) (*Identity, error) {
	return call[Identity](ctx, c, http.MethodGet, "/v1/whoami", nil)
}

// Health returns nil while the server process runs (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Ready returns nil when the server can serve (GET /readyz), and a 503
// unavailable *StatusError when its database does not answer.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}
