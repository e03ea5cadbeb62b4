package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// serverSandboxes counts the sandboxes whose owner runs in container cid.
func serverSandboxes(t *testing.T, cli *client.Client, cid string) int {
	t.Helper()
	f := make(client.Filters).Add("label", backend.LabelKind).Add("label", executor.LabelServer+"="+cid)
	l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestServerImage builds the server image the way README.md of this
// directory says (a static binary, `image build-server`), runs it with the
// Docker socket mounted, makes calls through it with the go-sdk client over
// `docker run -i`, and
// checks that its sandboxes are labelled with its container, that a second
// replica (same hostname, also pid 1) leaves the first one's session alone,
// and that no sandbox is left once they exit.
func TestServerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a static binary and an image")
	}
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dir := t.TempDir()
	static := filepath.Join(dir, "python-docker-mcp")
	build := exec.Command("go", "build", "-trimpath", "-o", static, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	tag := "python-docker-mcp-server:e2e-" + strings.ToLower(filepath.Base(dir))
	out, err := exec.Command(static, "image", "build-server", "--tag", tag).CombinedOutput()
	if err != nil {
		t.Fatalf("image build-server: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	// A dynamically linked binary is refused with what to do.
	if out, err := exec.Command(binary, "image", "build-server", "--tag", tag).CombinedOutput(); err == nil || !strings.Contains(string(out), "CGO_ENABLED=0") {
		t.Errorf("build-server from a dynamic binary: %v %s, want a refusal naming CGO_ENABLED=0", err, out)
	}

	// Two replicas with the same hostname, each pid 1 in its container: the
	// second one's start must not remove the first one's sandboxes.
	type replica struct {
		c   *mcpClient
		cid string
	}
	run := func(name string) replica {
		cidfile := filepath.Join(dir, name+".cid")
		cmd := exec.Command("docker", "run", "-i", "--rm", "--network", "none", "--cidfile", cidfile, "--hostname", "pdm-replica",
			"-v", "/var/run/docker.sock:/var/run/docker.sock", tag, "--set", "pool.size=1")
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		c := &mcpClient{stderr: stderr}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := newSDKClient(c).Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
		if err != nil {
			t.Fatalf("connect to server container %s: %v\n%s", name, err, stderr.String())
		}
		c.cs = cs
		t.Cleanup(func() {
			cs.Close()
			if t.Failed() {
				t.Logf("server %s log:\n%s", name, stderr.String())
			}
		})
		b, err := os.ReadFile(cidfile)
		cid := strings.TrimSpace(string(b))
		if err != nil || len(cid) != 64 {
			t.Fatalf("container id of %s: %q %v", name, cid, err)
		}
		return replica{c, cid}
	}
	a := run("a")
	res := a.c.call(t, "execute-transient", map[string]any{"code": "import sys\nprint(sys.version_info[:2])\n6 * 7"})
	if sc := structured(t, res); res.IsError || sc["result"] != "42" || !strings.Contains(text(res), "--- stdout ---\n(3, 13)") {
		t.Errorf("execute-transient through the server image: %q", text(res))
	}
	res = a.c.call(t, "execute-persistent", map[string]any{"code": "x = 41"})
	session, _ := structured(t, res)["session_id"].(string)
	if res.IsError || session == "" {
		t.Fatalf("session in replica a: %q", text(res))
	}
	if n := serverSandboxes(t, cli, a.cid); n == 0 {
		t.Errorf("no sandbox labelled %s=%s while the server runs: the server does not know its container", executor.LabelServer, a.cid)
	}

	b := run("b")
	if res := b.c.call(t, "execute-transient", map[string]any{"code": "print(1)"}); res.IsError {
		t.Errorf("replica b: %q", text(res))
	}
	res = a.c.call(t, "execute-persistent", map[string]any{"session_id": session, "code": "x + 1"})
	if sc := structured(t, res); res.IsError || sc["result"] != "42" || sc["state_lost"] == true {
		t.Errorf("replica a's session after replica b started: %q (b's reaper took a's sandboxes?)", text(res))
	}

	for _, r := range []replica{a, b} {
		r.c.cs.Close() // stdin closes: the server removes its sandboxes and exits
		deadline := time.Now().Add(30 * time.Second)
		for serverSandboxes(t, cli, r.cid) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d sandbox(es) of server container %s left behind", serverSandboxes(t, cli, r.cid), r.cid[:12])
			}
			time.Sleep(200 * time.Millisecond)
		}
		deadline = time.Now().Add(30 * time.Second)
		for {
			if _, err := cli.ContainerInspect(context.Background(), r.cid, client.ContainerInspectOptions{}); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the server container %s is still there after its client closed", r.cid[:12])
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
