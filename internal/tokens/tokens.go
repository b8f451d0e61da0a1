// Package tokens keeps the bearer tokens a server is used with: it makes
// them (storing only a hash of each secret), lists and revokes them, and
// tells whose a secret is, trusting an answer for a few seconds (see
// tokenCacheTTL). It also counts the live connections (streams and
// runners) of each token, so that their number can be bounded and
// revoking the token ends them.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Store is where tokens are kept (store.Store has it).
type Store interface {
	// CreateToken stores a token (its hash, never its secret).
	CreateToken(ctx context.Context, t *parley.Token) error
	// TokenByHash returns the token with that SHA-256 hex hash, revoked or not.
	TokenByHash(ctx context.Context, hash string) (*parley.Token, error)
	// ListTokens returns every token, oldest first.
	ListTokens(ctx context.Context) ([]*parley.Token, error)
	// RevokeToken marks a token revoked at the given time.
	RevokeToken(ctx context.Context, id string, at parley.Time) error
}

// Options configure a Keeper. Zero values take the defaults.
type Options struct {
	// Now returns the current time (default time.Now); tests may replace it.
	Now func() time.Time
}

// Keeper makes, revokes and authenticates tokens, and keeps the live
// connections of each. It is safe for concurrent use.
type Keeper struct {
	store Store
	now   func() time.Time
	cache tokenCache
	conns conns // live connections by token: see Connect
}

// New returns a Keeper of the tokens in st.
func New(st Store, opts Options) *Keeper {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Keeper{store: st, now: opts.Now}
}

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
func (k *Keeper) CreateToken(ctx context.Context, kind parley.TokenKind, agentID, name string) (string, *parley.Token, error) {
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
	id := uuid.Must(uuid.NewV7()).String() // time-ordered, as every id the server makes
	t := &parley.Token{ID: id, Kind: kind, AgentID: agentID, Name: name, Hash: HashToken(secret), CreatedAt: parley.NewTime(k.now())}
	if err := k.store.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// RevokeToken revokes a token by id; it stops working at once, and its
// live connections here end with ErrRevoked. It returns ENOTFOUND.
func (k *Keeper) RevokeToken(ctx context.Context, id string) error {
	// Forgotten after the revocation committed; the count drop keeps
	// makes a request that read the token before that cache nothing.
	err := k.store.RevokeToken(ctx, id, parley.NewTime(k.now()))
	k.cache.drop(id)
	if err == nil {
		k.EndConnections(id, ErrRevoked)
	}
	return err
}

// ListTokens returns every token (without secrets).
func (k *Keeper) ListTokens(ctx context.Context) ([]*parley.Token, error) {
	return k.store.ListTokens(ctx)
}

// Authenticate returns the identity of a bearer secret. It returns
// EUNAUTHORIZED for an unknown, malformed or revoked token. A token seen in
// the last 10 s is not read from the store again (see tokenCacheTTL).
func (k *Keeper) Authenticate(ctx context.Context, secret string) (parley.Identity, error) {
	if !strings.HasPrefix(secret, tokenPrefix) || len(secret) > 128 {
		return parley.Identity{}, parley.Errorf(parley.EUNAUTHORIZED, "the bearer token is not a Parley token")
	}
	hash, now := HashToken(secret), k.now()
	who, ok, drops := k.cache.get(hash, now)
	if ok {
		return who, nil
	}
	who, err := k.authenticate(ctx, hash)
	if err == nil {
		k.cache.put(hash, who, now, drops)
	}
	return who, err
}

// authenticate reads a token from the store by its hash.
func (k *Keeper) authenticate(ctx context.Context, hash string) (parley.Identity, error) {
	t, err := k.store.TokenByHash(ctx, hash)
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
