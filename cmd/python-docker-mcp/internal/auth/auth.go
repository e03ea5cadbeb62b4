// Package auth authenticates callers of the Streamable HTTP transport with
// bearer JWTs (RFC 6750, RFC 9068) and checks the scope each MCP tool needs,
// as the MCP authorization specification (2025-06-18, 2025-11-25) describes
// for a resource server:
//
//   - a request without a valid token gets 401 and
//     `WWW-Authenticate: Bearer resource_metadata="<url>", scope="<all scopes>"`
//     (plus `error="invalid_token"` when a token was presented);
//   - a valid token without the scope a tools/call or resources/read needs gets
//     403 and `WWW-Authenticate: Bearer error="insufficient_scope", scope="<needed>", …`;
//   - the protected resource metadata (RFC 9728) is served outside the check.
//
// Modes (config.Auth.Mode): "jwt" verifies tokens against a JWKS URI (cached,
// refreshed hourly and on an unknown key id) or a static public key file;
// "dev" generates an RSA key pair and a development token on disk and verifies
// against that key; "off" authenticates nobody and is allowed only on a
// loopback address (or stdio).
//
// The authenticated caller travels in the request context as a Principal;
// mcp-go derives a tool handler's context from the HTTP request's context, so
// PrincipalFrom(ctx) works inside tool handlers.
package auth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Principal is an authenticated caller.
type Principal struct {
	// Sub is the token's subject ("sub" claim); the local user is "local".
	// Sandbox sessions are owned by Sub.
	Sub string
	// Scopes are the scopes the token grants ("scope" or "scp" claim).
	Scopes []string
}

// Has reports whether p was granted scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// LocalSubject is the subject of the local user: the caller over stdio, and
// every caller when authentication is off.
const LocalSubject = "local"

