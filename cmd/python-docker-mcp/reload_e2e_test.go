package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// runningTransient lists the server's running transient sandboxes.
func runningTransient(t *testing.T, cli *client.Client, pid int) []container.Summary {
	t.Helper()
	f := make(client.Filters).Add("label", backend.LabelKind+"="+backend.KindTransient).
		Add("label", fmt.Sprintf("%s=%d", backend.LabelPID, pid)).Add("status", "running")
	l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// idleTransient counts the server's transient sandboxes that are not
// running a call: the warm pool (a call's sandbox is removed after it).
func idleTransient(t *testing.T, cli *client.Client, pid int) int {
	return len(runningTransient(t, cli, pid))
}

// TestReloadWhileServing edits the config file of a running server over
// stdio, as an operator would, and checks that each change applies to the
// next call: a raised docker.timeout (the calls without a limit of their
// own ran into the start-up maximum before), a smaller
// limits.max_output_bytes, a larger pool.size; that a key needing a restart
// is logged by name and keeps its running value; and that clients are told
// when the tools' descriptions change.
func TestReloadWhileServing(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write := func(body string) {
		t.Helper()
		// Editor style: a new file renamed over the old one.
		tmp := filepath.Join(dir, ".config.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// file is the config with these values (user "": the default).
	file := func(timeout string, poolSize int, maxOutput, user string) string {
		s := fmt.Sprintf("pool:\n  size: %d\n  max_size: 3\n  preload: []\ndocker:\n  timeout: %s\n", poolSize, timeout)
		if user != "" {
			s += fmt.Sprintf("  user: %q\n", user)
		}
		if maxOutput != "" {
			s += "limits:\n  max_output_bytes: " + maxOutput + "\n"
		}
		return s
	}
	write(file("2s", 1, "", ""))

	var listChanged atomic.Int64
	cmd := serverCommand("--config", path)
	cmd.Env = serverEnv(t)
	c := &mcpClient{stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { listChanged.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	cancel()
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.stderr.String())
	}
	c.cs, c.pid = cs, cmd.Process.Pid
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", c.stderr.String())
		}
	})
	// reloads counts the reloads the server logged; wait for the next.
	reloads := regexp.MustCompile(`msg="configuration reloaded`)
	waitReload := func(t *testing.T, n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for len(reloads.FindAllString(c.stderr.String(), -1)) < n {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d not logged:\n%s", n, c.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	timeoutDesc := func(t *testing.T) string {
		t.Helper()
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range lt.Tools {
			if tool.Name == "execute-transient" {
				b, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)["timeout"].(map[string]any)["description"].(string)
				return b
			}
		}
		t.Fatal("no execute-transient in tools/list")
		return ""
	}
	const sleeper = "import time\ntime.sleep(3)\nprint('slept')"

	// Under the start-up 2 s the sleeper times out.
	res := c.call(t, "execute-transient", map[string]any{"code": sleeper})
	if sc := structured(t, res); sc["status"] != "timeout" {
		t.Fatalf("3 s of sleep under docker.timeout 2s: status %v, %q; want timeout", sc["status"], text(res))
	}
	if d := timeoutDesc(t); !strings.Contains(d, "limit of 2 s") {
		t.Errorf("timeout description at start: %q, want the 2 s limit", d)
	}

	t.Run("docker.timeout raised", func(t *testing.T) {
		write(file("60s", 1, "", ""))
		waitReload(t, 1)
		res := c.call(t, "execute-transient", map[string]any{"code": sleeper})
		if sc := structured(t, res); res.IsError || sc["status"] != "ok" || !strings.Contains(text(res), "slept") {
			t.Errorf("3 s of sleep, no timeout asked, after docker.timeout went to 60s: status %v, %q; want ok", sc["status"], text(res))
		}
		res = c.call(t, "execute-transient", map[string]any{"code": "print(1)", "timeout": 45})
		if res.IsError {
			t.Errorf("timeout 45 under the new 60s: %q", text(res))
		}
		if d := timeoutDesc(t); !strings.Contains(d, "limit of 60 s") {
			t.Errorf("timeout description after the reload: %q, want the 60 s limit", d)
		}
		deadline := time.Now().Add(10 * time.Second)
		for listChanged.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if listChanged.Load() == 0 {
			t.Errorf("no notifications/tools/list_changed after the timeout in the descriptions changed")
		}
	})

	t.Run("limits.max_output_bytes", func(t *testing.T) {
		const big = "print('Q' * 5000)"
		res := c.call(t, "execute-transient", map[string]any{"code": big})
		if sc := structured(t, res); sc["stdout_truncated"] == true || strings.Count(text(res), "Q") != 5000 {
			t.Fatalf("5000 bytes under the default 64 KiB: truncated %v, %d shown", sc["stdout_truncated"], strings.Count(text(res), "Q"))
		}
		write(file("60s", 1, "1000", ""))
		waitReload(t, 2)
		res = c.call(t, "execute-transient", map[string]any{"code": big})
		sc := structured(t, res)
		if n := strings.Count(text(res), "Q"); sc["stdout_truncated"] != true || n > 1000 || n < 500 {
			t.Errorf("5000 bytes after max_output_bytes went to 1000: truncated %v, %d bytes shown; want cut to about 1000", sc["stdout_truncated"], n)
		}
	})

	t.Run("pool.size", func(t *testing.T) {
		write(file("60s", 3, "1000", ""))
		waitReload(t, 3)
		deadline := time.Now().Add(2 * time.Minute)
		for idleTransient(t, cli, c.pid) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("the pool holds %d warm sandboxes 2 min after pool.size went to 3", idleTransient(t, cli, c.pid))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("restart key", func(t *testing.T) {
		write(file("60s", 3, "1000", "1001:1001"))
		m := waitLog(t, c.stderr, regexp.MustCompile(`level=WARN msg="config reload: this key needs a restart[^"]*" key=docker.user running=1000:1000 file=1001:1001`))
		if !strings.Contains(m[0], "restart") {
			t.Errorf("log line %q does not say restart", m[0])
		}
		res := c.call(t, "execute-transient", map[string]any{"code": "import os\nprint(os.getuid(), 'Q' * 2000)"})
		sc := structured(t, res)
		if n := strings.Count(text(res), "Q"); !strings.Contains(text(res), "1000 QQQ") || sc["stdout_truncated"] != true || n > 1000 {
			t.Errorf("after a refused docker.user: %.60q, truncated %v, %d bytes shown; want uid 1000 and the 1000-byte cap still in force", text(res), sc["stdout_truncated"], n)
		}
	})

	cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the reloads")
}
