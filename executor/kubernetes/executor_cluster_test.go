package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// TestClusterExecutor runs the executor itself on Pods: transient calls
// with state, a persistent session, the time limit, OOM, cleanup, a warm
// pool, and Close leaving no Pod behind (one it lost track of included). The same behaviour on Docker is
// held by package executor's tests.
func TestClusterExecutor(t *testing.T) {
	b := newCluster(t, "")
	for _, pool := range []bool{false, true} {
		name := "cold"
		if pool {
			name = "pool"
		}
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Docker.Image = image()
			cfg.Pool.Enabled, cfg.Pool.Size = pool, 1
			cfg.Pool.Preload = []string{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			e, err := executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			mine := map[string]string{backend.LabelPID: strconv.Itoa(os.Getpid())}
			defer func() {
				if !closed {
					e.Close(context.Background())
				}
				// Wait for this executor's Pods to go, so that the next test
				// finds the node's CPUs free.
				for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
					if list, err := b.List(context.Background(), mine); err != nil || len(list) == 0 {
						return
					}
				}
				t.Error("pods still there 2 minutes after Close")
			}()
			run := func(req executor.Request) *executor.Result {
				t.Helper()
				res, err := e.Transient(ctx, req)
				if err != nil {
					t.Fatalf("Transient(%q): %v", req.Code, err)
				}
				return res
			}
			// pool.reuse principal (the default): the principal's next call
			// runs in the Pod its last one used, once that Pod's reset is
			// done. Each call below waits for that: the node has room for
			// two sandbox Pods (the kept one and the pool's refill), and a
			// call that came while its kept Pod was still being reset and
			// the refill was still starting would start a third, which the
			// node refuses (OutOfcpu).
			keptIdle := func() {
				t.Helper()
				if !pool {
					return
				}
				for deadline := time.Now().Add(time.Minute); e.Stats().Reuse.Idle < 1; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no kept Pod a minute after the call: reuse stats %+v", e.Stats().Reuse)
					}
				}
			}
			if res := run(executor.Request{Code: "print(1)"}); res.Status != "ok" || res.Stdout != "1\n" {
				t.Errorf("print(1): %+v", res)
			}
			keptIdle()
			res := run(executor.Request{Code: "a += 1", State: json.RawMessage(`{"a": 2}`)})
			if string(res.State) != `{"a": 3}` && string(res.State) != `{"a":3}` {
				t.Errorf("state out %s (%+v), want a == 3", res.State, res)
			}
			if st := e.Stats().Reuse; pool && (st.Hits != 1 || st.Resets < 1 || st.ResetFailures != 0) {
				t.Errorf("reuse stats %+v: want the second call in the kept Pod, reset once, no failed reset", st)
			}
			keptIdle()
			if res := run(executor.Request{Code: "import time\ntime.sleep(60)", Imports: []analyze.Import{{Module: "time", Line: 1}}, Limits: executor.Limits{Timeout: 2 * time.Second}}); res.Status != "timeout" {
				t.Errorf("sleep past the limit: %+v", res)
			}
			if pool {
				return // sessions and OOM are the same with or without a pool
			}
			// Under gVisor an OOM may kill only the worker (SIGKILL) without
			// the count the runner reads, which then reports a kill; the
			// executor names the memory limit as its likely cause (README,
			// "gVisor on the node").
			res = run(executor.Request{Code: "chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))"})
			if gv := underGVisor(t, b); res.Status != "oom" && (!gv || res.Status != "killed" || res.Error == nil ||
				!strings.Contains(res.Error.Message, "signal 9") || !strings.Contains(res.Error.Message, "memory limit")) {
				t.Errorf("OOM: status %q (%+v), want oom (under gVisor: or killed by signal 9, naming the memory limit)", res.Status, res.Error)
			} else if res.Status != "oom" {
				t.Logf("OOM under gVisor: status %q: %s", res.Status, res.Error.Message)
			}
			r1, sid, err := e.Persistent(ctx, "", executor.Request{Owner: "alice", Code: "x = 41"})
			if err != nil || r1.Status != "ok" {
				t.Fatalf("new session: %+v, %v", r1, err)
			}
			r2, _, err := e.Persistent(ctx, sid, executor.Request{Owner: "alice", Code: "x + 1"})
			if err != nil || r2.Result == nil || *r2.Result != "42" {
				t.Errorf("session state: %+v, %v; want 42", r2, err)
			}
			if err := e.Cleanup(ctx, "alice", sid); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Install(ctx, executor.InstallRequest{Owner: "alice", Name: "tabulate"}); err == nil || !strings.Contains(err.Error(), "docker backend") {
				t.Errorf("install-package on Kubernetes: %v, want an error saying it needs the docker backend", err)
			}
			// A Pod labelled as this executor's that it never tracked: what a
			// start leaves when the API server goes away while the Pod
			// starts (its clean-up fails too). Close removes it as well.
			spec := pythonSpec("close-stray", "import time; time.sleep(600)")
			spec.Labels[backend.LabelInstance] = e.Instance()
			stray, err := b.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			stray.Close()
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
			closed = true
			// Close removed every Pod of this executor (deletion may still be
			// in progress).
			list, err := b.List(ctx, mine)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list {
				if !p.Removing {
					t.Errorf("pod %s still there and not being removed after Close", p.ID)
				}
			}
		})
	}
}

