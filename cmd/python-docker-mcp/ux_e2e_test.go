package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func links(r *sdk.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if rl, ok := c.(*sdk.ResourceLink); ok {
			out = append(out, rl.URI)
		}
	}
	return out
}

func (c *mcpClient) resourceURIs(t *testing.T) []string {
	t.Helper()
	lr, err := c.cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	return uris
}

// TestStdioWhatUsersSee drives the built server with the official go-sdk
// client over stdio: readable argument errors, refused state keys, a long
// output kept as a resource, files as resources, and a session's loss
// reported once.
func TestStdioWhatUsersSee(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "pool.size=1"})

	t.Run("argument errors are sentences", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "1", "timeout": -1})
		if !res.IsError || !strings.Contains(text(res), "argument `timeout` is -1, but it must be greater than 0") || strings.Contains(text(res), "&{") {
			t.Errorf("timeout -1: %q", text(res))
		}
		res = c.call(t, "execute-persistent", map[string]any{})
		if !res.IsError || !strings.Contains(text(res), "the required argument `code` is missing") {
			t.Errorf("no code: %q", text(res))
		}
	})
	t.Run("state keys", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "1", "state": map[string]any{"list": 1, "a-b": 2, "__x__": 3}})
		got := text(res)
		if !res.IsError || structured(t, res)["status"] != "invalid" || !strings.Contains(got, `"list" would shadow Python's builtin list`) ||
			!strings.Contains(got, `"a-b" is not a Python identifier`) || !strings.Contains(got, `"__x__" is a dunder name`) {
			t.Errorf("bad state keys: %q", got)
		}
	})
	t.Run("long output is a resource", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "print('HEAD' + 'x' * 200000 + 'TAIL')"})
		sc := structured(t, res)
		uri, _ := sc["stdout_uri"].(string)
		if res.IsError || sc["stdout_truncated"] != true || sc["stdout_bytes"] != float64(200009) || !strings.HasPrefix(uri, "sandbox-output://") {
			t.Fatalf("structured = %v", sc)
		}
		if _, ok := sc["stdout"]; ok {
			t.Error("stdout is sent twice (text and structured content)")
		}
		if n := len(text(res)); n > 66<<10 {
			t.Errorf("result text is %d bytes, want about limits.max_output_bytes (64 KiB)", n)
		}
		if !strings.Contains(text(res), "full text: "+uri) || !slices.Contains(links(res), uri) {
			t.Errorf("the result does not point to %s: links %v", uri, links(res))
		}
		rr, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "HEAD"+strings.Repeat("x", 200000)+"TAIL\n" {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		if !slices.Contains(c.resourceURIs(t), uri) {
			t.Errorf("resources/list lacks %s", uri)
		}
	})
	t.Run("transient files vanish and say so; small ones come back", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "open('out.txt', 'w').write('x')\nopen('big.bin', 'wb').write(b'0' * (1 << 20))"})
		sc := structured(t, res)
		if got, _ := sc["discarded_files"].([]any); res.IsError || len(got) != 2 ||
			!strings.Contains(text(res), "deleted when this call ended: ") {
			t.Errorf("transient files: %q %v", text(res), sc)
		}
		returned, _ := sc["returned_files"].([]any)
		var embedded []string
		for _, ct := range res.Content {
			if er, ok := ct.(*sdk.EmbeddedResource); ok {
				embedded = append(embedded, er.Resource.URI+"="+er.Resource.Text)
			}
		}
		if len(returned) != 1 || len(embedded) != 1 || embedded[0] != returned[0].(string)+"=x" || !strings.HasSuffix(embedded[0], "/files/out.txt=x") {
			t.Fatalf("returned %v, embedded %v: want out.txt only (big.bin is 1 MiB)", returned, embedded)
		}
		rr, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: returned[0].(string)})
		if err != nil || rr.Contents[0].Text != "x" {
			t.Errorf("resources/read of a returned file: %v", err)
		}
	})

	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	id, _ := structured(t, res)["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("new session: %q", text(res))
	}
	t.Run("session files are resources", func(t *testing.T) {
		res := c.call(t, "write-file", map[string]any{"session_id": id, "path": "/workspace/d/in.txt", "content": "hello"})
		uri, _ := structured(t, res)["uri"].(string)
		if res.IsError || uri != "sandbox://"+id+"/d/in.txt" {
			t.Fatalf("write-file: %q uri %q", text(res), uri)
		}
		rr, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].Text != "hello" {
			t.Errorf("the URI write-file returned does not resolve: %v", err)
		}
		if !slices.Contains(c.resourceURIs(t), uri) {
			t.Errorf("resources/list = %v, want %s", c.resourceURIs(t), uri)
		}
	})
	t.Run("a loss noticed by a file tool is reported once", func(t *testing.T) {
		f := make(client.Filters).Add("label", "python-docker-mcp.session="+id).Add("label", fmt.Sprintf("python-docker-mcp.pid=%d", c.pid))
		l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: f})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("the session's container: %v %d", err, len(l.Items))
		}
		if _, err := cli.ContainerKill(context.Background(), l.Items[0].ID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
			t.Fatal(err)
		}
		w := cli.ContainerWait(context.Background(), l.Items[0].ID, client.ContainerWaitOptions{})
		select {
		case <-w.Result:
		case <-w.Error:
		}
		res := c.call(t, "list-files", map[string]any{"session_id": id})
		t.Logf("list-files after the kill: %q", text(res))
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "x"})
		if sc := structured(t, res); sc["state_lost"] != true || !strings.Contains(text(res), "state lost") || !strings.Contains(text(res), "NameError") {
			t.Errorf("first run after the loss: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "x = 2"})
		if sc := structured(t, res); res.IsError || sc["state_lost"] != false {
			t.Errorf("second run after the loss: %q %v", text(res), sc)
		}
	})
}

