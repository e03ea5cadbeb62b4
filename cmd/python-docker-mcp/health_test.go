package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// TestHealthz: /healthz follows the backend (503 while it does not
// answer, ok again once it does) and says nothing of the cause; /livez
// stays ok.
func TestHealthz(t *testing.T) {
	var down error
	var logged strings.Builder
	h := &health{ping: func(context.Context) error { return down }, backend: "kubernetes",
		log: slog.New(slog.NewTextHandler(&logged, nil))}
	get := func(f http.HandlerFunc) (int, string) {
		rec := httptest.NewRecorder()
		f(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, body := get(h.healthz); code != 200 || body != `{"status":"ok"}` {
		t.Errorf("healthz with the backend up: %d %s", code, body)
	}
	down = errors.Join(backend.ErrUnavailable, errors.New("dial tcp 10.0.0.1:443: connection refused"))
	for range 2 {
		if code, body := get(h.healthz); code != http.StatusServiceUnavailable || body != `{"status":"unavailable","backend":"kubernetes"}` {
			t.Errorf("healthz with the backend down: %d %s, want 503 naming only the backend", code, body)
		}
		if code, body := get(h.livez); code != 200 || body != `{"status":"ok"}` {
			t.Errorf("livez with the backend down: %d %s, want 200", code, body)
		}
	}
	if n := strings.Count(logged.String(), "does not answer"); n != 1 || !strings.Contains(logged.String(), "10.0.0.1:443") {
		t.Errorf("the cause was logged %d times, want once with the error:\n%s", n, logged.String())
	}
	down = nil
	if code, _ := get(h.healthz); code != 200 {
		t.Errorf("healthz after the backend came back: %d, want 200", code)
	}
	if !strings.Contains(logged.String(), "answers again") {
		t.Errorf("the recovery was not logged:\n%s", logged.String())
	}
}

// TestPublicURLInMetadata: the protected resource metadata and the 401
// challenge name server.public_url, not the listen address.
func TestPublicURLInMetadata(t *testing.T) {
	listened := &net.TCPAddr{IP: net.IPv6unspecified, Port: 18081}
	s := config.Default().Server
	if got, want := resourceURL(s, listened), "http://[::]:18081/mcp"; got != want {
		t.Errorf("resourceURL without server.public_url = %q, want %q", got, want)
	}
	s.PublicURL = "https://mcp.example.com/mcp"
	res := resourceURL(s, listened)
	if res != s.PublicURL {
		t.Errorf("resourceURL = %q, want server.public_url %q", res, s.PublicURL)
	}
	pub, _ := testKeys(t)
	cfg := config.Default().Auth
	cfg.Mode, cfg.Issuer, cfg.PublicKeyPath = "jwt", "https://idp.test", pub
	a, err := auth.New(context.Background(), cfg, auth.Options{ResourceURL: res, ListenAddr: listened.String(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range a.MetadataPaths() {
		mux.Handle(p, a.MetadataHandler())
	}
	mux.Handle("/mcp", a.Middleware(http.NotFoundHandler()))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil))
	var meta struct {
		Resource string `json:"resource"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &meta); err != nil || meta.Resource != s.PublicURL {
		t.Errorf("metadata: %v %s, want resource %q", err, rec.Body.String(), s.PublicURL)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`)))
	if ch := rec.Header().Get("WWW-Authenticate"); rec.Code != 401 || !strings.Contains(ch, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp") || strings.Contains(ch, "18081") {
		t.Errorf("401 challenge: %d %q, want the metadata URL under server.public_url", rec.Code, ch)
	}
}
