package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

func poolExec(t *testing.T, size int, preload ...string) (*Executor, *dockertest.Daemon) {
	t.Helper()
	e, cli := newExec(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: size, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2, Preload: preload}
	})
	waitPoolFull(t, e)
	return e, cli
}

// hasCode says the executor has the runner's compiled code.
func hasCode(e *Executor) bool {
	_, _, ok := e.runner.Code()
	return ok
}

// denyAll denies every capability class.
var denyAll = &Capabilities{}

func waitPoolFull(t testing.TB, e *Executor) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, p := range []*sandboxPool{e.pool(), e.spool()} {
		for {
			kind, size, idle, _, _ := p.Stats()
			if idle >= size {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s pool has %d of %d sandboxes after a minute", kind, idle, size)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestPoolNeverReuses(t *testing.T) {
	e, _ := poolExec(t, 2, "json")
	res := transient(t, e, Request{Code: "import subprocess\nsubprocess.Popen(['sleep', '1000'])\nopen('/tmp/mark', 'w').write('x')\nimport sys\n'json' in sys.modules",
		Imports: imports("subprocess", 1, "sys", 4)})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "True" {
		t.Errorf("preloaded module not imported in the pooled sandbox: %v", res.Result)
	}
	waitPoolFull(t, e)
	code := `import os
procs = [open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
print(any(c.startswith(b"sleep\x001000") for c in procs), os.path.exists("/tmp/mark"))`
	for range 3 {
		res = transient(t, e, Request{Code: code, Imports: imports("os", 1)})
		wantStatus(t, res, "ok")
		if res.Stdout != "False False\n" {
			t.Errorf("a pooled sandbox saw an earlier call's process or file: %q", res.Stdout)
		}
	}
	if h := e.pool().Hits(); h < 2 {
		t.Errorf("%d calls served from the pool, want at least 2", h)
	}
}

func TestPoolTighterLimitsGetColdSandbox(t *testing.T) {
	e, _ := poolExec(t, 1)
	before := e.pool().Hits()
	res := transient(t, e, Request{Code: "int(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read())", Limits: Limits{Memory: 256 << 20}})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "268435456" {
		t.Errorf("memory limit seen inside = %v, want 268435456", res.Result)
	}
	if e.pool().Hits() != before {
		t.Error("a request with a tighter memory limit was served from the pool")
	}
	res = transient(t, e, Request{Code: "1", Limits: Limits{Timeout: 5 * time.Second}})
	wantStatus(t, res, "ok")
	if e.pool().Hits() != before+1 {
		t.Error("a request that only changes the timeout should be served from the pool")
	}
}

func TestPoolReplacesKilledSandbox(t *testing.T) {
	e, cli := poolExec(t, 2)
	idle, _ := e.pool().Idle("")
	victim := idle[0].id
	if err := cli.Kill(context.Background(), victim, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		idle, _ := e.pool().Idle("")
		ok := len(idle) == 2
		for _, sb := range idle {
			ok = ok && sb.id != victim
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed pooled sandbox was not replaced within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 2 {
		wantStatus(t, transient(t, e, Request{Code: "1"}), "ok")
	}
}

func TestPoolShutdown(t *testing.T) {
	e, cli := poolExec(t, 3)
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.instance); n != 4 {
		t.Errorf("%d pooled containers, want 4 (3 transient, 1 for sessions)", n)
	}
	transient(t, e, Request{Code: "1"}) // a refill is under way during Close
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.instance); n != 0 {
		t.Errorf("%d containers after Close, want 0", n)
	}
}

func TestPoolSession(t *testing.T) {
	e, cli := poolExec(t, 1, "json")
	res, id := persistent(t, e, "", Request{Owner: "o", Code: "import sys\nx = 'json' in sys.modules", Imports: imports("sys", 1)})
	wantStatus(t, res, "ok")
	if e.spool().Hits() != 1 {
		t.Fatalf("the new session did not start from the pool")
	}
	if n := dockertest.Ours(t, cli, backend.LabelSession+"="+id); n != 1 {
		t.Errorf("%d containers labelled with the session id %s, want 1", n, id)
	}
	res, _ = persistent(t, e, id, Request{Owner: "o", Code: "x"})
	if res.Result == nil || *res.Result != "True" {
		t.Errorf("session state or preload missing: %v", res.Result)
	}
	// A tighter session gets a cold sandbox.
	persistent(t, e, "", Request{Owner: "o", Code: "1", Limits: Limits{Pids: 64}})
	if e.spool().Hits() != 1 {
		t.Error("a session with tighter limits was served from the pool")
	}
	if err := e.Cleanup(tctx(t, time.Minute), "o", id); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelSession+"="+id); n != 0 {
		t.Errorf("%d containers of the cleaned-up session, want 0", n)
	}
}

// waitIdle waits up to two minutes for the transient pool to hold at least
// want sandboxes of each class.
func waitIdle(t *testing.T, p *sandboxPool, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		have := p.IdleByClass()
		ok := true
		for c, n := range want {
			ok = ok && have[c] >= n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %v after two minutes, want at least %v", have, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A call goes to the sandbox warmed for what it imports: print(1) to the
// bare interpreter, pandas to the one with pandas imported.
func TestPoolRoutesByImports(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 2, MaxSize: 2, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2, Preload: []string{"numpy", "pandas"}}
	})
	waitIdle(t, e.pool(), map[string]int{"": 1, "numpy,pandas": 1})
	check := "import sys\n[m for m in ('numpy', 'pandas') if m in sys.modules]"
	res := transient(t, e, Request{Code: "print(1)\n" + check, Imports: imports("sys", 2)})
	wantStatus(t, res, "ok")
	if res.Stdout != "1\n" || res.Result == nil || *res.Result != "[]" {
		t.Errorf("print(1) ran in a sandbox with %v imported (stdout %q), want the bare one", res.Result, res.Stdout)
	}
	code := "import sys\nwarm = 'pandas' in sys.modules\nimport pandas as pd\nprint(pd.DataFrame({'v': [1, 2]}).v.sum(), warm)"
	res = transient(t, e, Request{Code: code, Imports: []analyze.Import{{Module: "sys", Line: 1}, {Module: "pandas", Alias: "pd", Line: 3}}})
	wantStatus(t, res, "ok")
	if res.Stdout != "3 True\n" {
		t.Errorf("pandas call printed %q, want %q (pandas imported before the call)", res.Stdout, "3 True\n")
	}
	if h := e.pool().Hits(); h != 2 {
		t.Errorf("%d of 2 calls served from the pool", h)
	}
}

