package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// tokenPrefix starts every secret, so that a leaked token is easy to recognise.
const tokenPrefix = "pk_"

// HashToken returns the SHA-256 hex digest under which a secret is stored.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a token and stores its hash. It returns the secret, which
// is shown once and never stored. An agent token must name a valid agent id;
// other kinds name none. It returns EINVALIDVALUE for a bad kind or agent id.
func (e *Engine) CreateToken(ctx context.Context, kind parley.TokenKind, agentID, name string) (string, *parley.Token, error) {
	switch {
	case !kind.Valid():
		return "", nil, parley.Errorf(parley.EINVALIDVALUE, "token kind %q is not one of agent, viewer, admin", kind)
	case kind == parley.TokenAgent && !parley.ValidID(agentID):
		return "", nil, parley.Errorf(parley.EINVALIDVALUE, "an agent token needs an agent id of 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)")
	case kind == parley.TokenAgent && slices.Contains(conv.ReservedAgentIDs, agentID):
		// A conversation an admin made names "admin" as its creator: an
		// agent of that name would own them all.
		return "", nil, parley.Errorf(parley.EINVALIDVALUE, "agent id %q is reserved: it names a kind of token", agentID)
	case kind != parley.TokenAgent && agentID != "":
		return "", nil, parley.Errorf(parley.EINVALIDVALUE, "only agent tokens name an agent")
	case len(name) > 256:
		return "", nil, parley.Errorf(parley.ETOOLARGE, "token name is %d bytes; the limit is 256", len(name))
	case strings.ContainsRune(name, 0):
		return "", nil, parley.ErrNUL("the token's name")
	case !utf8.ValidString(name):
		return "", nil, parley.Errorf(parley.EINVALIDVALUE, "the token's name is not UTF-8")
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", nil, err
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(buf)
	t := &parley.Token{ID: NewID(), Kind: kind, AgentID: agentID, Name: name, Hash: HashToken(secret), CreatedAt: parley.NewTime(e.opts.Now())}
	if err := e.store.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// RevokeToken revokes a token by id; it stops working at once, and its
// live connections on this engine end with ErrRevoked. It returns
// ENOTFOUND.
func (e *Engine) RevokeToken(ctx context.Context, id string) error {
	// Forgotten after the revocation committed; the count drop keeps
	// makes a request that read the token before that cache nothing.
	err := e.store.RevokeToken(ctx, id, parley.NewTime(e.opts.Now()))
	e.tokens.drop(id)
	if err == nil {
		e.EndConnections(id, ErrRevoked)
	}
	return err
}

// ListTokens returns every token (without secrets).
func (e *Engine) ListTokens(ctx context.Context) ([]*parley.Token, error) {
	return e.store.ListTokens(ctx)
}

// Authenticate returns the identity of a bearer secret. It returns
// EUNAUTHORIZED for an unknown, malformed or revoked token. A token seen in
// the last 10 s is not read from the store again (see tokenCacheTTL).
func (e *Engine) Authenticate(ctx context.Context, secret string) (parley.Identity, error) {
	if !strings.HasPrefix(secret, tokenPrefix) || len(secret) > 128 {
		return parley.Identity{}, parley.Errorf(parley.EUNAUTHORIZED, "the bearer token is not a Parley token")
	}
	hash, now := HashToken(secret), e.opts.Now()
	who, ok, drops := e.tokens.get(hash, now)
	if ok {
		return who, nil
	}
	who, err := e.authenticate(ctx, hash)
	if err == nil {
		e.tokens.put(hash, who, now, drops)
	}
	return who, err
}

// authenticate reads a token from the store by its hash.
func (e *Engine) authenticate(ctx context.Context, hash string) (parley.Identity, error) {
	t, err := e.store.TokenByHash(ctx, hash)
	switch {
	case parley.ErrorCode(err) == parley.ENOTFOUND:
		return parley.Identity{}, parley.Errorf(parley.EUNAUTHORIZED, "unknown bearer token")
	case err != nil:
		return parley.Identity{}, err
	case !t.RevokedAt.IsZero():
		return parley.Identity{}, parley.Errorf(parley.EUNAUTHORIZED, "the bearer token was revoked")
	}
	return parley.Identity{Kind: t.Kind, AgentID: t.AgentID, TokenID: t.ID}, nil
}
