package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// whoamiServer is an mcp-go Streamable HTTP server behind a's middleware with
// one tool, list-sessions (scope python:sessions), that answers with the
// principal its context carries, and the metadata mounted beside it.
func whoamiServer(t *testing.T, a *Authenticator) *httptest.Server {
	t.Helper()
	s := server.NewMCPServer("auth-e2e", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcpgo.NewTool("list-sessions", mcpgo.WithDescription("Reports the caller.")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			p, ok := PrincipalFrom(ctx)
			if !ok {
				return mcpgo.NewToolResultError("no principal in the tool context"), nil
			}
			return mcpgo.NewToolResultText(p.Sub + " " + strings.Join(p.Scopes, ",")), nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", a.Middleware(server.NewStreamableHTTPServer(s)))
	for _, p := range a.MetadataPaths() {
		mux.Handle(p, a.MetadataHandler())
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func connect(ctx context.Context, url, token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	if token != "" {
		hc.Transport = bearerTransport{token}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "auth-e2e-client", Version: "1.0.0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

func TestEndToEndGoSDKClient(t *testing.T) {
	idp := newJWKSServer(t)
	key := rsaKey(t)
	idp.add("k1", &key.PublicKey)
	a := newAuth(t, jwtConfig(idp.URL), Options{})
	ts := whoamiServer(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("good token", func(t *testing.T) {
		cs, err := connect(ctx, ts.URL+"/mcp", sign(t, key, "k1", tokenClaims("python:sessions")))
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list-sessions"})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		if res.IsError {
			t.Fatalf("CallTool: error result %+v", res.Content)
		}
		var got []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				got = append(got, tc.Text)
			}
		}
		if diff := cmp.Diff([]string{"alice python:sessions"}, got); diff != "" {
			t.Errorf("tool saw (-want +got):\n%s", diff)
		}
	})

	t.Run("no token", func(t *testing.T) {
		cs, err := connect(ctx, ts.URL+"/mcp", "")
		if err == nil {
			cs.Close()
			t.Fatal("Connect without a token succeeded")
		}
		t.Logf("Connect without a token: %v", err)
		if !strings.Contains(err.Error(), "Unauthorized") && !strings.Contains(err.Error(), "401") {
			t.Errorf("Connect without a token: %v, want an error naming 401 Unauthorized", err)
		}
	})

	t.Run("token without the tool's scope", func(t *testing.T) {
		cs, err := connect(ctx, ts.URL+"/mcp", sign(t, key, "k1", tokenClaims("python:execute")))
		if err != nil {
			t.Fatalf("Connect (initialize needs no scope): %v", err)
		}
		defer cs.Close()
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list-sessions"})
		t.Logf("CallTool without python:sessions: %v", err)
		if err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("CallTool without python:sessions: %v, want an error naming 403 Forbidden", err)
		}
	})
}
