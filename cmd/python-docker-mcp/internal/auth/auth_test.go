package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

const (
	testIssuer   = "https://issuer.example.test"
	testResource = "http://127.0.0.1:8000/mcp"
	testMetaURL  = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
	allScopesStr = "python:execute python:install python:sessions"
)

var quiet = slog.New(slog.DiscardHandler)

// jwksServer is an identity provider's JWKS endpoint whose key set can change
// (rotation) and which counts its fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: map[string]*rsa.PublicKey{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range s.keys {
			set.Keys = append(set.Keys, map[string]string{
				"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
			})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) add(kid string, k *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[kid] = k
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tokenClaims are good claims for the test issuer, valid for an hour.
func tokenClaims(scope string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": testIssuer, "aud": "mcp-pyexec", "sub": "alice",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"scope": scope,
	}
}

func sign(t *testing.T, key *rsa.PrivateKey, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func jwtConfig(jwksURI string) config.Auth {
	cfg := config.Default().Auth
	cfg.Mode = ModeJWT
	cfg.JWKSURI = jwksURI
	cfg.Issuer = testIssuer
	return cfg
}

func newAuth(t *testing.T, cfg config.Auth, opts Options) *Authenticator {
	t.Helper()
	if opts.ResourceURL == "" {
		opts.ResourceURL = testResource
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := New(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// reply is what one request through the middleware produced.
type reply struct {
	Status    int
	Challenge string // WWW-Authenticate
	Sub       string // principal the next handler saw
	Scopes    string
	Body      string // body the next handler read
}

// through sends a POST of body with token (none if empty) through a's
// middleware to a handler that records what it saw.
func through(t *testing.T, a *Authenticator, token, body string) reply {
	t.Helper()
	var got reply
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFrom(r.Context())
		if !ok {
			t.Error("next handler ran without a principal")
		}
		b, _ := io.ReadAll(r.Body)
		got.Sub, got.Scopes, got.Body = p.Sub, strings.Join(p.Scopes, " "), string(b)
		w.WriteHeader(http.StatusOK)
	})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	a.Middleware(next).ServeHTTP(rec, req)
	got.Status = rec.Code
	got.Challenge = rec.Header().Get("WWW-Authenticate")
	return got
}

func toolCall(name string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{"code":"print(1)"}}}`
}

func invalid(desc string) string {
	return `Bearer resource_metadata="` + testMetaURL + `", scope="` + allScopesStr + `", error="invalid_token", error_description="` + desc + `"`
}

func TestMiddleware(t *testing.T) {
	idp := newJWKSServer(t)
	key, other := rsaKey(t), rsaKey(t)
	idp.add("k1", &key.PublicKey)
	a := newAuth(t, jwtConfig(idp.URL), Options{})

	pubPEM, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	hmacWithPublicKey := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, tokenClaims(allScopesStr))
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubPEM}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	algNone := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, tokenClaims(allScopesStr))
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	with := func(k string, v any) jwt.MapClaims {
		c := tokenClaims(allScopesStr)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	tampered := func() string {
		// Re-encode the payload with another subject, keep the signature.
		good := sign(t, key, "k1", tokenClaims(allScopesStr))
		parts := strings.Split(good, ".")
		payload, _ := json.Marshal(with("sub", "mallory"))
		parts[1] = base64.RawURLEncoding.EncodeToString(payload)
		return strings.Join(parts, ".")
	}
	hour := time.Hour

	tests := []struct {
		name  string
		token string
		body  string
		want  reply
	}{
		{
			name:  "valid token, tool in scope",
			token: sign(t, key, "k1", tokenClaims(allScopesStr)),
			body:  toolCall("execute-transient"),
			want:  reply{Status: 200, Sub: "alice", Scopes: allScopesStr, Body: toolCall("execute-transient")},
		},
		{
			name: "no token",
			body: toolCall("execute-transient"),
			want: reply{Status: 401, Challenge: `Bearer resource_metadata="` + testMetaURL + `", scope="` + allScopesStr + `"`},
		},
		{
			name:  "expired",
			token: sign(t, key, "k1", with("exp", time.Now().Add(-hour).Unix())),
			want:  reply{Status: 401, Challenge: invalid("token is expired")},
		},
		{
			name:  "expired within leeway",
			token: sign(t, key, "k1", with("exp", time.Now().Add(-10*time.Second).Unix())),
			body:  `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want:  reply{Status: 200, Sub: "alice", Scopes: allScopesStr, Body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		},
		{
			name:  "no exp",
			token: sign(t, key, "k1", with("exp", nil)),
			want:  reply{Status: 401, Challenge: invalid("token lacks a required claim (exp)")},
		},
		{
			name:  "not yet valid",
			token: sign(t, key, "k1", with("nbf", time.Now().Add(hour).Unix())),
			want:  reply{Status: 401, Challenge: invalid("token is not valid yet")},
		},
		{
			name:  "wrong audience",
			token: sign(t, key, "k1", with("aud", "another-api")),
			want:  reply{Status: 401, Challenge: invalid("token audience is not this server")},
		},
		{
			name:  "wrong issuer",
			token: sign(t, key, "k1", with("iss", "https://evil.example.test")),
			want:  reply{Status: 401, Challenge: invalid("token issuer is not trusted")},
		},
		{
			name:  "no subject",
			token: sign(t, key, "k1", with("sub", nil)),
			want:  reply{Status: 401, Challenge: invalid("token has no subject (sub claim)")},
		},
		{
			name:  "alg none",
			token: algNone(),
			want:  reply{Status: 401, Challenge: invalid("token algorithm is not allowed (want RS256)")},
		},
		{
			name:  "HS256 signed with the public key",
			token: hmacWithPublicKey(),
			want:  reply{Status: 401, Challenge: invalid("token algorithm is not allowed (want RS256)")},
		},
		{
			name:  "tampered payload",
			token: tampered(),
			want:  reply{Status: 401, Challenge: invalid("token signature is invalid")},
		},
		{
			name:  "signed by a key not in the JWKS under a known kid",
			token: sign(t, other, "k1", tokenClaims(allScopesStr)),
			want:  reply{Status: 401, Challenge: invalid("token signature is invalid")},
		},
		{
			name:  "garbage",
			token: "not.a.jwt",
			want:  reply{Status: 401, Challenge: invalid("token is malformed")},
		},
		{
			name:  "missing scope",
			token: sign(t, key, "k1", tokenClaims("python:execute")),
			body:  toolCall("install-package"),
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:install", resource_metadata="` + testMetaURL +
				`", error_description="tool install-package needs scope python:install"`},
		},
		{
			name:  "session tool without sessions scope",
			token: sign(t, key, "k1", tokenClaims("python:execute python:install")),
			body:  toolCall("read-file"),
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:sessions", resource_metadata="` + testMetaURL +
				`", error_description="tool read-file needs scope python:sessions"`},
		},
		{
			name:  "resources/read needs sessions scope",
			token: sign(t, key, "k1", tokenClaims("python:execute")),
			body:  `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"sandbox://abc/x.txt"}}`,
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:sessions", resource_metadata="` + testMetaURL +
				`", error_description="resources/read needs scope python:sessions"`},
		},
		{
			name:  "unknown tool needs every scope",
			token: sign(t, key, "k1", tokenClaims("python:execute python:sessions")),
			body:  toolCall("new-tool"),
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:install", resource_metadata="` + testMetaURL +
				`", error_description="tool new-tool needs scope python:install"`},
		},
		{
			name:  "tool name of the wrong type is treated as unknown",
			token: sign(t, key, "k1", tokenClaims("python:execute")),
			body:  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`,
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:install python:sessions", resource_metadata="` + testMetaURL +
				`", error_description="tools/call needs scope python:install python:sessions"`},
		},
		{
			name:  "key case does not hide the tool (encoding/json matches keys case-insensitively, as mcp-go does)",
			token: sign(t, key, "k1", tokenClaims("python:execute")),
			body:  `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"Name":"install-package"}}`,
			want: reply{Status: 403, Challenge: `Bearer error="insufficient_scope", scope="python:install", resource_metadata="` + testMetaURL +
				`", error_description="tool install-package needs scope python:install"`},
		},
		{
			name:  "tools/list needs only a token",
			token: sign(t, key, "k1", tokenClaims("")),
			body:  `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want:  reply{Status: 200, Sub: "alice", Body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		},
		{
			name:  "scp list claim",
			token: sign(t, key, "k1", with("scp", []string{"python:install"})),
			body:  toolCall("install-package"),
			want:  reply{Status: 200, Sub: "alice", Scopes: allScopesStr + " python:install", Body: toolCall("install-package")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := through(t, a, tt.token, tt.body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMiddlewareErrorBody(t *testing.T) {
	idp := newJWKSServer(t)
	key := rsaKey(t)
	idp.add("k1", &key.PublicKey)
	a := newAuth(t, jwtConfig(idp.URL), Options{})

	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(toolCall("install-package")))
	req.Header.Set("Authorization", "bearer "+sign(t, key, "k1", tokenClaims("python:execute")))
	rec := httptest.NewRecorder()
	a.Middleware(http.NotFoundHandler()).ServeHTTP(rec, req)
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("403 body %q: %v", rec.Body.String(), err)
	}
	want := map[string]string{"error": "insufficient_scope", "error_description": "tool install-package needs scope python:install"}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("403 body (-want +got):\n%s", diff)
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
}

func TestMiddlewareBodyCap(t *testing.T) {
	idp := newJWKSServer(t)
	key := rsaKey(t)
	idp.add("k1", &key.PublicKey)
	a := newAuth(t, jwtConfig(idp.URL), Options{MaxBodyBytes: 64})
	tok := sign(t, key, "k1", tokenClaims(allScopesStr))

	if got := through(t, a, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Status; got != 200 {
		t.Errorf("body under the cap: status %d, want 200", got)
	}
	if got := through(t, a, tok, toolCall("execute-transient")+strings.Repeat(" ", 64)).Status; got != http.StatusRequestEntityTooLarge {
		t.Errorf("body over the cap: status %d, want 413", got)
	}
}

func TestKeyRotation(t *testing.T) {
	idp := newJWKSServer(t)
	oldKey, newKey := rsaKey(t), rsaKey(t)
	idp.add("old", &oldKey.PublicKey)
	a := newAuth(t, jwtConfig(idp.URL), Options{})
	if got := idp.fetches.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times by New, want 1", got)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if got := through(t, a, sign(t, oldKey, "old", tokenClaims("")), body).Status; got != 200 {
		t.Fatalf("token of the old key: status %d, want 200", got)
	}
	if got := idp.fetches.Load(); got != 1 {
		t.Errorf("JWKS fetched %d times after a known kid, want 1 (cached)", got)
	}

	// The provider rotates: a new key appears in the set after our first fetch.
	idp.add("new", &newKey.PublicKey)
	if got := through(t, a, sign(t, newKey, "new", tokenClaims("")), body); got.Status != 200 || got.Sub != "alice" {
		t.Fatalf("token of the rotated-in key: %+v, want status 200 for alice", got)
	}
	if got := idp.fetches.Load(); got != 2 {
		t.Errorf("JWKS fetched %d times after an unknown kid, want 2 (one refresh)", got)
	}
	if got := through(t, a, sign(t, oldKey, "old", tokenClaims("")), body).Status; got != 200 {
		t.Errorf("old key still published: status %d, want 200", got)
	}

	// A kid nobody publishes is refused, and the refresh rate limit keeps
	// such tokens from hammering the provider.
	stranger := rsaKey(t)
	for range 3 {
		if got := through(t, a, sign(t, stranger, "unknown", tokenClaims("")), body).Status; got != 401 {
			t.Errorf("unknown kid: status %d, want 401", got)
		}
	}
	if got := idp.fetches.Load(); got > 3 {
		t.Errorf("JWKS fetched %d times after three unknown-kid tokens, want at most 3", got)
	}
}

func TestMetadata(t *testing.T) {
	idp := newJWKSServer(t)
	a := newAuth(t, jwtConfig(idp.URL), Options{})
	if diff := cmp.Diff([]string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}, a.MetadataPaths()); diff != "" {
		t.Errorf("MetadataPaths (-want +got):\n%s", diff)
	}
	if got := a.MetadataURL(); got != testMetaURL {
		t.Errorf("MetadataURL = %q, want %q", got, testMetaURL)
	}
	mux := http.NewServeMux()
	for _, p := range a.MetadataPaths() {
		mux.Handle(p, a.MetadataHandler())
	}
	want := map[string]any{
		"resource":                 testResource,
		"authorization_servers":    []any{testIssuer},
		"scopes_supported":         []any{"python:execute", "python:install", "python:sessions"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "python-docker-mcp",
	}
	for _, p := range a.MetadataPaths() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: status %d", p, rec.Code)
		}
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", p, diff)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, a.MetadataPaths()[0], nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST metadata: status %d, want 405", rec.Code)
	}
}

func TestPublicKeyFile(t *testing.T) {
	key := rsaKey(t)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "issuer.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := jwtConfig("")
	cfg.PublicKeyPath = path
	a := newAuth(t, cfg, Options{})
	if got := through(t, a, sign(t, key, "", tokenClaims(allScopesStr)), toolCall("execute-persistent")); got.Status != 200 || got.Sub != "alice" {
		t.Errorf("token of the static key: %+v, want 200 for alice", got)
	}
	if got := through(t, a, sign(t, rsaKey(t), "", tokenClaims(allScopesStr)), toolCall("execute-persistent")).Status; got != 401 {
		t.Errorf("token of another key: status %d, want 401", got)
	}

	// An EC key cannot verify RS256: refused at start, not at the first request.
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ = x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPath := filepath.Join(t.TempDir(), "ec.pem")
	if err := os.WriteFile(ecPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.PublicKeyPath = ecPath
	_, err = New(context.Background(), cfg, Options{ResourceURL: testResource, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "cannot verify RS256") {
		t.Errorf("EC key with RS256: error %v, want one saying it cannot verify RS256", err)
	}
}

func TestNewRefuses(t *testing.T) {
	base := jwtConfig("https://issuer.example.test/jwks")
	tests := []struct {
		name   string
		change func(*config.Auth, *Options)
		want   string // part of the error
	}{
		{"HMAC algorithm", func(c *config.Auth, _ *Options) { c.Algorithm = "HS256" }, `auth.algorithm "HS256": not allowed`},
		{"none algorithm", func(c *config.Auth, _ *Options) { c.Algorithm = "RS256,none" }, `auth.algorithm "none": not allowed`},
		{"no issuer", func(c *config.Auth, _ *Options) { c.Issuer = "" }, "auth.issuer is empty"},
		{"no audience", func(c *config.Auth, _ *Options) { c.Audience = "" }, "auth.audience is empty"},
		{"two key sources", func(c *config.Auth, _ *Options) { c.PublicKeyPath = "/k.pem" }, "set one"},
		{"no key source", func(c *config.Auth, _ *Options) { c.JWKSURI = "" }, "needs jwks_uri"},
		{"relative JWKS URI", func(c *config.Auth, _ *Options) { c.JWKSURI = "/jwks" }, "want an absolute https URL"},
		{"missing key file", func(c *config.Auth, _ *Options) { c.JWKSURI, c.PublicKeyPath = "", "/nonexistent/k.pem" }, "auth.public_key_path"},
		{"bad mode", func(c *config.Auth, _ *Options) { c.Mode = "basic" }, `auth.mode "basic"`},
		{"empty scope", func(c *config.Auth, _ *Options) { c.Scopes.Install = "" }, "auth.scopes.install is empty"},
		{"scope with a space", func(c *config.Auth, _ *Options) { c.Scopes.Execute = "a b" }, "auth.scopes.execute"},
		{"no resource URL", func(_ *config.Auth, o *Options) { o.ResourceURL = "" }, "resource URL"},
		{"off on all interfaces", func(c *config.Auth, o *Options) { c.Mode, o.ListenAddr = ModeOff, ":8000" }, "auth.mode off on listen address"},
		{"off on a public address", func(c *config.Auth, o *Options) { c.Mode, o.ListenAddr = ModeOff, "192.0.2.7:8000" }, "auth.mode off on listen address"},
		{"dev on all interfaces", func(c *config.Auth, o *Options) { c.Mode, o.ListenAddr = ModeDev, "0.0.0.0:8000" }, "auth.mode dev on listen address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			opts := Options{ResourceURL: testResource, Logger: quiet, Dir: t.TempDir()}
			tt.change(&cfg, &opts)
			_, err := New(context.Background(), cfg, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestOffMode(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:8000", "[::1]:8000", "localhost:8000"} {
		cfg := config.Default().Auth // mode off
		a, err := New(context.Background(), cfg, Options{ListenAddr: addr, Logger: quiet})
		if err != nil {
			t.Errorf("New(off, %q): %v", addr, err)
			continue
		}
		got := through(t, a, "", toolCall("install-package"))
		want := reply{Status: 200, Sub: LocalSubject, Scopes: allScopesStr, Body: toolCall("install-package")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("off on %q (-want +got):\n%s", addr, diff)
		}
		if p := a.MetadataPaths(); p != nil {
			t.Errorf("off: MetadataPaths = %v, want none", p)
		}
	}
}

func TestDevMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", ".python-docker-mcp")
	cfg := config.Default().Auth
	cfg.Mode = ModeDev
	a := newAuth(t, cfg, Options{Dir: dir, ListenAddr: "127.0.0.1:8000"})

	for _, f := range []string{DevKeyFile, DevPublicKeyFile, DevTokenFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f, got)
		}
	}
	if a.DevTokenPath() != filepath.Join(dir, DevTokenFile) {
		t.Errorf("DevTokenPath = %q", a.DevTokenPath())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("dir holds %d entries, want the 3 dev files (no temporaries)", len(entries))
	}
	tok, err := os.ReadFile(a.DevTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	got := through(t, a, strings.TrimSpace(string(tok)), toolCall("install-package"))
	want := reply{Status: 200, Sub: DevSubject, Scopes: allScopesStr, Body: toolCall("install-package")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dev token (-want +got):\n%s", diff)
	}
	// Its claims: every scope, the default audience, the dev issuer, a long life.
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(string(tok)), c); err != nil {
		t.Fatal(err)
	}
	if c["iss"] != DevIssuer || c["aud"] == nil || c["scope"] != allScopesStr {
		t.Errorf("dev token claims %v", c)
	}
	if exp, _ := c.GetExpirationTime(); exp == nil || time.Until(exp.Time) < 29*24*time.Hour {
		t.Errorf("dev token expires %v, want about 30 days from now", exp)
	}

	// A second start reuses the key and the token.
	key1, _ := os.ReadFile(filepath.Join(dir, DevKeyFile))
	b := newAuth(t, cfg, Options{Dir: dir})
	key2, _ := os.ReadFile(filepath.Join(dir, DevKeyFile))
	tok2, _ := os.ReadFile(b.DevTokenPath())
	if string(key1) != string(key2) || string(tok) != string(tok2) {
		t.Error("second start replaced the key or the token, want both reused")
	}
	// A token with less than a day left is replaced.
	c2 := newAuth(t, cfg, Options{Dir: dir, Now: func() time.Time { return time.Now().Add(DevTokenLifetime - time.Hour) }})
	tok3, _ := os.ReadFile(c2.DevTokenPath())
	if string(tok3) == string(tok) {
		t.Error("token near its expiry was kept, want a new one")
	}

	// Non-loopback: refused, and the error offers only options that exist.
	_, err = New(context.Background(), cfg, Options{Dir: dir, ResourceURL: testResource, ListenAddr: "0.0.0.0:8000", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "auth.mode jwt") || strings.Contains(err.Error(), "force") {
		t.Errorf("dev mode on 0.0.0.0: error %v, want a refusal naming auth.mode jwt and no force option", err)
	}

	// A key others can read is refused.
	if err := os.Chmod(filepath.Join(dir, DevKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg, Options{Dir: dir, ResourceURL: testResource, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable dev key: error %v, want one asking for chmod 600", err)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8000": true, "127.1.2.3:1": true, "[::1]:80": true, "localhost:8000": true, "LOCALHOST:1": true,
		":8000": false, "0.0.0.0:8000": false, "[::]:8000": false, "192.0.2.1:8000": false, "example.com:80": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
