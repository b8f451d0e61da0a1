package parley

// TokenKind says what a bearer token may do.
type TokenKind string

// Token kinds.
const (
	// TokenAgent writes as, and only as, the agent it names.
	TokenAgent TokenKind = "agent"
	// TokenViewer reads.
	TokenViewer TokenKind = "viewer"
	// TokenAdmin reads, manages, and may write as any agent.
	TokenAdmin TokenKind = "admin"
)

// Valid reports whether k is a known kind.
func (k TokenKind) Valid() bool { return k == TokenAgent || k == TokenViewer || k == TokenAdmin }

// Token is a stored bearer token. Only the SHA-256 of the secret is kept.
type Token struct {
	ID        string    `json:"id"`
	Kind      TokenKind `json:"kind"`
	AgentID   string    `json:"agentId,omitempty"`
	Name      string    `json:"name,omitempty"`
	Hash      string    `json:"-"`
	CreatedAt Time      `json:"createdAt"`
	RevokedAt Time      `json:"revokedAt"`
}

// Identity is who makes a request: the kind of token and, for agent tokens,
// the agent it binds. Open is true when the server runs without tokens.
type Identity struct {
	Kind    TokenKind
	AgentID string
	TokenID string
	Open    bool
}

// CanWrite reports whether the identity may write to conversations.
func (id Identity) CanWrite() bool { return id.Kind == TokenAgent || id.Kind == TokenAdmin }

// CanManage reports whether the identity may manage tokens and conversations.
func (id Identity) CanManage() bool { return id.Kind == TokenAdmin }
