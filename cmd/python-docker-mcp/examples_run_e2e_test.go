package main

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

const pythonDockerMCPExample = "../../examples/config/python-docker-mcp.yaml"

// ownImage tags the sandbox image under a name python-docker-mcp does not
// manage (as python:3.12.2-slim in the example): it is used as it is and
// never built. (Naming the managed image instead would rebuild it: the
// example's working_dir /app is part of the managed image's recipe.)
func ownImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	own := "python-docker-mcp-e2e-own:" + strings.ToLower(t.Name())
	if _, err := cli.ImageTag(context.Background(), client.ImageTagOptions{Source: config.Default().Docker.Image, Target: own}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), own, client.ImageRemoveOptions{}) })
	return own
}

// TestPythonDockerMCPExampleRuns runs python-docker-mcp's example
// configuration (working_dir /app, 256m, 0.5 CPU, uv, its module lists)
// with an image of the operator's own that exists: its calls run, and its
// lists apply.
func TestPythonDockerMCPExampleRuns(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--config", pythonDockerMCPExample, "--image", ownImage(t, cli)})
	res := c.call(t, "execute-transient", map[string]any{"code": "import math, json\nprint(json.dumps(round(math.pi, 2)))"})
	if sc := structured(t, res); res.IsError || sc["stdout_bytes"] != float64(5) || !strings.Contains(text(res), "--- stdout ---\n3.14") {
		t.Errorf("execute-transient with the example config: %q", text(res))
	}
	res = c.call(t, "execute-persistent", map[string]any{"code": "import os\nopen('/app/x.txt', 'w').write('hi')\nos.getcwd()"})
	if !res.IsError || !strings.Contains(text(res), "modules.blocked") {
		t.Errorf("import os under the example's blocked_modules: %q, want modules.blocked", text(res))
	}
	res = c.call(t, "execute-persistent", map[string]any{"code": "open('x.txt', 'w').write('hi')\nopen('/app/x.txt').read()"})
	if sc := structured(t, res); res.IsError || sc["result"] != "'hi'" {
		t.Errorf("files in working_dir /app: %q", text(res))
	} else {
		c.call(t, "cleanup-session", map[string]any{"session_id": sc["session_id"]})
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the example config run")
}

// TestMissingOwnImage runs the example configuration with an image of
// the operator's own that does not exist: every call says so with the
// same text as the log, which says it once; once the image exists (here:
// tagged), the next call runs without a restart.
func TestMissingOwnImage(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	own := "python-docker-mcp-e2e-own:" + strings.ToLower(t.Name())
	cli.ImageRemove(context.Background(), own, client.ImageRemoveOptions{})
	c := stdioClient(t, "", []string{"--config", pythonDockerMCPExample, "--image", own})
	var texts []string
	for _, tool := range []string{"execute-transient", "execute-persistent", "execute-transient"} {
		res := c.call(t, tool, map[string]any{"code": "print(1)"})
		if !res.IsError {
			t.Fatalf("%s with a missing image succeeded: %q", tool, text(res))
		}
		texts = append(texts, text(res))
	}
	want := "the sandbox image is not available: image " + own + " is missing"
	for _, s := range texts {
		if !strings.HasPrefix(s, want) || !strings.Contains(s, "docker pull "+own) || s != texts[0] {
			t.Errorf("tool result %q, want the same text each time, starting %q and saying how to pull it", s, want)
		}
	}
	log := c.stderr.String()
	if n := strings.Count(log, texts[0]); n != 1 {
		t.Errorf("the log holds the tool result's text %d times, want once:\n%s", n, log)
	}
	if strings.Contains(log, "image build`") {
		t.Errorf("the log tells to run image build for an image python-docker-mcp does not build:\n%s", log)
	}

	if got := ownImage(t, cli); got != own {
		t.Fatalf("tagged %s, want %s", got, own)
	}
	if res := c.call(t, "execute-transient", map[string]any{"code": "print(1)"}); res.IsError {
		t.Errorf("after the image appeared: %q", text(res))
	}
	if !strings.Contains(c.stderr.String(), "the sandbox image is available now") {
		t.Errorf("the log does not say the image is available now:\n%s", c.stderr.String())
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the missing-image run")
}