// TestInstallOfAnImportedModuleNeedsRestart installs pdmdemo 1.0 into a
// session, imports it, then installs 2.0: the result says a new session is
// needed, and the session indeed still runs 1.0.
func TestInstallOfAnImportedModuleNeedsRestart(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c, dir := installServer(t, "--set", "pool.enabled=false")
	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	id, _ := structured(t, res)["session_id"].(string)
	if res := c.call(t, "install-package", map[string]any{"package_name": "pdmdemo", "version": "1.0", "session_id": id}); res.IsError ||
		structured(t, res)["restart_needed"] != false || !strings.Contains(text(res), "no restart needed") {
		t.Fatalf("first install: %q", text(res))
	}
	if res := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmdemo\npdmdemo.VALUE"}); res.IsError || !strings.Contains(text(res), "result: 42") {
		t.Fatalf("import: %q", text(res))
	}
	dockertest.WriteWheel(t, dir, "pdmdemo", "2.0", "43")
	res = c.call(t, "install-package", map[string]any{"package_name": "pdmdemo", "version": "2.0", "session_id": id})
	sc := structured(t, res)
	if res.IsError || sc["version"] != "2.0" || sc["restart_needed"] != true || strings.Contains(text(res), "no restart needed") ||
		!strings.Contains(text(res), "restart needed") {
		t.Fatalf("install over an imported module: %q %v", text(res), sc)
	}
	if res := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmdemo\npdmdemo.VALUE"}); !strings.Contains(text(res), "result: 42") {
		t.Errorf("the session runs %q; the message above must match what it runs (42, the old version)", text(res))
	}
}

// TestHTTPOutputsBelongToTheirSubject: over HTTP with JWT auth, a kept
// output and a session's files are resources of their subject only.
func TestHTTPOutputsBelongToTheirSubject(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub, "--set", "pool.size=1")
	connect := func(sub string) *mcpClient {
		tok := mint(sub, "python:execute python:sessions")
		c := &mcpClient{stderr: &lockedBuffer{}}
		cs, err := newSDKClient(c).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", sub, err)
		}
		t.Cleanup(func() { cs.Close() })
		c.cs = cs
		return c
	}
	alice, bob := connect("alice"), connect("bob")
	res := alice.call(t, "execute-transient", map[string]any{"code": "print('s' * 100000)"})
	uri, _ := structured(t, res)["stdout_uri"].(string)
	if uri == "" {
		t.Fatalf("no stdout_uri: %q", text(res))
	}
	res = alice.call(t, "execute-persistent", map[string]any{"code": "open('secret.txt', 'w').write('42')"})
	id, _ := structured(t, res)["session_id"].(string)
	file := "sandbox://" + id + "/secret.txt"
	if got := alice.resourceURIs(t); !slices.Contains(got, uri) || !slices.Contains(got, file) {
		t.Errorf("alice's resources/list = %v, want %s and %s", got, uri, file)
	}
	if got := bob.resourceURIs(t); slices.Contains(got, uri) || slices.Contains(got, file) {
		t.Errorf("bob's resources/list shows alice's: %v", got)
	}
	for _, u := range []string{uri, file} {
		if _, err := bob.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: u}); err == nil {
			t.Errorf("bob read alice's %s", u)
		}
		if _, err := alice.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: u}); err != nil {
			t.Errorf("alice reads %s: %v", u, err)
		}
	}
}
