package main

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestCapabilitiesFromThePolicy drives the built server over stdio: the
// module lists an operator writes become capability classes in the
// decision, and the sandbox enforces them whatever spelling the code uses
// to reach the capability. With nothing blocked, the same code runs.
func TestCapabilitiesFromThePolicy(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)

	// Routes that pass the static gate (no blocked module is imported by
	// name, no blocked call is spelled) and still reach a denied class.
	routes := []struct {
		name, code, want string
	}{
		{"attribute chain through an allowed library", "import matplotlib\nmatplotlib.subprocess.run(['true'])", "process creation is not allowed"},
		{"os functions not in blocked_calls", "import os\nos.spawnvp(os.P_WAIT, 'true', ['true'])", "process creation is not allowed"},
	}
	const threads = "from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(2) as ex:\n    print(sum(ex.map(abs, [-1, -2])))"

	t.Run("denied", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "blocked_modules=subprocess,socket,multiprocessing"})
		for _, r := range routes {
			res := c.call(t, "execute-transient", map[string]any{"code": r.code})
			sc := structured(t, res)
			if !res.IsError || sc["status"] != "error" || !strings.Contains(text(res), "PermissionError") || !strings.Contains(text(res), r.want) {
				t.Errorf("%s: got status %v, %q; want a PermissionError saying %q", r.name, sc["status"], text(res), r.want)
			}
		}
		// A C twin of a blocked module is refused by the gate before
		// anything runs.
		res := c.call(t, "execute-transient", map[string]any{"code": "import _posixsubprocess"})
		if sc := structured(t, res); !res.IsError || sc["status"] != "denied" || !strings.Contains(text(res), "subprocess") {
			t.Errorf("import _posixsubprocess with subprocess blocked: %q, want a denial naming subprocess", text(res))
		}
		res = c.call(t, "execute-transient", map[string]any{"code": threads})
		if res.IsError || !strings.Contains(text(res), "3") {
			t.Errorf("threads with processes denied: %q, want 3", text(res))
		}
		c.cs.Close()
		waitNoSandboxes(t, cli, c.pid, "denied capabilities")
	})

	t.Run("sockets denied directly", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "policy.capabilities.sockets=false"})
		res := c.call(t, "execute-transient", map[string]any{"code": "import socket\nsocket.socket(socket.AF_UNIX)"})
		if !res.IsError || !strings.Contains(text(res), "PermissionError") || !strings.Contains(text(res), "sockets is not allowed by the sandbox policy") {
			t.Errorf("socket with policy.capabilities.sockets=false: %q, want the policy's PermissionError", text(res))
		}
		c.cs.Close()
		waitNoSandboxes(t, cli, c.pid, "sockets denied")
	})

	t.Run("allowed", func(t *testing.T) {
		c := stdioClient(t, "", nil)
		res := c.call(t, "execute-transient", map[string]any{"code": "import subprocess, socket\nprint(subprocess.run(['true']).returncode)\nsocket.socket(socket.AF_UNIX).close()\nprint('ok')"})
		if res.IsError || !strings.Contains(text(res), "0\nok") {
			t.Errorf("processes and sockets with nothing blocked: %q, want them to work", text(res))
		}
		c.cs.Close()
		waitNoSandboxes(t, cli, c.pid, "allowed capabilities")
	})
}
