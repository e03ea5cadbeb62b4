package main

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestStdioSyntaxErrors drives the built server with the official go-sdk
// client over stdio: code that does not parse is status syntax_error with
// CPython's message, line, column and caret (not the static checker's
// text), before any policy, and nothing of it runs.
func TestStdioSyntaxErrors(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "pool.size=1", "--set", "blocked_modules=os"})

	t.Run("CPython's message, not the static checker's", func(t *testing.T) {
		// The static checker says "'(' was never closed" at column 6.
		res := c.call(t, "execute-transient", map[string]any{"code": "import os\ndef f(:\n    pass\n"})
		sc := structured(t, res)
		e, _ := sc["error"].(map[string]any)
		if !res.IsError || sc["status"] != "syntax_error" || e == nil {
			t.Fatalf("isError %v, structured %v; want status syntax_error (before the policy denies import os)", res.IsError, sc)
		}
		if e["type"] != "SyntaxError" || e["message"] != "invalid syntax" || e["line"] != 2.0 || e["col"] != 7.0 {
			t.Errorf("error = %v; want CPython's SyntaxError \"invalid syntax\" at line 2, col 7", e)
		}
		want := "  File \"<cell>\", line 2\n    def f(:\n          ^\nSyntaxError: invalid syntax"
		if e["traceback"] != want || !strings.Contains(text(res), want) {
			t.Errorf("traceback %q, text %q; want both to show %q", e["traceback"], text(res), want)
		}
		if vs, _ := sc["violations"].([]any); len(vs) != 0 {
			t.Errorf("violations %v; a syntax error is not a policy denial", vs)
		}
	})
	t.Run("an indentation error", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "if True:\nprint(1)\n"})
		e, _ := structured(t, res)["error"].(map[string]any)
		if e == nil || e["type"] != "IndentationError" || e["message"] != "expected an indented block after 'if' statement on line 1" || e["line"] != 2.0 {
			t.Errorf("error = %v, text %q; want CPython's IndentationError on line 2", e, text(res))
		}
	})
	t.Run("what only CPython sees", func(t *testing.T) {
		// The static checker parses this; the sandbox's own check does not,
		// before anything runs.
		res := c.call(t, "execute-transient", map[string]any{"code": "print('ran')\nf(x for x in y, 1)\n"})
		sc := structured(t, res)
		e, _ := sc["error"].(map[string]any)
		if sc["status"] != "syntax_error" || e == nil || e["message"] != "Generator expression must be parenthesized" || e["line"] != 2.0 || e["col"] != 3.0 {
			t.Errorf("structured %v; want CPython's syntax error at 2:3", sc)
		}
		if got := text(res); strings.Contains(got, "ran") || !strings.Contains(got, "    f(x for x in y, 1)\n      ^^^^^^^^^^^^") {
			t.Errorf("text %q; want the caret and nothing printed", got)
		}
	})
	t.Run("a session is untouched and none is created", func(t *testing.T) {
		res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1\nfor i in range(3)\n    x = 2\n"})
		sc := structured(t, res)
		if sc["status"] != "syntax_error" || sc["session_id"] != nil {
			t.Errorf("no session: structured %v; want syntax_error and no session", sc)
		}
		res = c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
		id, _ := structured(t, res)["session_id"].(string)
		if res.IsError || id == "" {
			t.Fatalf("new session: %q", text(res))
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "x = 2\nfor i in range(3)\n    x = 3\n"})
		if sc := structured(t, res); sc["status"] != "syntax_error" || sc["session_id"] != id || !strings.Contains(text(res), "SyntaxError: expected ':'") {
			t.Errorf("in the session: %q %v", text(res), sc)
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "x"})
		if sc := structured(t, res); res.IsError || sc["result"] != "1" || sc["state_lost"] != false {
			t.Errorf("after the syntax error x = %v (state_lost %v), want 1: the code must not have run", sc["result"], sc["state_lost"])
		}
	})
}