// TestClusterReplicas: replicas that cannot see each other's processes
// judge each other by their Leases. A starting executor removes the Pods
// of a server without a Lease and keeps those of a server holding one;
// once that server's Lease is released, the next executor's start removes
// its Pods too. An executor holds its own Lease while open and deletes it
// on Close.
func TestClusterReplicas(t *testing.T) {
	b, run := clusterBackend(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	other := "replica-" + suffix
	release, err := b.Hold(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer release(context.Background())
	pod := func(instance string) string {
		spec := pythonSpec(run, "import sys; sys.stdin.read()")
		spec.Labels[backend.LabelKind] = backend.KindPersistent
		spec.Labels[backend.LabelInstance] = instance
		sb, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close() })
		return sb.ID
	}
	deadPod, livePod := pod("crashed-"+suffix), pod(other)
	cfg := config.Default()
	cfg.Docker.Image = image()
	cfg.Pool.Enabled = false
	start := func() *executor.Executor {
		t.Helper()
		e, err := executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	removing := func(id string) bool {
		st, err := b.State(ctx, id)
		if errors.Is(err, backend.ErrNotFound) {
			return true
		}
		list, _ := b.List(ctx, map[string]string{backendtest.LabelRun: run})
		for _, p := range list {
			if p.ID == id {
				return p.Removing
			}
		}
		t.Logf("pod %s: %+v, %v", id, st, err)
		return true
	}
	e := start()
	if !removing(deadPod) {
		t.Error("the Pod of a server without a Lease survived another server's start")
	}
	if removing(livePod) {
		t.Fatal("a starting server removed the Pod of a server holding a fresh Lease")
	}
	leases, err := b.client.CoordinationV1().Leases(b.leaseNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine int
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, LeasePrefix) && l.Name != LeasePrefix+other {
			mine++
		}
	}
	if mine == 0 {
		t.Error("an open executor holds no Lease")
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	e2 := start() // the other server is gone now
	if !removing(livePod) {
		t.Error("the Pod of a server whose Lease was released survived another server's start")
	}
	for _, x := range []*executor.Executor{e2, e} {
		if err := x.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := b.client.CoordinationV1().Leases(b.leaseNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range after.Items {
		if strings.HasPrefix(l.Name, LeasePrefix) {
			t.Errorf("lease %s still there after every server closed", l.Name)
		}
	}
}

// TestClusterExecutorLatency measures the executor's calls on Pods next to
// the same calls on the local Docker daemon, in one run: transient
// print(1) on a cold sandbox (no pool), on a warm pooled one (calls 2 s
// apart, so the pool has refilled), and a call in an existing session,
// every sandbox with half a CPU. Run with -k8s.latency; it reports, it
// asserts nothing about time.
func TestClusterExecutorLatency(t *testing.T) {
	if !*latency {
		t.Skip("run with -k8s.latency")
	}
	b := newCluster(t, "")
	n := *latencyN
	type backendCase struct {
		name  string
		start func(cfg config.Config) (*executor.Executor, error)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []backendCase{{"kubernetes", func(cfg config.Config) (*executor.Executor, error) {
		return executor.NewWithBackend(context.Background(), executor.ConfigFrom(cfg), b, log)
	}}}
	if os.Getenv("PDM_K8S_NO_DOCKER") == "" {
		cases = append(cases, backendCase{"docker", func(cfg config.Config) (*executor.Executor, error) {
			db, err := docker.Open(context.Background(), log)
			if err != nil {
				return nil, err
			}
			return executor.NewWithBackend(context.Background(), executor.ConfigFrom(cfg), db, log)
		}})
	}
	results := map[string][]time.Duration{}
	for _, bc := range cases {
		for _, mode := range []string{"cold", "warm", "session"} {
			cfg := config.Default()
			cfg.Docker.Image = image()
			cfg.Pool.Enabled, cfg.Pool.Size = mode == "warm", 1
			cfg.Pool.Preload = []string{}
			// Half a CPU each: a Pod requests what it may use, and the
			// one-node test cluster has 2 CPUs for the running sandbox, the
			// pool's and the ones still being removed.
			cfg.Docker.CPULimit = 0.5
			e, err := bc.start(cfg)
			if err != nil {
				t.Fatalf("%s: %v", bc.name, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			sid := ""
			if mode == "session" {
				_, sid, err = e.Persistent(ctx, "", executor.Request{Owner: "bench", Code: "x = 0"})
				if err != nil {
					t.Fatalf("%s: new session: %v", bc.name, err)
				}
			}
			key := bc.name + " " + mode
			for i := range n {
				if mode == "warm" {
					time.Sleep(2 * time.Second)
				}
				t0 := time.Now()
				var res *executor.Result
				if mode == "session" {
					res, _, err = e.Persistent(ctx, sid, executor.Request{Owner: "bench", Code: "x += 1\nprint(x)"})
				} else {
					res, err = e.Transient(ctx, executor.Request{Code: "print(1)"})
				}
				d := time.Since(t0)
				if err != nil || res.Status != "ok" {
					t.Fatalf("%s call %d: %+v, %v", key, i, res, err)
				}
				results[key] = append(results[key], d)
			}
			if sid != "" {
				if err := e.Cleanup(ctx, "bench", sid); err != nil {
					t.Errorf("%s: cleanup: %v", bc.name, err)
				}
			}
			cancel()
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("%s: close: %v", bc.name, err)
			}
		}
	}
	p := func(d []time.Duration, q float64) float64 { return ms(quantile(d, q)) }
	for _, mode := range []string{"cold", "warm", "session"} {
		k, d := results["kubernetes "+mode], results["docker "+mode]
		line := fmt.Sprintf("%-8s n=%-3d kubernetes p50 %8.1f ms p95 %8.1f ms", mode, len(k), p(k, 0.5), p(k, 0.95))
		if len(d) > 0 {
			line += fmt.Sprintf(" | docker p50 %8.1f ms p95 %8.1f ms | p50 ratio %.2fx", p(d, 0.5), p(d, 0.95), p(k, 0.5)/p(d, 0.5))
		}
		t.Log(line)
	}
}

// TestClusterSessionAlternates: one session, two executors on the cluster
// (replicas), 20 calls alternating between them: each call sees the last
// one's state, whichever executor made it; the log reports the latency of
// a call that takes the session's record over from the other executor.
func TestClusterSessionAlternates(t *testing.T) {
	b := newCluster(t, "")
	cfg := config.Default()
	cfg.Docker.Image = image()
	cfg.Pool.Enabled = false
	cfg.Docker.CPULimit = 0.25
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var es []*executor.Executor
	for range 2 {
		e, err := executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(context.Background())
		es = append(es, e)
	}
	_, sid, err := es[0].Persistent(ctx, "", executor.Request{Owner: "alice", Code: "n = 0"})
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for i := 1; i <= 20; i++ {
		t0 := time.Now()
		res, _, err := es[i%2].Persistent(ctx, sid, executor.Request{Owner: "alice", Code: "n += 1\nn"})
		took = append(took, time.Since(t0))
		if err != nil || res.Result == nil || *res.Result != strconv.Itoa(i) {
			t.Fatalf("call %d on executor %d: %+v, %v; want n == %d", i, i%2, res, err, i)
		}
	}
	t.Logf("a session's calls alternating executors: p50 %.1f ms, p95 %.1f ms (n=%d)", ms(quantile(took, 0.5)), ms(quantile(took, 0.95)), len(took))
	if err := es[1].Cleanup(ctx, "alice", sid); err != nil {
		t.Fatal(err)
	}
}