// Local is the principal of the local user: subject LocalSubject with every
// configured scope. Use it for stdio, where the operating system already
// decided who may talk to the server.
func Local(s config.Scopes) Principal {
	return Principal{Sub: LocalSubject, Scopes: allScopes(s)}
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p. The middleware calls it for every
// authenticated request; a stdio server calls it with Local(…).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the middleware (or WithPrincipal) put
// into ctx. ok is false when there is none: callers must then refuse.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Options are what New needs besides the configuration.
type Options struct {
	// ResourceURL is the canonical URL of the MCP endpoint, e.g.
	// "http://127.0.0.1:8000/mcp". Tokens are not checked against it (the
	// audience is config.Auth.Audience); it names the resource in the
	// protected resource metadata and locates that metadata. Required in
	// modes jwt and dev.
	ResourceURL string
	// ListenAddr is the HTTP listen address ("host:port"); empty means stdio.
	// Modes off and dev refuse a non-loopback address.
	ListenAddr string
	// Dir is where dev mode keeps its key pair and token; default
	// ~/.python-docker-mcp.
	Dir string
	// MaxBodyBytes caps the request body the middleware reads to find the
	// tool a JSON-RPC request calls; default 4 MiB. A larger body gets 413.
	MaxBodyBytes int64
	// Logger receives warnings (auth off, dev mode, JWKS refresh failures) and
	// one debug line per refused request; default slog.Default().
	Logger *slog.Logger
	// HTTPClient fetches the JWKS; default a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock used for token times; default time.Now. For tests.
	Now func() time.Time
}

// Authenticator verifies bearer tokens and scopes. It is safe for concurrent
// use. Build it with New.
type Authenticator struct {
	mode     string
	scopes   config.Scopes
	parser   *jwt.Parser
	algs     []string
	keyfunc  func(ctx context.Context) jwt.Keyfunc
	resource string
	metaURL  string
	metaPath string
	meta     []byte
	maxBody  int64
	log      *slog.Logger
	devToken string
	now      func() time.Time
	tokens   tokenCache
}

// DevTokenPath is the file holding the development token in mode dev ("" in
// other modes). The token is sent as "Authorization: Bearer <file content>".
func (a *Authenticator) DevTokenPath() string { return a.devToken }

// Modes of config.Auth.Mode.
const (
	ModeJWT = "jwt"
	ModeDev = "dev"
	ModeOff = "off"
)

// New builds the authenticator cfg describes. ctx bounds the JWKS refresh
// goroutine (mode jwt with a JWKS URI): cancel it when the server stops.
// Errors name the configuration key at fault and what to do.
func New(ctx context.Context, cfg config.Auth, opts Options) (*Authenticator, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := checkScopes(cfg.Scopes); err != nil {
		return nil, err
	}
	a := &Authenticator{mode: cfg.Mode, scopes: cfg.Scopes, maxBody: opts.MaxBodyBytes, log: opts.Logger, now: opts.Now}

	switch cfg.Mode {
	case ModeOff:
		if opts.ListenAddr != "" && !loopback(opts.ListenAddr) {
			return nil, fmt.Errorf("auth.mode off on listen address %q: authentication may only be off for stdio or a loopback address (127.0.0.1, ::1, localhost); set auth.mode to jwt (or dev) or listen on 127.0.0.1", opts.ListenAddr)
		}
		if opts.ListenAddr != "" {
			opts.Logger.Warn("authentication is off: every local HTTP caller acts as the local user with all scopes", "addr", opts.ListenAddr)
		}
		return a, nil
	case ModeJWT, ModeDev:
	default:
		return nil, fmt.Errorf("auth.mode %q: want jwt, dev or off", cfg.Mode)
	}

	if opts.ResourceURL == "" {
		return nil, errors.New("auth: the resource URL of the MCP endpoint is required in modes jwt and dev (it names the resource in the protected resource metadata)")
	}
	u, err := url.Parse(opts.ResourceURL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("auth: resource URL %q is not an absolute http(s) URL", opts.ResourceURL)
	}
	if cfg.Audience == "" {
		return nil, errors.New("auth.audience is empty: set it (MCP_AUDIENCE) to the audience your tokens carry, e.g. mcp-pyexec")
	}
	algs, err := algorithms(cfg.Algorithm)
	if err != nil {
		return nil, err
	}

	issuer := cfg.Issuer
	switch cfg.Mode {
	case ModeDev:
		if opts.ListenAddr != "" && !loopback(opts.ListenAddr) {
			return nil, fmt.Errorf("auth.mode dev on listen address %q: development keys are for loopback addresses only (anyone holding the development token has every scope); listen on 127.0.0.1 or use auth.mode jwt with your issuer's public key", opts.ListenAddr)
		}
		if issuer == "" {
			issuer = DevIssuer
		}
		dev, err := setupDev(opts.Dir, issuer, cfg.Audience, allScopes(cfg.Scopes), opts.Now)
		if err != nil {
			return nil, err
		}
		algs = []string{"RS256"}
		a.keyfunc = staticKey(dev.public)
		a.devToken = dev.tokenPath
		opts.Logger.Warn("dev authentication: tokens are verified with the development key pair; do not use in production",
			"key", dev.keyPath, "token", dev.tokenPath, "expires", dev.expires.Format(time.RFC3339),
			"usage", "Authorization: Bearer $(cat "+dev.tokenPath+")")
	case ModeJWT:
		if issuer == "" {
			return nil, errors.New("auth.issuer is empty: mode jwt needs the issuer (MCP_ISSUER) tokens must carry")
		}
		switch {
		case cfg.JWKSURI != "" && cfg.PublicKeyPath != "":
			return nil, errors.New("auth: both jwks_uri (MCP_JWKS_URI) and public_key_path (MCP_PUBLIC_KEY_PATH) are set; set one")
		case cfg.JWKSURI != "":
			kf, err := jwks(ctx, cfg.JWKSURI, opts)
			if err != nil {
				return nil, err
			}
			a.keyfunc = kf
		case cfg.PublicKeyPath != "":
			key, err := loadPublicKey(cfg.PublicKeyPath, algs)
			if err != nil {
				return nil, err
			}
			a.keyfunc = staticKey(key)
		default:
			return nil, errors.New("auth: mode jwt needs jwks_uri (MCP_JWKS_URI) or public_key_path (MCP_PUBLIC_KEY_PATH)")
		}
	}

	a.algs = algs
	a.parser = jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.Leeway.D()),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(opts.Now),
	)
	a.resource = opts.ResourceURL
	a.metaPath = metadataPath(u)
	a.metaURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: a.metaPath}).String()
	a.meta, err = json.Marshal(metadata{
		Resource:               opts.ResourceURL,
		AuthorizationServers:   authorizationServers(issuer),
		ScopesSupported:        allScopes(cfg.Scopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "python-docker-mcp",
	})
	if err != nil {
		return nil, fmt.Errorf("auth: encode protected resource metadata: %w", err)
	}
	return a, nil
}

