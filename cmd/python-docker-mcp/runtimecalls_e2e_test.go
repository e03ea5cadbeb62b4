package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestBlockedCallsAtRunTime runs, through the built server, spellings of
// blocked calls that the static gate lets pass (blocked_calls: [open,
// shutil.rmtree]): each is refused at run time by the sandbox's audit hook
// with the gate's rule and message, and the error names the line of user
// code that led to it, also when a library makes the call for the user.
// Calls not blocked, and library work on the user's behalf that opens no
// file (numpy, pandas on a string buffer, a warning's source line), run.
func TestBlockedCallsAtRunTime(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("blocked_calls: [open, shutil.rmtree, exec]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := stdioClient(t, "", []string{"--config", cfg})
	const openMsg = `call to open is blocked (blocked_calls lists "open")`
	const rmtreeMsg = `call to shutil.rmtree is blocked (blocked_calls lists "shutil.rmtree")`
	refused := []struct{ name, code, msg, line string }{
		{"open through a list", "x = 1\nprint([open][0]('/etc/hostname').read())", openMsg, "line 2"},
		{"open through a lambda", "print((lambda f: f('/etc/hostname'))(open))", openMsg, "line 1"},
		{"rmtree from a star import", "import os\nos.makedirs('d/e')\nfrom shutil import *\nrmtree('d')", rmtreeMsg, "line 4"},
		{"pathlib read_text", "import pathlib\n\nprint(pathlib.Path('/etc/hostname').read_text())", openMsg, "line 3"},
		{"pandas.read_csv of a path", "import pandas as pd\npd.read_csv('/etc/hostname')", openMsg, "line 2"},
		{"rmtree in a helper", "import os, tempfile\nd = tempfile.mkdtemp()\ntempfile.TemporaryDirectory._rmtree(d)", rmtreeMsg, "line 3"},
		{"open through the import system's helper", "import importlib._bootstrap as b\nb._call_with_frames_removed([open][0], '/etc/hostname')", openMsg, "line 2"},
		{"exec through a list", "[exec][0]('y = 2')", `call to exec is blocked (blocked_calls lists "exec")`, "line 1"},
	}
	for _, r := range refused {
		res := c.call(t, "execute-transient", map[string]any{"code": r.code})
		got := text(res)
		if !res.IsError || !strings.Contains(got, r.msg) || !strings.Contains(got, "calls.blocked") || !strings.Contains(got, r.line) {
			t.Errorf("%s: %q, want it refused at run time with calls.blocked, %q and %s", r.name, got, r.msg, r.line)
		}
	}
	allowed := []struct{ name, code, stdout string }{
		{"pandas on a buffer", "import io, pandas as pd\nprint(int(pd.read_csv(io.StringIO('a\\n1\\n2')).a.sum()))", "3"},
		{"a dataclass (the library's own exec)", "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nprint(P(4).x)", "4"},
		{"a warning's source line", "import warnings\nwarnings.warn('w')\nprint('done')", "done"},
	}
	for _, a := range allowed {
		res := c.call(t, "execute-transient", map[string]any{"code": a.code})
		if res.IsError || !strings.Contains(text(res), "--- stdout ---\n"+a.stdout) {
			t.Errorf("%s: %q, want stdout %q", a.name, text(res), a.stdout)
		}
	}
	// A persistent session keeps its worker: the guard holds on later calls.
	res := c.call(t, "execute-persistent", map[string]any{"code": "f = [open][0]\nx = 1"})
	sid, _ := structured(t, res)["session_id"].(string)
	if res.IsError || sid == "" {
		t.Fatalf("execute-persistent: %q", text(res))
	}
	res = c.call(t, "execute-persistent", map[string]any{"session_id": sid, "code": "f('/etc/hostname').read()"})
	if got := text(res); !res.IsError || !strings.Contains(got, openMsg) {
		t.Errorf("open kept from an earlier call: %q, want %q", got, openMsg)
	}
	c.call(t, "cleanup-session", map[string]any{"session_id": sid})
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the runtime blocked calls")
}

// TestGateOnlyCallsReported: config validate and policy check name the
// blocked_calls entries the sandbox cannot enforce at run time (whole, or
// the rest of a module entry), and not those it can.
func TestGateOnlyCallsReported(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	code := filepath.Join(dir, "x.py")
	if err := os.WriteFile(cfg, []byte("blocked_calls: [open, shutil.rmtree, os.getcwd, getattr, subprocess]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(code, []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"config", "validate", cfg}, {"policy", "check", "--config", cfg, code}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		got := string(out)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, got)
		}
		for _, want := range []string{
			"blocked_calls: os.getcwd is enforced by the static gate only, not at run time",
			"blocked_calls: getattr is enforced by the static gate only, not at run time",
			"blocked_calls: subprocess (other than subprocess.Popen, ",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%v: %q, want it to say %q", args, got, want)
			}
		}
		for _, runtime := range []string{"blocked_calls: open ", "blocked_calls: shutil.rmtree "} {
			if strings.Contains(got, runtime) {
				t.Errorf("%v: %q reports %q as gate-only; it holds at run time", args, got, runtime)
			}
		}
	}
}
