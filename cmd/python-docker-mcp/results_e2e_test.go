package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// stateNames are the names of a structured result's list of objects with
// a "name" (state_too_large), or of its list of strings.
func stateNames(sc map[string]any, key string) []string {
	var out []string
	l, _ := sc[key].([]any)
	for _, v := range l {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case map[string]any:
			n, _ := v["name"].(string)
			out = append(out, n)
		}
	}
	return out
}

// TestTransientStateIsWhatTheCallerAsked drives the built server over
// stdio: an execute-transient call returns as state the keys it sent and
// the names it asks for, not every global; a state over
// limits.max_state_bytes leaves out its largest globals with a warning
// naming them and the cap, and the run stays a success with its output
// and result.
func TestTransientStateIsWhatTheCallerAsked(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	const code = "data = list(range(300000))\nn = len(data)\nprint('ran')\nn"

	t.Run("no state sent", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": code})
		sc := structured(t, res)
		st, _ := sc["state"].(map[string]any)
		if res.IsError || sc["status"] != "ok" || sc["result"] != "300000" || len(st) != 0 {
			t.Fatalf("no state sent: status %v, result %v, state %v; want ok, 300000, no globals\n%s", sc["status"], sc["result"], sc["state"], text(res))
		}
		if got := stateNames(sc, "unreturned_globals"); !slices.Equal(got, []string{"data", "n"}) || !strings.Contains(text(res), "name them in state_keys") {
			t.Errorf("no state sent: unreturned_globals %v, want [data n], and the text saying how to ask\n%s", got, text(res))
		}
	})

	t.Run("names asked for", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": code + "\nx += 1", "state": map[string]any{"x": 1}, "state_keys": []string{"n", "nope"}})
		sc := structured(t, res)
		st, _ := sc["state"].(map[string]any)
		if res.IsError || sc["status"] != "ok" || len(st) != 2 || st["x"] != float64(2) || st["n"] != float64(300000) {
			t.Fatalf("state and state_keys: status %v, state %v; want ok, {x: 2, n: 300000}\n%s", sc["status"], sc["state"], text(res))
		}
		if got := stateNames(sc, "missing_state"); !slices.Equal(got, []string{"nope"}) {
			t.Errorf("a name asked for and not defined: missing_state %v, want [nope]", got)
		}
	})

	// A client that passes its state back, as clients before state_keys
	// did: the key it sent grew past the cap.
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"a key sent grows too large", map[string]any{"code": code, "state": map[string]any{"data": []int{}, "n": 0}}},
		{"every global", map[string]any{"code": code, "state_keys": []string{"*"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.call(t, "execute-transient", tc.args)
			sc := structured(t, res)
			st, _ := sc["state"].(map[string]any)
			if res.IsError || sc["status"] != "ok" || sc["result"] != "300000" || !strings.Contains(text(res), "--- stdout ---\nran") {
				t.Fatalf("status %v, result %v, isError %v; want a successful run with its output and result\n%s", sc["status"], sc["result"], res.IsError, text(res))
			}
			if len(st) != 1 || st["n"] != float64(300000) {
				t.Errorf("state %v, want what fits: {n: 300000}", sc["state"])
			}
			if got := stateNames(sc, "state_too_large"); !slices.Equal(got, []string{"data"}) {
				t.Errorf("state_too_large %v, want [data]", got)
			}
			ws, _ := sc["warnings"].([]any)
			var warned bool
			for _, w := range ws {
				m, _ := w.(map[string]any)
				msg, _ := m["msg"].(string)
				warned = warned || (m["rule"] == "limits.max_state_bytes" && strings.Contains(msg, "data (") && strings.Contains(msg, "1048576 bytes"))
			}
			if !warned || !strings.Contains(text(res), "warning: limits.max_state_bytes: not returned in state, too large: data (") {
				t.Errorf("want a warning naming data and the cap of 1048576 bytes (limits.max_state_bytes); warnings %v\n%s", sc["warnings"], text(res))
			}
		})
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "state")
}

// TestRefusalsNameThePolicy drives the built server over stdio with
// sockets and pseudo-terminals denied: routes that end in the kernel's
// EPERM, or in a library's own error after it, read as the policy's rule
// in the message and in the traceback's last line the text shows.
func TestRefusalsNameThePolicy(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "policy.capabilities.sockets=false", "--set", "policy.capabilities.pty=false"})
	for _, tc := range []struct{ name, code, want string }{
		{"asyncio event loop", "import asyncio\nasync def main():\n    return 1\nasyncio.run(main())", "policy.capabilities.sockets"},
		{"posix.openpty", "import posix\nposix.openpty()", "policy.capabilities.pty"},
		{"pty.openpty", "import pty\npty.openpty()", "policy.capabilities.pty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.call(t, "execute-transient", map[string]any{"code": tc.code})
			sc := structured(t, res)
			e, _ := sc["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if !res.IsError || sc["status"] != "error" || !strings.Contains(msg, "not allowed by the sandbox policy") || !strings.Contains(msg, tc.want) {
				t.Fatalf("status %v, error message %q; want a refusal naming %s\n%s", sc["status"], msg, tc.want, text(res))
			}
			// The traceback's last line is the exception a reader sees.
			lines := strings.Split(strings.TrimRight(text(res), "\n"), "\n")
			var last string
			for _, l := range lines {
				if strings.HasPrefix(l, "PermissionError:") || strings.HasPrefix(l, "OSError:") {
					last = l
				}
			}
			if !strings.Contains(last, "not allowed by the sandbox policy") || !strings.Contains(last, tc.want) {
				t.Errorf("the traceback ends with %q, want the policy's refusal naming %s\n%s", last, tc.want, text(res))
			}
		})
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "refusals")

	// Sockets allowed, but not the unix family an event loop's socket
	// pair needs.
	c = stdioClient(t, "", []string{"--set", "policy.capabilities.sockets=true", "--set", "policy.capabilities.socket_families=inet"})
	res := c.call(t, "execute-transient", map[string]any{"code": "import asyncio\nasync def main():\n    return 1\nasyncio.run(main())"})
	if !res.IsError || !strings.Contains(text(res), "PermissionError: unix sockets are not allowed by the sandbox policy (policy.capabilities.sockets allows inet): an asyncio event loop") {
		t.Errorf("asyncio with only inet sockets: %q, want the refusal naming the unix family", text(res))
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "refusals, inet only")
}

// TestOutOfMemoryNamesTheLimit drives the built server over stdio with a
// 128 MiB memory limit: code that needs more is status oom, and the
// result says the limit and the key an operator raises it with.
func TestOutOfMemoryNamesTheLimit(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "docker.memory_limit=128m"})
	for _, tc := range []struct{ name, code string }{
		{"one large allocation", "x = bytearray(1 << 30)"},
		{"growing", "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.call(t, "execute-transient", map[string]any{"code": tc.code})
			sc := structured(t, res)
			e, _ := sc["error"].(map[string]any)
			msg, _ := e["message"].(string)
			first, _, _ := strings.Cut(text(res), "\n")
			if !res.IsError || sc["status"] != "oom" || !strings.Contains(msg, "128 MiB") || !strings.Contains(msg, "docker.memory_limit") {
				t.Fatalf("status %v, error message %q; want oom naming 128 MiB and docker.memory_limit\n%s", sc["status"], msg, text(res))
			}
			if !strings.Contains(first, "128 MiB") || !strings.Contains(first, "docker.memory_limit") {
				t.Errorf("the text's first line %q does not say the limit", first)
			}
		})
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "oom")
}
