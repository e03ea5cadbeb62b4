package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// TestDecisionLogOutcome checks the call identity on decision lines and
// the outcome line written after the call.
func TestDecisionLogOutcome(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	cfg := config.Default()
	cfg.Policy.DecisionLog = logPath
	g := NewGate(load(t, cfg, nil))
	g.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	ctx := WithCall(context.Background(), Call{ID: "c1", MCPSession: "m1"})
	in := run(analyze.Facts{})
	in.Tool = ToolExecutePersistent
	in.Session = &Session{ID: "s1", Owner: "alice", Exists: true}
	if _, err := g.Decide(ctx, in); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.LogOutcome(cctx, Outcome{Tool: ToolExecutePersistent, Principal: Principal{Sub: "alice", Scopes: []string{}},
		SessionID: "s1", Status: "cancelled", Duration: 1500 * time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), b)
	}
	var dec, out map[string]any
	json.Unmarshal([]byte(lines[0]), &dec)
	json.Unmarshal([]byte(lines[1]), &out)
	for _, k := range []string{"call_id", "mcp_session", "session_id"} {
		if dec[k] != map[string]string{"call_id": "c1", "mcp_session": "m1", "session_id": "s1"}[k] {
			t.Errorf("decision line %s = %v", k, dec[k])
		}
	}
	want := map[string]any{"time": "2026-01-02T03:04:05Z", "event": "outcome", "call_id": "c1", "mcp_session": "m1",
		"tool": "execute-persistent", "principal": map[string]any{"sub": "alice", "scopes": []any{}}, "session_id": "s1",
		"outcome": "cancelled", "cancelled": true, "duration_ms": 1.5}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome line (-want +got):\n%s", diff)
	}
	// Without a decision log, LogOutcome writes nothing and does not fail.
	g2 := NewGate(load(t, config.Default(), nil))
	if err := g2.LogOutcome(ctx, Outcome{Tool: "x", Status: "ok"}); err != nil {
		t.Errorf("LogOutcome without a log: %v", err)
	}
}
