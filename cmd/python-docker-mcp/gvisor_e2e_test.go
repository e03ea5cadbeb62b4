package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestGVisorByPolicy runs the built server over HTTP with JWT auth and the
// example policy examples/policy/gvisor.rego on a daemon that has runsc
// (make test-gvisor's private one): alice, without scope python:trusted,
// runs under gVisor and sees its kernel; bob, trusted, runs under the
// daemon's default runtime and sees the host's. Without runsc on the
// daemon it skips, or fails with PDM_TEST_GVISOR set.
func TestGVisorByPolicy(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	info, err := cli.Info(ctx, client.InfoOptions{})
	cancel()
	if _, ok := info.Info.Runtimes["runsc"]; err != nil || !ok {
		if os.Getenv("PDM_TEST_GVISOR") != "" {
			t.Fatalf("the Docker daemon has no runtime runsc (PDM_TEST_GVISOR is set, so this fails): %v", err)
		}
		t.Skip("the Docker daemon has no runtime runsc: make test-gvisor runs this test")
	}
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var host strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		host.WriteByte(byte(c))
	}
	policyFile, err := filepath.Abs("../../examples/policy/gvisor.rego")
	if err != nil {
		t.Fatal(err)
	}
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub,
		"--set", "policy.paths="+policyFile, "--set", "docker.runtime=", "--set", "docker.runtimes=runsc")
	connect := func(sub, scopes string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{mint(sub, scopes)}}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e-gvisor", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", sub, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	release := func(cs *sdk.ClientSession, tool string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"code": "import os\nprint(os.uname().release)"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %q", tool, err, text(res))
		}
		// The stream is in the text content, after its "--- stdout ---" line.
		_, out, _ := strings.Cut(text(res), "--- stdout ---\n")
		out, _, _ = strings.Cut(out, "\n")
		return strings.TrimSpace(out)
	}
	alice := connect("alice", "python:execute python:sessions")
	bob := connect("bob", "python:execute python:sessions python:trusted")
	for _, tool := range []string{"execute-transient", "execute-persistent"} {
		if got := release(alice, tool); got == "" || got == host.String() {
			t.Errorf("alice (untrusted) %s: kernel release %q, the host's is %q: want gVisor's", tool, got, host.String())
		}
		if got := release(bob, tool); got != host.String() {
			t.Errorf("bob (trusted) %s: kernel release %q, want the host's %q", tool, got, host.String())
		}
	}
}
