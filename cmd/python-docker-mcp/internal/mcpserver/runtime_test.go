package mcpserver

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// The decision's runtime reaches the executor: the example policy sends
// the harness's principal (authenticated, not python:trusted) to runsc;
// without runsc configured the call is denied and nothing runs.
func TestRuntimeReachesExecutor(t *testing.T) {
	cfg := config.Default()
	cfg.Policy.Paths = []string{"../../../../examples/policy/gvisor.rego"}
	cfg.Docker.Runtimes = []string{"runsc"}
	h := start(t, cfg, "")
	for _, tool := range []string{ToolExecuteTransient, ToolExecutePersistent} {
		if res := h.call(t, tool, map[string]any{"code": "print(1)"}); res.IsError {
			t.Fatalf("%s: error: %s", tool, textOf(res))
		}
	}
	if len(h.exec.requests) != 2 {
		t.Fatalf("executor called %d times, want 2", len(h.exec.requests))
	}
	for i, req := range h.exec.requests {
		if req.Runtime != "runsc" {
			t.Errorf("request %d: runtime %q, want runsc", i, req.Runtime)
		}
	}

	cfg.Docker.Runtimes = nil
	h = start(t, cfg, "")
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "print(1)"})
	if !res.IsError || !strings.Contains(textOf(res), "runtime.invalid") {
		t.Errorf("runsc not configured: %q, want a denial by runtime.invalid", textOf(res))
	}
	if len(h.exec.requests) != 0 {
		t.Error("executor called")
	}
}
