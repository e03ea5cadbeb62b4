package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestOperationsOverHTTP runs the built server over HTTP on Docker: the
// log names its instance id, /livez and /healthz answer (the daemon is
// up), and a session call retried with its _meta.idempotency_key runs once.
func TestOperationsOverHTTP(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, log := startHTTP(t, cli)
	if !regexp.MustCompile(`"server started" instance=[0-9a-f]{16} `).MatchString(log.String()) {
		t.Errorf("the log does not name the instance id:\n%s", log.String())
	}
	base := strings.TrimSuffix(url, "/mcp")
	for _, p := range []string{"/livez", "/healthz"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
			t.Errorf("%s: %d %s, want 200 ok", p, resp.StatusCode, body)
		}
	}

	c := &mcpClient{stderr: log}
	cs, err := newSDKClient(c).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	c.cs = cs
	res := c.call(t, "execute-persistent", map[string]any{"code": "n = 0"})
	id, _ := structured(t, res)["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("start a session: %q", text(res))
	}
	keyed := &sdk.CallToolParams{Name: "execute-persistent", Arguments: map[string]any{"session_id": id, "code": "n += 1\nprint('n is', n)"},
		Meta: sdk.Meta{"idempotency_key": "e2e-retry-1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, err := cs.CallTool(ctx, keyed)
	if err != nil || first.IsError || !strings.Contains(text(first), "n is 1") {
		t.Fatalf("keyed call: %v %q", err, text(first))
	}
	retry, err := cs.CallTool(ctx, keyed)
	if err != nil || retry.IsError || !strings.Contains(text(retry), "n is 1") || retry.Meta["replayed"] != true {
		t.Errorf("retry with the same key: %v %q (meta %v), want the first result, replayed", err, text(retry), retry.Meta)
	}
	if res := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "print('n is', n)"}); !strings.Contains(text(res), "n is 1") {
		t.Errorf("after the retry: %q, want n is 1 (the retry did not run)", text(res))
	}
	c.call(t, "cleanup-session", map[string]any{"session_id": id})
}
