package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPSessionsBelongToTheirSubject runs the built server over HTTP with
// JWT auth (a static public key) and checks that a session created with
// one subject's token is "unknown" to another subject, and that a token
// without the execute scope is refused with 403.
func TestHTTPSessionsBelongToTheirSubject(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub)
	connect := func(token string) (*sdk.ClientSession, error) {
		hc := &http.Client{Transport: bearer{token}}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e-auth", Version: "1"}, nil)
		return c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	}
	all := "python:execute python:sessions"
	alice, err := connect(mint("alice", all))
	if err != nil {
		t.Fatalf("alice connects: %v", err)
	}
	defer alice.Close()
	bob, err := connect(mint("bob", all))
	if err != nil {
		t.Fatalf("bob connects: %v", err)
	}
	defer bob.Close()

	call := func(cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	}
	res, err := call(alice, "execute-persistent", map[string]any{"code": "secret = 42"})
	if err != nil || res.IsError {
		t.Fatalf("alice creates a session: %v %q", err, text(res))
	}
	id, _ := structured(t, res)["session_id"].(string)

	for name, args := range map[string]map[string]any{
		"execute-persistent": {"session_id": id, "code": "secret"},
		"read-file":          {"session_id": id, "path": "x.txt"},
		"cleanup-session":    {"session_id": id},
	} {
		res, err := call(bob, name, args)
		if err != nil || !res.IsError || !strings.Contains(text(res), "unknown session") {
			t.Errorf("bob %s on alice's session: %v %q, want unknown session", name, err, text(res))
		}
	}
	if res, err := call(bob, "list-sessions", map[string]any{}); err != nil || strings.Contains(text(res), id) {
		t.Errorf("bob's list-sessions shows alice's session: %v %q", err, text(res))
	}
	if res, err := call(alice, "execute-persistent", map[string]any{"session_id": id, "code": "secret"}); err != nil || structured(t, res)["result"] != "42" {
		t.Errorf("alice's session after bob's attempts: %v %q", err, text(res))
	}

	// A token without python:execute is refused at the HTTP layer.
	reader, err := connect(mint("carol", "python:sessions"))
	if err != nil {
		t.Fatalf("carol connects: %v", err)
	}
	defer reader.Close()
	if _, err := call(reader, "execute-transient", map[string]any{"code": "print(1)"}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("execute without the scope: %v, want Forbidden", err)
	}
	// No token at all: 401.
	if _, err := connect(""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("no token: %v, want Unauthorized", err)
	}
}
