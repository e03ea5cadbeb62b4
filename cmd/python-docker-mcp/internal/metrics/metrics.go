// Package metrics is the server's Prometheus instrumentation: a tool-call
// middleware (calls by tool and status, latency by tool, denials by rule)
// and collectors that read the executor's counters and the live MCP
// sessions at scrape time. Exposition is client_golang's.
package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// Namespace prefixes every metric name.
const Namespace = "python_docker_mcp"

// Sources are where the scrape-time numbers come from; nil fields are left out.
type Sources struct {
	// Executor returns the executor's counters (*executor.Executor.Stats).
	Executor func() executor.Stats
	// MCPSessions returns the number of live MCP sessions.
	MCPSessions func() int
	// Quotas returns each quota's use and refusals (*quota.Ledger.Stats).
	Quotas func() []quota.Stat
}

// Metrics holds the registry. Safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	denials *prometheus.CounterVec
}

// New registers the server's metrics (and the Go runtime and process
// collectors) on a registry of its own.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tool_calls_total",
			Help: "Tool calls by tool and status (ok, error, timeout, oom, killed, refused, denied, invalid, cancelled, …).",
		}, []string{"tool", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "tool_call_duration_seconds",
			Help:    "Tool call latency in the server, from the call's arrival to its result, by tool.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"tool"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "policy_denials_total",
			Help: "Violations of denied tool calls, by rule (a call denied by two rules counts once for each).",
		}, []string{"rule"}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.denials,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src.Executor != nil || src.MCPSessions != nil || src.Quotas != nil {
		m.reg.MustRegister(&scrape{src: src})
	}
	return m
}

// Registry is the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the exposition format at /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Middleware counts every tool call. Register it with
// server.WithToolHandlerMiddleware.
func (m *Metrics) Middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		t0 := time.Now()
		res, err := next(ctx, req)
		o := Classify(ctx, res, err)
		tool := req.Params.Name
		m.calls.WithLabelValues(tool, o.Status).Inc()
		m.latency.WithLabelValues(tool).Observe(time.Since(t0).Seconds())
		for _, r := range o.Rules {
			m.denials.WithLabelValues(r).Inc()
		}
		return res, err
	}
}

// Result is what Classify reads from a tool result.
type Result struct {
	// Status is the result's structured "status", else ok or error;
	// "cancelled" when the call's context was cancelled.
	Status string
	// Rules are the rules of the violations of a denial.
	Rules []string
	// SessionID is the structured "session_id", if any.
	SessionID string
}

// Classify reads the outcome of a tool call from its result.
func Classify(ctx context.Context, res *mcp.CallToolResult, err error) Result {
	var o Result
	if ctx.Err() != nil {
		o.Status = "cancelled"
		return o
	}
	if err != nil || res == nil {
		o.Status = "error"
		return o
	}
	var sc struct {
		Status     string `json:"status"`
		SessionID  string `json:"session_id"`
		Violations []struct {
			Rule string `json:"rule"`
		} `json:"violations"`
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &sc)
		}
	}
	o.Status, o.SessionID = sc.Status, sc.SessionID
	if o.Status == "" {
		o.Status = "ok"
		if res.IsError {
			o.Status = "error"
		}
	}
	if o.Status == "denied" {
		for _, v := range sc.Violations {
			o.Rules = append(o.Rules, v.Rule)
		}
	}
	return o
}

// scrape reads the executor's counters once per scrape.
type scrape struct{ src Sources }

