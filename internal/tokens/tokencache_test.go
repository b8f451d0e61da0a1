package tokens_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/teststore"
	"github.com/parleyhq/parley/internal/tokens"
)

// TestTokenCache: a token is read from the store once and then trusted for
// 10 s; revoked through the Keeper it stops working at once; revoked
// behind its back (another node, the command line) it stops when
// its 10 s are up. Unknown tokens are never cached.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano())
	ctx := context.Background()
	db := teststore.Open(t)
	k := tokens.New(db, tokens.Options{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	auth := func(secret string) error {
		_, err := k.Authenticate(ctx, secret)
		return err
	}
	secret, tok, err := k.CreateToken(ctx, parley.TokenAgent, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := auth(secret); err != nil {
		t.Fatal(err)
	}
	// Revoked behind the Keeper's back: still trusted until the entry lapses.
	if err := db.RevokeToken(ctx, tok.ID, parley.NewTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := auth(secret); err != nil {
		t.Fatalf("within 10 s of its last read: %v", err)
	}
	clock.Add(int64(10 * time.Second))
	if err := auth(secret); parley.ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Fatalf("10 s after a revocation elsewhere: %v", err)
	}

	// Revoked through the Keeper: refused at once.
	secret2, tok2, err := k.CreateToken(ctx, parley.TokenViewer, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := auth(secret2); err != nil {
		t.Fatal(err)
	}
	if err := k.RevokeToken(ctx, tok2.ID); err != nil {
		t.Fatal(err)
	}
	if err := auth(secret2); parley.ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Fatalf("right after RevokeToken: %v", err)
	}
	// Unknown tokens are refused.
	if err := auth("pk_unknown"); parley.ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Fatalf("unknown token: %v", err)
	}
}
