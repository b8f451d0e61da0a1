package tokens

import (
	"sync"
	"time"

	"github.com/parleyhq/parley"
)

// tokenCacheTTL is how long an authenticated token is trusted without
// reading the store again. A token revoked through this engine stops
// working at once; one revoked elsewhere (another node, or parley token
// revoke on the file) at the next RecheckTokens, and at the latest within
// this time.
const tokenCacheTTL = 10 * time.Second

// tokenCacheMax bounds the cache; when it is full, expired entries go
// first, then arbitrary ones.
const tokenCacheMax = 10_000

// tokenCache remembers the identities of recently authenticated tokens by
// hash, so that a request costs no store read. Unknown and revoked tokens
// are never cached: they are read from the store each time.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedIdentity
	// drops counts revocations, so that an identity read from the store
	// before a revocation committed is not cached after it.
	drops uint64
}

type cachedIdentity struct {
	who   parley.Identity
	until time.Time
}

// get returns the cached identity of hash, if fresh, and otherwise the
// revocation count to hand put after reading the store.
func (c *tokenCache) get(hash string, now time.Time) (who parley.Identity, ok bool, drops uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || !now.Before(e.until) {
		return parley.Identity{}, false, c.drops
	}
	return e.who, true, c.drops
}

// put caches an identity read from the store, unless a revocation came
// since get returned drops.
func (c *tokenCache) put(hash string, who parley.Identity, now time.Time, drops uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drops != drops {
		return
	}
	if c.m == nil {
		c.m = make(map[string]cachedIdentity)
	}
	if len(c.m) >= tokenCacheMax {
		for h, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, h)
			}
		}
		for h := range c.m {
			if len(c.m) < tokenCacheMax {
				break
			}
			delete(c.m, h)
		}
	}
	c.m[hash] = cachedIdentity{who: who, until: now.Add(tokenCacheTTL)}
}

// drop forgets the token with this id.
func (c *tokenCache) drop(tokenID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drops++
	for h, e := range c.m {
		if e.who.TokenID == tokenID {
			delete(c.m, h)
		}
	}
}

// ids returns the token ids of the cached identities.
func (c *tokenCache) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.m))
	for _, e := range c.m {
		out = append(out, e.who.TokenID)
	}
	return out
}