// Bursts are served, the pool grows to the burst's size (up to
// pool.max_size) so the next burst is served warm, and nothing is left
// behind.
func TestPoolBursts(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 6, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2}
	})
	waitPoolFull(t, e)
	burst := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.Transient(tctx(t, 2*time.Minute), Request{Code: fmt.Sprintf("print(%d)", i)})
				switch {
				case err != nil:
					errs <- err
				case res.Status != "ok" || res.Stdout != fmt.Sprintf("%d\n", i):
					errs <- fmt.Errorf("call %d: status %s, stdout %q, error %+v", i, res.Status, res.Stdout, res.Error)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	burst(8) // more than the pool holds or may hold: cold starts race refills
	waitIdle(t, e.pool(), map[string]int{"": 6})
	if n := e.pool().IdleCount(); n > 6 {
		t.Errorf("pool holds %d sandboxes, over pool.max_size 6", n)
	}
	before := e.pool().Hits()
	burst(6)
	if got := e.pool().Hits() - before; got != 6 {
		t.Errorf("%d of a burst of 6 served from the grown pool, want 6", got)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.instance); n != 0 {
		t.Errorf("%d containers after Close, want 0", n)
	}
}

// A call that misses and is cancelled while starting leaves nothing behind:
// its cold start joins the pool and Close removes it.
func TestPoolMissCancelled(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 1, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1}
	})
	waitPoolFull(t, e)
	transient(t, e, Request{Code: "1"}) // empties the pool
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Transient(ctx, Request{Code: "1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: err = %v, want context.Canceled", err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.instance); n != 0 {
		t.Errorf("%d containers after Close, want 0", n)
	}
}

// TestPoolArmsWorkers: a pooled sandbox's spare worker installs the guard
// (capabilities and module rules) of the pool's latest call before the
// next call comes; a call with another guard gets a fresh worker with its
// own, silently, and never runs under the armed one.
func TestPoolArmsWorkers(t *testing.T) {
	e, _ := poolExec(t, 1)
	deny := Request{Code: "import os\nos.system('true')", Capabilities: denyAll, Modules: ModuleRules{Blocked: []string{"subprocess"}}}
	deny.Imports = gated(t, deny.Code)
	allow := Request{Code: "import subprocess\nprint(subprocess.run(['true']).returncode)", Capabilities: &Capabilities{Processes: true}}
	allow.Imports = gated(t, allow.Code)
	denied := func(res *Result) {
		t.Helper()
		wantStatus(t, res, "error")
		if !strings.Contains(res.Error.Message, "policy.capabilities.processes") {
			t.Errorf("processes denied: %s, want the policy's refusal", res.Error.Message)
		}
	}
	allowed := func(res *Result) {
		t.Helper()
		wantStatus(t, res, "ok")
		if res.Stdout != "0\n" || res.Stderr != "" || res.StateLost {
			t.Errorf("processes allowed: stdout %q, stderr %q, state lost %v; want 0 and nothing else", res.Stdout, res.Stderr, res.StateLost)
		}
	}
	steps := []struct {
		name  string
		req   Request
		check func(*Result)
		armed bool // the pool's sandbox was armed with this call's guard
	}{
		{"first call (pool made before any call)", deny, denied, false},
		{"same guard", deny, denied, true},
		{"processes allowed after an armed deny", allow, allowed, false},
		{"same guard again", allow, allowed, true},
		{"processes denied after an armed allow", deny, denied, false},
	}
	for _, s := range steps {
		waitPoolFull(t, e)
		hits, armed := e.pool().Hits(), e.armed.Load()
		res := transient(t, e, s.req)
		s.check(res)
		if e.pool().Hits() != hits+1 {
			t.Fatalf("%s: not served from the pool", s.name)
		}
		if got := e.armed.Load() - armed; got != map[bool]int64{false: 0, true: 1}[s.armed] {
			t.Errorf("%s: armed runs +%d, want armed %v", s.name, got, s.armed)
		}
	}
	// A run denied a blocked module under an armed worker too.
	waitPoolFull(t, e)
	code := "import subprocess"
	res := transient(t, e, Request{Code: code, Imports: gated(t, code), Capabilities: denyAll, Modules: ModuleRules{Blocked: []string{"subprocess"}}})
	if res.Status == "ok" {
		t.Errorf("import of a blocked module ran under an armed worker: %+v", res)
	}
}

