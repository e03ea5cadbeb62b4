package auth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A verified token is remembered: the same token again is not checked
// again until it expires or tokenCacheTTL passes, whichever comes first;
// a refused token is checked every time.
func TestTokenCache(t *testing.T) {
	idp := newJWKSServer(t)
	key := rsaKey(t)
	idp.add("k", &key.PublicKey)
	var clock atomic.Int64
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(clock.Load())) }
	cfg := jwtConfig(idp.URL)
	a := newAuth(t, cfg, Options{Now: now})
	var checks atomic.Int32
	kf := a.keyfunc
	a.keyfunc = func(ctx context.Context) jwt.Keyfunc {
		f := kf(ctx)
		return func(tok *jwt.Token) (any, error) {
			checks.Add(1)
			return f(tok)
		}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	claims := func(exp time.Duration) jwt.MapClaims {
		c := tokenClaims("")
		c["iat"], c["nbf"], c["exp"] = start.Unix(), start.Unix(), start.Add(exp).Unix()
		return c
	}
	expect := func(what, tok string, status int, wantChecks int32) {
		t.Helper()
		checks.Store(0)
		if got := through(t, a, tok, body); got.Status != status {
			t.Errorf("%s: status %d, want %d", what, got.Status, status)
		}
		if got := checks.Load(); got != wantChecks {
			t.Errorf("%s: the signature was checked %d times, want %d", what, got, wantChecks)
		}
	}

	short := sign(t, key, "k", claims(30*time.Second))
	expect("a new token", short, 200, 1)
	expect("the same token again", short, 200, 0)
	clock.Store(int64(30*time.Second + cfg.Leeway.D() + time.Second))
	expect("the same token past its exp and the leeway", short, 401, 1)

	clock.Store(0)
	long := sign(t, key, "k", claims(time.Hour))
	expect("a token valid for an hour", long, 200, 1)
	clock.Store(int64(tokenCacheTTL - time.Second))
	expect("the same token within the cache's lifetime", long, 200, 0)
	clock.Store(int64(tokenCacheTTL))
	expect("the same token once the cache's lifetime is over", long, 200, 1)

	other := rsaKey(t)
	bad := sign(t, other, "k", claims(time.Hour))
	expect("a token of another key", bad, 401, 1)
	expect("the same refused token again", bad, 401, 1)
}
