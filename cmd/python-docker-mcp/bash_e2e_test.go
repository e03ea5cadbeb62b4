package main

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func violationRules(t *testing.T, sc map[string]any) []string {
	t.Helper()
	var out []string
	vs, _ := sc["violations"].([]any)
	for _, v := range vs {
		out = append(out, v.(map[string]any)["rule"].(string))
	}
	return out
}

// TestStdioBash drives the built server with the official go-sdk client:
// bash is off by default, runs with `bash -c` when the operator enables it,
// and is refused clearly when processes are denied; node is not offered.
func TestStdioBash(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)

	t.Run("off by default", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "pool.enabled=false"})
		res := c.call(t, "execute-transient", map[string]any{"language": "bash", "code": "echo hi"})
		sc := structured(t, res)
		if rules := violationRules(t, sc); !res.IsError || sc["status"] != "denied" || len(rules) != 1 || rules[0] != "languages.disabled" ||
			!strings.Contains(text(res), "languages.bash.enabled") {
			t.Errorf("bash by default: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-transient", map[string]any{"language": "node", "code": "1"})
		if !res.IsError || !strings.Contains(text(res), "`language`") || !strings.Contains(text(res), "node") {
			t.Errorf("node: %q", text(res))
		}
	})
	t.Run("enabled", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "pool.size=1", "--set", "languages.bash.enabled=true"})
		res := c.call(t, "execute-transient", map[string]any{"language": "bash", "code": "echo hi from $0; exit 0"})
		if sc := structured(t, res); res.IsError || sc["status"] != "ok" || !strings.Contains(text(res), "hi from bash") {
			t.Errorf("bash: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-transient", map[string]any{"language": "bash", "code": "echo out; exit 4"})
		if sc := structured(t, res); sc["status"] != "error" || !strings.Contains(text(res), "bash ended with exit status 4") || !strings.Contains(text(res), "out") {
			t.Errorf("exit 4: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
		id, _ := structured(t, res)["session_id"].(string)
		c.call(t, "execute-persistent", map[string]any{"session_id": id, "language": "bash", "code": "echo 41 > n.txt"})
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "int(open('n.txt').read()) + x"})
		if sc := structured(t, res); sc["result"] != "42" {
			t.Errorf("a session shares files between bash and python: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-transient", map[string]any{"language": "bash", "code": "echo", "state": map[string]any{"x": 1}})
		if sc := structured(t, res); sc["status"] != "invalid" {
			t.Errorf("bash with state: %q %v", text(res), sc)
		}
	})
	t.Run("processes denied", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "pool.enabled=false", "--set", "languages.bash.enabled=true", "--set", "blocked_modules=subprocess"})
		res := c.call(t, "execute-transient", map[string]any{"language": "bash", "code": "echo hi"})
		sc := structured(t, res)
		if rules := violationRules(t, sc); sc["status"] != "denied" || len(rules) != 1 || rules[0] != "languages.bash_processes" ||
			!strings.Contains(text(res), "bash needs to create processes") {
			t.Errorf("bash without processes: %q %v", text(res), sc)
		}
	})
}