// Middleware authenticates every request before next sees it. Mount it in
// front of the MCP endpoint (not in front of the metadata). It:
//
//   - answers 401 with a WWW-Authenticate challenge when the Authorization
//     header holds no valid bearer JWT (signature, algorithm, issuer,
//     audience, exp/nbf/iat with the configured leeway, a non-empty sub);
//   - reads a POST body (at most Options.MaxBodyBytes, else 413), restores it
//     for next, and when it is a JSON-RPC tools/call or resources/read,
//     answers 403 insufficient_scope unless the token grants ScopeFor(…);
//   - otherwise calls next with the Principal in the request context.
//
// In mode off every request passes as Local(scopes).
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return a.Verify(a.Scopes(next))
}

// Verify is the first half of Middleware: it answers 401 unless the
// request's bearer token is valid, and calls next with the Principal in
// the request context; it reads no body, so that a caller can be queued
// by who it is before anything it sent is read. A verified token is
// remembered (by its SHA-256) until it expires, at most tokenCacheTTL:
// the same token again costs a hash, not a signature check. In mode off
// every request passes as Local(scopes).
func (a *Authenticator) Verify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.mode == ModeOff {
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), Local(a.scopes))))
			return
		}
		raw, present := bearer(r.Header)
		if !present {
			a.unauthorized(w, r, "", "")
			return
		}
		p, reason := a.verifyCached(r.Context(), raw)
		if reason != "" {
			a.unauthorized(w, r, "invalid_token", reason)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// Scopes is the second half of Middleware, after Verify: it reads a POST
// body (at most Options.MaxBodyBytes, else 413), restores it for next,
// and answers 403 insufficient_scope when it is a tools/call or
// resources/read the principal's token does not grant. In mode off it
// checks nothing.
func (a *Authenticator) Scopes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.mode == ModeOff || r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		p, _ := PrincipalFrom(r.Context())
		body, err := io.ReadAll(io.LimitReader(r.Body, a.maxBody+1))
		_ = r.Body.Close()
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if int64(len(body)) > a.maxBody {
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", a.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if call, ok := peekCall(body); ok {
			if missing := missingScopes(p, ScopeFor(a.scopes, call.method, call.name)); len(missing) > 0 {
				a.forbidden(w, r, p, call, missing)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header
// (scheme case-insensitive). Tokens in the query string are never read
// (the MCP authorization specification forbids them).
func bearer(h http.Header) (string, bool) {
	v := h.Get("Authorization")
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// claims are the registered claims plus the two spellings of scopes.
type claims struct {
	jwt.RegisteredClaims
	Scope string          `json:"scope,omitempty"`
	Scp   json.RawMessage `json:"scp,omitempty"`
}

// verify checks raw and returns its principal and expiry, or a short
// reason (safe to show the client) why it is refused.
func (a *Authenticator) verify(ctx context.Context, raw string) (p Principal, exp time.Time, reason string) {
	p, reason = a.verifyClaims(ctx, raw, &exp)
	return p, exp, reason
}

func (a *Authenticator) verifyClaims(ctx context.Context, raw string, exp *time.Time) (Principal, string) {
	var c claims
	tok, err := a.parser.ParseWithClaims(raw, &c, a.keyfunc(ctx))
	if err != nil {
		if tok != nil && !errors.Is(err, jwt.ErrTokenMalformed) {
			if alg, _ := tok.Header["alg"].(string); !slices.Contains(a.algs, alg) {
				return Principal{}, "token algorithm is not allowed (want " + strings.Join(a.algs, " or ") + ")"
			}
		}
		return Principal{}, reason(err)
	}
	if c.Subject == "" {
		return Principal{}, "token has no subject (sub claim)"
	}
	*exp = c.ExpiresAt.Time // required by the parser
	scopes := strings.Fields(c.Scope)
	if len(c.Scp) > 0 {
		var list []string
		var one string
		switch {
		case json.Unmarshal(c.Scp, &list) == nil:
			scopes = append(scopes, list...)
		case json.Unmarshal(c.Scp, &one) == nil:
			scopes = append(scopes, strings.Fields(one)...)
		default:
			return Principal{}, "scp claim is neither a string nor a list of strings"
		}
	}
	return Principal{Sub: c.Subject, Scopes: scopes}, ""
}

// reason turns a jwt error into a short fixed description for the client.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "token is malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "token signature is invalid"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token is expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token is not valid yet"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token is issued in the future"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "token audience is not this server"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "token issuer is not trusted"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token lacks a required claim (exp)"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// Unknown or disallowed algorithm, or no key for the token's kid.
		return "token cannot be verified (algorithm not allowed or signing key unknown)"
	default:
		return "token is invalid"
	}
}

func (a *Authenticator) unauthorized(w http.ResponseWriter, r *http.Request, code, desc string) {
	params := [][2]string{{"resource_metadata", a.metaURL}, {"scope", strings.Join(allScopes(a.scopes), " ")}}
	if code != "" {
		params = append(params, [2]string{"error", code}, [2]string{"error_description", desc})
	}
	a.log.Debug("refused request", "status", http.StatusUnauthorized, "remote", r.RemoteAddr, "reason", cmp.Or(desc, "no bearer token"))
	w.Header().Set("WWW-Authenticate", challenge(params))
	writeError(w, http.StatusUnauthorized, cmp.Or(code, "invalid_request"), cmp.Or(desc, "a bearer token is required"))
}

func (a *Authenticator) forbidden(w http.ResponseWriter, r *http.Request, p Principal, c call, missing []string) {
	what := c.method
	if c.name != "" {
		what = fmt.Sprintf("tool %s", c.name)
	}
	desc := fmt.Sprintf("%s needs scope %s", what, strings.Join(missing, " "))
	a.log.Debug("refused request", "status", http.StatusForbidden, "remote", r.RemoteAddr, "sub", p.Sub, "reason", desc)
	w.Header().Set("WWW-Authenticate", challenge([][2]string{
		{"error", "insufficient_scope"},
		{"scope", strings.Join(missing, " ")},
		{"resource_metadata", a.metaURL},
		{"error_description", desc},
	}))
	writeError(w, http.StatusForbidden, "insufficient_scope", desc)
}

// challenge formats a Bearer challenge (RFC 6750 §3). Values are quoted;
// characters a quoted-string cannot carry are dropped.
func challenge(params [][2]string) string {
	var b strings.Builder
	b.WriteString("Bearer ")
	for i, kv := range params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(kv[0])
		b.WriteString(`="`)
		for _, c := range kv[1] {
			if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
				b.WriteRune(c)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

func writeError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// loopback reports whether the host of addr ("host:port") is a loopback
// address or "localhost". An empty host (":8000") listens everywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