var (
	descPoolSize    = prometheus.NewDesc(Namespace+"_pool_size", "Sandboxes a warm pool keeps ready (pool.size), by kind.", []string{"kind"}, nil)
	descPoolIdle    = prometheus.NewDesc(Namespace+"_pool_idle", "Sandboxes ready in a warm pool now, by kind.", []string{"kind"}, nil)
	descPoolHits    = prometheus.NewDesc(Namespace+"_pool_hits_total", "Calls served by a pooled sandbox, by kind.", []string{"kind"}, nil)
	descPoolMisses  = prometheus.NewDesc(Namespace+"_pool_misses_total", "Calls that found the pool empty (or asked for other limits) and started a cold sandbox, by kind.", []string{"kind"}, nil)
	descStarts      = prometheus.NewDesc(Namespace+"_sandbox_starts_total", "Sandbox starts attempted (pooled and cold).", nil, nil)
	descStartFails  = prometheus.NewDesc(Namespace+"_sandbox_start_failures_total", "Sandbox starts that failed (Docker error, missing image, runner not ready).", nil, nil)
	descRunners     = prometheus.NewDesc(Namespace+"_sandbox_runners_total", "Sandboxes whose runner loaded the code an earlier sandbox compiled (runner=loaded) or compiled its source (runner=compiled).", []string{"runner"}, nil)
	descSandboxes   = prometheus.NewDesc(Namespace+"_sandboxes", "Sandbox containers running now.", nil, nil)
	descSessions    = prometheus.NewDesc(Namespace+"_sandbox_sessions", "Persistent sandbox sessions held now.", nil, nil)
	descMCPSessions = prometheus.NewDesc(Namespace+"_mcp_sessions", "Live MCP sessions (Streamable HTTP sessions issued and not terminated; 1 over stdio).", nil, nil)
	descQuotaUse    = prometheus.NewDesc(Namespace+"_quota_use", "Use of each per-principal quota now, summed over principals (sandboxes, sessions, transport_sessions, output_bytes, inflight_bytes).", []string{"quota"}, nil)
	descQuotaTop    = prometheus.NewDesc(Namespace+"_quota_top_use", "Use of each per-principal quota now by the principal that uses it most.", []string{"quota"}, nil)
	descReuseIdle   = prometheus.NewDesc(Namespace+"_reuse_idle", "Sandboxes kept for their principal's next transient call, idle now (pool.reuse: principal).", nil, nil)
	descReuseHits   = prometheus.NewDesc(Namespace+"_reuse_hits_total", "Transient calls served by a sandbox kept for their principal.", nil, nil)
	descReuseResets = prometheus.NewDesc(Namespace+"_reuse_resets_total", "Resets of kept sandboxes between calls, by result (ok: every check passed; failed: the sandbox was removed).", []string{"result"}, nil)
	descReuseEnds   = prometheus.NewDesc(Namespace+"_reuse_removed_total", "Kept sandboxes removed, by why (retired: age, calls, or a call's timeout, OOM, kill or invalid reply; evicted: pool.reuse_max_idle or pool.max_per_principal).", []string{"why"}, nil)
	descReuseNext   = prometheus.NewDesc(Namespace+"_reuse_successors_total", "Kept sandboxes that asked the warm pool for their successor near the end of their life (pool.reuse_max_calls, pool.reuse_max_age).", nil, nil)
	descQuotaRefuse = prometheus.NewDesc(Namespace+"_quota_refusals_total", "Requests refused (or outputs not kept) because a principal's quota was reached, by quota.", []string{"quota"}, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolSize, descPoolIdle, descPoolHits, descPoolMisses, descStarts, descStartFails, descRunners, descSandboxes, descSessions, descMCPSessions, descQuotaUse, descQuotaTop, descQuotaRefuse,
		descReuseIdle, descReuseHits, descReuseResets, descReuseEnds, descReuseNext} {
		ch <- d
	}
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	if s.src.Executor != nil {
		st := s.src.Executor()
		for _, p := range st.Pools {
			ch <- prometheus.MustNewConstMetric(descPoolSize, prometheus.GaugeValue, float64(p.Size), p.Kind)
			ch <- prometheus.MustNewConstMetric(descPoolIdle, prometheus.GaugeValue, float64(p.Idle), p.Kind)
			ch <- prometheus.MustNewConstMetric(descPoolHits, prometheus.CounterValue, float64(p.Hits), p.Kind)
			ch <- prometheus.MustNewConstMetric(descPoolMisses, prometheus.CounterValue, float64(p.Misses), p.Kind)
		}
		ch <- prometheus.MustNewConstMetric(descStarts, prometheus.CounterValue, float64(st.SandboxStarts))
		ch <- prometheus.MustNewConstMetric(descStartFails, prometheus.CounterValue, float64(st.SandboxStartFailures))
		ch <- prometheus.MustNewConstMetric(descRunners, prometheus.CounterValue, float64(st.RunnersLoaded), "loaded")
		ch <- prometheus.MustNewConstMetric(descRunners, prometheus.CounterValue, float64(st.RunnersCompiled), "compiled")
		ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, float64(st.Sandboxes))
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(st.Sessions))
		r := st.Reuse
		ch <- prometheus.MustNewConstMetric(descReuseIdle, prometheus.GaugeValue, float64(r.Idle))
		ch <- prometheus.MustNewConstMetric(descReuseHits, prometheus.CounterValue, float64(r.Hits))
		ch <- prometheus.MustNewConstMetric(descReuseResets, prometheus.CounterValue, float64(r.Resets), "ok")
		ch <- prometheus.MustNewConstMetric(descReuseResets, prometheus.CounterValue, float64(r.ResetFailures), "failed")
		ch <- prometheus.MustNewConstMetric(descReuseEnds, prometheus.CounterValue, float64(r.Retired), "retired")
		ch <- prometheus.MustNewConstMetric(descReuseEnds, prometheus.CounterValue, float64(r.Evicted), "evicted")
		ch <- prometheus.MustNewConstMetric(descReuseNext, prometheus.CounterValue, float64(r.Successors))
	}
	if s.src.MCPSessions != nil {
		ch <- prometheus.MustNewConstMetric(descMCPSessions, prometheus.GaugeValue, float64(s.src.MCPSessions()))
	}
	if s.src.Quotas != nil {
		for _, q := range s.src.Quotas() {
			ch <- prometheus.MustNewConstMetric(descQuotaUse, prometheus.GaugeValue, float64(q.Use.Total), q.Name)
			if q.Use.Top >= 0 {
				ch <- prometheus.MustNewConstMetric(descQuotaTop, prometheus.GaugeValue, float64(q.Use.Top), q.Name)
			}
			ch <- prometheus.MustNewConstMetric(descQuotaRefuse, prometheus.CounterValue, float64(q.Refused), q.Name)
		}
	}
}
