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

// TestHTTPPoolClassesPerSubject runs the built server over HTTP with two
// JWT subjects and a transient pool of one: the pool learns alice's
// imports (scipy, outside the operator's pool.preload) and preloads them
// for her calls only; bob's transient call never finds them imported.
func TestHTTPPoolClassesPerSubject(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub,
		"--set", "pool.size=1", "--set", "pool.max_size=1")
	murl := strings.TrimSuffix(url, "/mcp") + "/metrics"
	connect := func(sub string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{mint(sub, "python:execute python:sessions")}}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e-pool", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", sub, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := connect("alice"), connect("bob")
	run := func(cs *sdk.ClientSession, who, code string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": code}})
		if err != nil || res.IsError {
			t.Fatalf("%s's call: %v %q", who, err, text(res))
		}
		out, _ := structured(t, res)["result"].(string) // the last expression's repr
		return out
	}
	// stocked waits until the pool holds its one sandbox: after a call
	// took the last one, the refill of the class the pool learned.
	stocked := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); value(scrape(t, murl), "python_docker_mcp_pool_idle{kind=transient}") != 1; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the pool is still empty after two minutes: %s", what)
			}
		}
	}

	stocked("the first fill")
	run(alice, "alice", "import scipy\nscipy.__name__")
	stocked("a refill for alice's class")
	// The pool learned alice's class: her next scipy call finds it imported.
	warm := "import sys\nwarm = 'scipy' in sys.modules\nimport scipy\nwarm"
	if out := run(alice, "alice", warm); out != "True" {
		t.Fatalf("alice's second scipy call printed %q, want True (scipy preloaded for her)", out)
	}
	stocked("another refill for alice's class")
	check := "import sys\n[m for m in sys.modules if m.split('.')[0] == 'scipy']"
	if out := run(bob, "bob", check); out != "[]" {
		t.Errorf("bob's transient call found %q already imported: alice's learned imports", out)
	}
}
