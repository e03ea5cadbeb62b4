package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

func TestClassify(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	denied := &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"status": "denied",
		"violations": []any{map[string]any{"rule": "modules.blocked"}, map[string]any{"rule": "calls.blocked"}}}}
	type out struct {
		Status, SessionID string
		Rules             []string
	}
	for name, c := range map[string]struct {
		ctx  context.Context
		res  *mcp.CallToolResult
		err  error
		want out
	}{
		"ok":         {context.Background(), &mcp.CallToolResult{StructuredContent: map[string]any{"status": "ok", "session_id": "s"}}, nil, out{"ok", "s", nil}},
		"denied":     {context.Background(), denied, nil, out{"denied", "", []string{"modules.blocked", "calls.blocked"}}},
		"no status":  {context.Background(), &mcp.CallToolResult{StructuredContent: map[string]any{"path": "x"}}, nil, out{"ok", "", nil}},
		"tool error": {context.Background(), &mcp.CallToolResult{IsError: true}, nil, out{"error", "", nil}},
		"typed": {context.Background(), &mcp.CallToolResult{StructuredContent: struct {
			Status string `json:"status"`
		}{"timeout"}}, nil, out{"timeout", "", nil}},
		"cancelled": {cancelled, denied, nil, out{"cancelled", "", nil}},
		"protocol":  {context.Background(), nil, context.DeadlineExceeded, out{"error", "", nil}},
	} {
		r := Classify(c.ctx, c.res, c.err)
		if diff := cmp.Diff(c.want, out{r.Status, r.SessionID, r.Rules}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestExposition checks the names and values a scrape shows.
func TestExposition(t *testing.T) {
	m := New(Sources{
		Executor: func() executor.Stats {
			return executor.Stats{Pools: []executor.PoolStats{{Kind: "transient", Size: 2, Idle: 1, Hits: 5, Misses: 3}},
				SandboxStarts: 9, SandboxStartFailures: 1, RunnersLoaded: 7, RunnersCompiled: 2, Sandboxes: 4, Sessions: 2,
				Reuse: executor.ReuseStats{Idle: 2, Hits: 40, Resets: 41, ResetFailures: 1, Retired: 3, Evicted: 4, Successors: 5}}
		},
		MCPSessions: func() int { return 3 },
	})
	h := m.Middleware(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"status": "denied",
			"violations": []any{map[string]any{"rule": "modules.blocked"}}}}, nil
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "execute-transient"
	h(context.Background(), req)
	h(context.Background(), req)
	want := `
# HELP python_docker_mcp_policy_denials_total Violations of denied tool calls, by rule (a call denied by two rules counts once for each).
# TYPE python_docker_mcp_policy_denials_total counter
python_docker_mcp_policy_denials_total{rule="modules.blocked"} 2
# HELP python_docker_mcp_pool_misses_total Calls that found the pool empty (or asked for other limits) and started a cold sandbox, by kind.
# TYPE python_docker_mcp_pool_misses_total counter
python_docker_mcp_pool_misses_total{kind="transient"} 3
# HELP python_docker_mcp_mcp_sessions Live MCP sessions (Streamable HTTP sessions issued and not terminated; 1 over stdio).
# TYPE python_docker_mcp_mcp_sessions gauge
python_docker_mcp_mcp_sessions 3
# HELP python_docker_mcp_sandbox_start_failures_total Sandbox starts that failed (Docker error, missing image, runner not ready).
# TYPE python_docker_mcp_sandbox_start_failures_total counter
python_docker_mcp_sandbox_start_failures_total 1
# HELP python_docker_mcp_sandbox_runners_total Sandboxes whose runner loaded the code an earlier sandbox compiled (runner=loaded) or compiled its source (runner=compiled).
# TYPE python_docker_mcp_sandbox_runners_total counter
python_docker_mcp_sandbox_runners_total{runner="compiled"} 2
python_docker_mcp_sandbox_runners_total{runner="loaded"} 7
# HELP python_docker_mcp_reuse_hits_total Transient calls served by a sandbox kept for their principal.
# TYPE python_docker_mcp_reuse_hits_total counter
python_docker_mcp_reuse_hits_total 40
# HELP python_docker_mcp_reuse_resets_total Resets of kept sandboxes between calls, by result (ok: every check passed; failed: the sandbox was removed).
# TYPE python_docker_mcp_reuse_resets_total counter
python_docker_mcp_reuse_resets_total{result="failed"} 1
python_docker_mcp_reuse_resets_total{result="ok"} 41
# HELP python_docker_mcp_reuse_removed_total Kept sandboxes removed, by why (retired: age, calls, or a call's timeout, OOM, kill or invalid reply; evicted: pool.reuse_max_idle or pool.max_per_principal).
# TYPE python_docker_mcp_reuse_removed_total counter
python_docker_mcp_reuse_removed_total{why="evicted"} 4
python_docker_mcp_reuse_removed_total{why="retired"} 3
# HELP python_docker_mcp_reuse_successors_total Kept sandboxes that asked the warm pool for their successor near the end of their life (pool.reuse_max_calls, pool.reuse_max_age).
# TYPE python_docker_mcp_reuse_successors_total counter
python_docker_mcp_reuse_successors_total 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"python_docker_mcp_policy_denials_total", "python_docker_mcp_pool_misses_total",
		"python_docker_mcp_mcp_sessions", "python_docker_mcp_sandbox_start_failures_total",
		"python_docker_mcp_sandbox_runners_total", "python_docker_mcp_reuse_hits_total", "python_docker_mcp_reuse_resets_total",
		"python_docker_mcp_reuse_removed_total", "python_docker_mcp_reuse_successors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.calls); n != 1 {
		t.Errorf("%d call series, want 1", n)
	}
	if v := testutil.ToFloat64(m.calls.WithLabelValues("execute-transient", "denied")); v != 2 {
		t.Errorf("denied calls %v, want 2", v)
	}
}

// Quotas are reported per quota name: use summed over principals, the
// largest principal's use, and refusals; no principal is a label.
func TestQuotaExposition(t *testing.T) {
	l := quota.New()
	q := policy.Quota{Max: 2, Key: "quotas.sandboxes"}
	for _, sub := range []string{"alice", "alice", "bob"} {
		if _, err := l.Take(policy.QuotaSandboxes, sub, 1, 0, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Take(policy.QuotaSandboxes, "alice", 1, 0, q); err == nil {
		t.Fatal("alice's third sandbox was not refused")
	}
	l.Source(policy.QuotaOutputBytes, func() quota.Use { return quota.Use{Total: 30, Top: 20} })
	m := New(Sources{Quotas: func() []quota.Stat { return l.Stats(policy.QuotaNames) }})
	want := `
# HELP python_docker_mcp_quota_refusals_total Requests refused (or outputs not kept) because a principal's quota was reached, by quota.
# TYPE python_docker_mcp_quota_refusals_total counter
python_docker_mcp_quota_refusals_total{quota="analyses"} 0
python_docker_mcp_quota_refusals_total{quota="inflight_bytes"} 0
python_docker_mcp_quota_refusals_total{quota="output_bytes"} 0
python_docker_mcp_quota_refusals_total{quota="sandboxes"} 1
python_docker_mcp_quota_refusals_total{quota="sessions"} 0
python_docker_mcp_quota_refusals_total{quota="transport_sessions"} 0
# HELP python_docker_mcp_quota_top_use Use of each per-principal quota now by the principal that uses it most.
# TYPE python_docker_mcp_quota_top_use gauge
python_docker_mcp_quota_top_use{quota="analyses"} 0
python_docker_mcp_quota_top_use{quota="inflight_bytes"} 0
python_docker_mcp_quota_top_use{quota="output_bytes"} 20
python_docker_mcp_quota_top_use{quota="sandboxes"} 2
python_docker_mcp_quota_top_use{quota="sessions"} 0
python_docker_mcp_quota_top_use{quota="transport_sessions"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"python_docker_mcp_quota_refusals_total", "python_docker_mcp_quota_top_use"); err != nil {
		t.Error(err)
	}
}