// The pool's first sandbox gives the executor the runner's compiled code;
// the sandboxes made after it load that code instead of compiling the
// source, and behave the same: a user error's traceback shows user frames
// only, and the import guard (which tells the runner's frames by their
// file name) still refuses a blocked module.
func TestPoolHandsOutRunnerCode(t *testing.T) {
	e, _ := poolExec(t, 2)
	deadline := time.Now().Add(time.Minute)
	for !hasCode(e) {
		if time.Now().After(deadline) {
			t.Fatalf("no runner code after a minute (asked %d times)", e.runner.Asks())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 3 { // the sandboxes made before the code was there are used up
		wantStatus(t, transient(t, e, Request{Code: "print(1)"}), "ok")
	}
	waitPoolFull(t, e)
	loaded := e.Stats().RunnersLoaded
	if loaded < 2 {
		t.Fatalf("%d sandboxes loaded the runner's code (%d compiled it), want at least the 2 refills", loaded, e.Stats().RunnersCompiled)
	}
	res := transient(t, e, Request{Code: "def f(x):\n    return 1 / x\n\nf(0)\n"})
	wantStatus(t, res, "error")
	if res.Error == nil || res.Error.Type != "ZeroDivisionError" || res.Error.Line != 2 ||
		!strings.Contains(res.Error.Traceback, "line 2, in f") || strings.Contains(res.Error.Traceback, "pdm-runner") {
		t.Errorf("error from a sandbox that loaded the runner: %+v", res.Error)
	}
	code := "import importlib\nimportlib.import_module('socket')\n"
	res = transient(t, e, Request{Code: code, Imports: gated(t, code), Modules: ModuleRules{Blocked: []string{"socket"}}})
	if res.Status == "ok" || res.Error == nil || !strings.Contains(res.Error.Message, "socket") {
		t.Errorf("a blocked module imported in a sandbox that loaded the runner: %+v", res)
	}
	if e.pool().Hits() < 4 {
		t.Errorf("%d calls served from the pool, want the sandboxes under test to be pooled ones", e.pool().Hits())
	}
}

// A frozen pooled sandbox (docker pause) is never handed a call: it does
// not answer the ping, is removed, and the call runs in the next pooled
// sandbox, or in a cold one when every pooled one is frozen, instead of
// spending its time limit and being reported as the code's timeout.
func TestPoolRetiresFrozenSandbox(t *testing.T) {
	e, cli := poolExec(t, 2)
	ctx := tctx(t, 5*time.Minute)
	var frozen []string
	t.Cleanup(func() { // so that Close can remove them if the test fails
		for _, id := range frozen {
			cli.Unpause(context.Background(), id)
		}
	})
	freeze := func(all bool) {
		t.Helper()
		idle, next := e.pool().Idle("")
		var ids []string
		for i, sb := range idle {
			if all || i == next {
				ids = append(ids, sb.id)
			}
		}
		for _, id := range ids {
			if err := cli.Pause(ctx, id); err != nil {
				t.Fatalf("pause %s: %v", id, err)
			}
			frozen = append(frozen, id)
		}
	}
	run := func() {
		t.Helper()
		res := transient(t, e, Request{Code: "2+2", Limits: Limits{Timeout: 5 * time.Second}})
		wantStatus(t, res, "ok")
		if res.Result == nil || *res.Result != "4" {
			t.Errorf("2+2 = %v, want 4", res.Result)
		}
	}

	freeze(false) // the sandbox the call would get
	hits := e.pool().Hits()
	run()
	if got := e.pool().Hits() - hits; got != 1 {
		t.Errorf("%d calls served from the pool, want 1: the other pooled sandbox", got)
	}

	waitPoolFull(t, e)
	freeze(true) // the call gets a refill made meanwhile, or a cold sandbox
	run()
	for _, id := range frozen {
		if cli.Exists(ctx, id) {
			t.Errorf("the frozen sandbox %.12s is still there", id)
		}
	}
}
