package auth

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCacheTTL is the longest a verified token is remembered. A key the
// issuer withdraws from its JWKS, or a public key file replaced on disk,
// stops a token already seen within this time, not at once.
const tokenCacheTTL = time.Minute

// tokenCacheMax bounds how many verified tokens are remembered (about
// 200 bytes each, the principal's scopes aside); when it is full, the
// expired ones are dropped, and if none has, all.
const tokenCacheMax = 4096

// tokenCache remembers verified tokens by their SHA-256 until they
// expire (the exp claim, at most tokenCacheTTL after they were
// verified). Only valid tokens are kept: an invalid one is checked, and
// refused, every time. Safe for concurrent use.
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

func (c *tokenCache) get(key [sha256.Size]byte, now time.Time) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[key]
	if !ok || !now.Before(t.until) {
		return Principal{}, false
	}
	return t.p, true
}

func (c *tokenCache) put(key [sha256.Size]byte, p Principal, until time.Time, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[sha256.Size]byte]cachedToken{}
	}
	if len(c.m) >= tokenCacheMax {
		for k, t := range c.m {
			if !now.Before(t.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= tokenCacheMax {
			clear(c.m)
		}
	}
	c.m[key] = cachedToken{p: p, until: until}
}

// verifyCached is verify, remembering valid tokens in a.tokens.
func (a *Authenticator) verifyCached(ctx context.Context, raw string) (Principal, string) {
	key := sha256.Sum256([]byte(raw))
	now := a.now()
	if p, ok := a.tokens.get(key, now); ok {
		return p, ""
	}
	p, exp, reason := a.verify(ctx, raw)
	if reason != "" {
		return p, reason
	}
	until := now.Add(tokenCacheTTL)
	if exp.Before(until) {
		until = exp
	}
	a.tokens.put(key, p, until, now)
	return p, ""
}
