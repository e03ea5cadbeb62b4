package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// installServer starts the server over stdio with a wheelhouse holding
// pdmdemo 1.0 (and evilpkg 1.0, which the config blocks).
func installServer(t *testing.T, extra ...string) (*mcpClient, string) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	dockertest.WriteWheel(t, dir, "pdmdemo", "1.0", "42")
	dockertest.WriteWheel(t, dir, "evilpkg", "1.0", "666")
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "package:\n  find_links: [" + strconv.Quote(dir) + "]\n  blocked: [evilpkg]\n"
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return stdioClient(t, "", append([]string{"--config", cfgFile}, extra...)), dir
}

// callWithProgress calls a tool with a progress token and returns the
// progress messages received during the call.
func (c *mcpClient) callWithProgress(t *testing.T, name string, args map[string]any) (*sdk.CallToolResult, []string) {
	t.Helper()
	c.mu.Lock()
	before := len(c.prog)
	c.mu.Unlock()
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	params.SetProgressToken(name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	// Progress notifications travel ahead of the result on stdio; give the
	// client's handler a moment to run.
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	return res, slices.Clone(c.prog[before:])
}

// packageVolumes lists the package volumes of the server process pid.
func packageVolumes(t *testing.T, cli *client.Client, pid int) []string {
	t.Helper()
	f := make(client.Filters).Add("label", "python-docker-mcp.kind=packages").Add("label", fmt.Sprintf("python-docker-mcp.pid=%d", pid))
	l, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range l.Items {
		names = append(names, v.Name)
	}
	return names
}

func waitNoVolumes(t *testing.T, cli *client.Client, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := packageVolumes(t, cli, pid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: package volume(s) left behind: %v", what, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestInstallPackageStdio(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	// The pool stays on (one sandbox): a new session takes a pooled
	// sandbox, which must already mount the session's package volume.
	c, dir := installServer(t, "--set", "pool.size=1")

	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	if res.IsError {
		t.Fatalf("create session: %q", text(res))
	}
	id, _ := structured(t, res)["session_id"].(string)

	res, prog := c.callWithProgress(t, "install-package", map[string]any{"package_name": "pdmdemo", "version": "1.0", "session_id": id})
	out := structured(t, res)
	if res.IsError || out["status"] != "ok" || out["version"] != "1.0" || out["package"] != "pdmdemo" || out["session_id"] != id {
		t.Fatalf("install into the session: %q\n%v", text(res), out)
	}
	if !strings.Contains(out["output"].(string), "Successfully installed pdmdemo-1.0") {
		t.Errorf("installer output %q lacks pip's success line", out["output"])
	}
	if !slices.ContainsFunc(prog, func(m string) bool { return strings.Contains(m, "Successfully installed pdmdemo-1.0") }) ||
		!slices.ContainsFunc(prog, func(m string) bool { return strings.Contains(m, "starting the installer") }) {
		t.Errorf("progress notifications during the install: %q", prog)
	}

	t.Run("importable in the next call of the session", func(t *testing.T) {
		res := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmdemo\npdmdemo.VALUE + x"})
		if res.IsError || !strings.Contains(text(res), "result: 43") {
			t.Errorf("import after install (state kept, no restart): %q", text(res))
		}
	})

	t.Run("transient calls use the owner's own installs", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "import pdmdemo"})
		if !res.IsError || !strings.Contains(text(res), "ModuleNotFoundError") {
			t.Errorf("transient import before a transient install: %q", text(res))
		}
		res = c.call(t, "install-package", map[string]any{"package_name": "pdmdemo==1.0"})
		if res.IsError || structured(t, res)["status"] != "ok" {
			t.Fatalf("install for transient calls: %q", text(res))
		}
		res = c.call(t, "execute-transient", map[string]any{"code": "import pdmdemo\npdmdemo.VALUE"})
		if res.IsError || !strings.Contains(text(res), "result: 42") {
			t.Errorf("transient import after install: %q", text(res))
		}
	})

	t.Run("denylisted", func(t *testing.T) {
		res := c.call(t, "install-package", map[string]any{"package_name": "EvilPkg", "session_id": id})
		out := structured(t, res)
		vs, _ := out["violations"].([]any)
		if !res.IsError || out["status"] != "denied" || len(vs) != 1 || vs[0].(map[string]any)["rule"] != "packages.blocked" {
			t.Errorf("blocked package: %q\n%v", text(res), out)
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import evilpkg"})
		if !strings.Contains(text(res), "ModuleNotFoundError") {
			t.Errorf("blocked package importable: %q", text(res))
		}
	})

	t.Run("not in the wheelhouse", func(t *testing.T) {
		res := c.call(t, "install-package", map[string]any{"package_name": "nosuchpkg", "session_id": id})
		out := structured(t, res)
		if !res.IsError || out["status"] != "not_found" || !strings.Contains(text(res), "no distribution of nosuchpkg") || !strings.Contains(text(res), dir) {
			t.Errorf("missing package: %q\n%v", text(res), out)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		res := c.call(t, "install-package", map[string]any{"package_name": "pdmdemo", "session_id": "0123456789abcdef0123456789abcdef"})
		if !res.IsError || !strings.Contains(text(res), "unknown session") {
			t.Errorf("unknown session: %q", text(res))
		}
	})

	if got := packageVolumes(t, cli, c.pid); len(got) < 2 {
		t.Errorf("package volumes while the server runs: %v, want the session's and the owner's", got)
	}
	if res := c.call(t, "cleanup-session", map[string]any{"session_id": id}); res.IsError {
		t.Fatalf("cleanup: %q", text(res))
	}
	sessionVol := "python-docker-mcp-pkgs-" + id
	if got := packageVolumes(t, cli, c.pid); slices.Contains(got, sessionVol) {
		t.Errorf("the session's volume %s is still there after cleanup-session: %v", sessionVol, got)
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the client closed")
	waitNoVolumes(t, cli, c.pid, "after the client closed")
}

// TestInstallRejectsInjection: bad names come back as clear errors, and no
// container is created for them (Docker's event stream says so).
func TestInstallRejectsInjection(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c, _ := installServer(t, "--set", "pool.enabled=false")
	since := time.Now()
	for _, tc := range []struct{ name, version string }{
		{"numpy; rm -rf /", ""},
		{"../x", ""},
		{"-e git+https://example.com/x.git", ""},
		{"--index-url=http://evil", ""},
		{"pkg @ file:///etc", ""},
		{"", ""},
		{"   ", ""},
		{strings.Repeat("a", 300), ""},
		{"pdmdemo", "==1.0; rm -rf /"},
		{"pdmdemo", "--pre"},
		{"pdmdemo", "@ file:///etc"},
		{"pdmdemo[extra]", ""},
		{"pdmdemo==1.0", "2.0"},
	} {
		res := c.call(t, "install-package", map[string]any{"package_name": tc.name, "version": tc.version})
		out := structured(t, res)
		if !res.IsError || out["status"] != "invalid" || !strings.Contains(text(res), "nothing was installed") {
			t.Errorf("install-package(%.40q, %q): %q %v, want an invalid request", tc.name, tc.version, text(res), out["status"])
		}
	}
	if n := containersCreated(t, cli, c.pid, since); n != 0 {
		t.Errorf("%d container(s) created for rejected installs, want 0", n)
	}
	// The probe sees an installer when there is one.
	since = time.Now()
	if res := c.call(t, "install-package", map[string]any{"package_name": "pdmdemo"}); res.IsError {
		t.Fatalf("valid install: %q", text(res))
	}
	if n := containersCreated(t, cli, c.pid, since); n != 2 {
		t.Errorf("%d container(s) created for one install, want 2 (the installer resolving, then installing)", n)
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the client closed")
	waitNoVolumes(t, cli, c.pid, "after the client closed")
}

// containersCreated counts the containers the server process pid created
// since then, from Docker's event log.
func containersCreated(t *testing.T, cli *client.Client, pid int, since time.Time) int {
	t.Helper()
	time.Sleep(time.Second) // let the daemon's event log catch up
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev := cli.Events(ctx, client.EventsListOptions{
		Since: strconv.FormatInt(since.Add(-time.Second).Unix(), 10),
		Until: strconv.FormatInt(time.Now().Unix(), 10),
		Filters: make(client.Filters).Add("type", "container").Add("event", "create").
			Add("label", fmt.Sprintf("python-docker-mcp.pid=%d", pid)),
	})
	created := 0
	for {
		select {
		case m := <-ev.Messages:
			created++
			t.Logf("container created: %.12s %s", m.Actor.ID, m.Actor.Attributes["python-docker-mcp.kind"])
		case err := <-ev.Err:
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("docker events: %v", err)
			}
			return created
		}
	}
}
