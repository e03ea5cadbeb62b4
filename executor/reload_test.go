package executor

import (
	"errors"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// reloaded is e's configuration with edit applied, as a reload gives it.
func reloaded(t *testing.T, e *Executor, edit func(*Config)) {
	t.Helper()
	c := *e.config()
	edit(&c)
	if err := e.Reload(c); err != nil {
		t.Fatalf("Reload: %v", err)
	}
}

// TestFakeReloadRaisesTheMaximum: a raised docker.timeout applies to the
// next call, with or without a limit of its own, and a call under way
// keeps the limit it began with when the timeout is lowered.
func TestFakeReloadRaisesTheMaximum(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) { c.Docker.Timeout = config.Duration(300 * time.Millisecond) })
	ctx := tctx(t, time.Minute)
	_, err := e.Transient(ctx, Request{Code: "print x", Limits: Limits{Timeout: 2 * time.Second}})
	if !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("2 s under a 300 ms maximum: %v, want ErrLimitExceeded", err)
	}
	reloaded(t, e, func(c *Config) { c.Docker.Timeout = config.Duration(3 * time.Second) })
	res, err := e.Transient(ctx, Request{Code: "print x", Limits: Limits{Timeout: 2 * time.Second}})
	if err != nil || res.Status != "ok" {
		t.Fatalf("2 s after the maximum was raised to 3 s: %+v, %v", res, err)
	}
	res, err = e.Transient(ctx, Request{Code: "sleep 600\nprint done"})
	if err != nil || res.Status != "ok" || res.Stdout != "done\n" {
		t.Fatalf("600 ms with no limit of its own under the raised 3 s: %+v, %v", res, err)
	}

	// A call under way keeps its 3 s when the maximum drops to 300 ms.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := e.Transient(ctx, Request{Code: "sleep 800\nprint kept"})
		if err != nil || res.Status != "ok" || res.Stdout != "kept\n" {
			t.Errorf("a call that began under 3 s: %+v, %v, want ok", res, err)
		}
	}()
	eventually(t, "the call runs", func() bool { return e.calls.Load() == 1 })
	reloaded(t, e, func(c *Config) { c.Docker.Timeout = config.Duration(300 * time.Millisecond) })
	wg.Wait()
	res, err = e.Transient(ctx, Request{Code: "sleep 800\nprint late"})
	if err != nil || res.Status != "timeout" {
		t.Errorf("a call that began under 300 ms: %+v, %v, want timeout", res, err)
	}
}

// TestFakeReloadOutputCap: limits.max_output_bytes applies to the next call.
func TestFakeReloadOutputCap(t *testing.T) {
	e, _ := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	line := "print " + strings.Repeat("x", 3000)
	res, err := e.Transient(ctx, Request{Code: line})
	if err != nil || res.StdoutTruncated {
		t.Fatalf("3000 bytes under the default 64 KiB cap: truncated %v, %v", res.StdoutTruncated, err)
	}
	reloaded(t, e, func(c *Config) { c.Limits.MaxOutputBytes = 1000 })
	res, err = e.Transient(ctx, Request{Code: line})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || len(res.Stdout) > 1000+256 || res.StdoutBytes != 3001 {
		t.Errorf("3001 bytes under a 1000-byte cap: %d bytes shown, truncated %v, total %d", len(res.Stdout), res.StdoutTruncated, res.StdoutBytes)
	}
}

// TestFakeReloadPool: a new pool.size resizes the pool; new sandbox limits
// replace its sandboxes with ones of the new limits, and calls without
// limits of their own are served from it again.
func TestFakeReloadPool(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool.Enabled = true
		c.Pool.Size = 1
		c.Pool.Preload = nil
	})
	ctx := tctx(t, time.Minute)
	idle := func() int { return e.pool().IdleCount() }
	eventually(t, "the pool fills to 1", func() bool { return idle() == 1 })
	reloaded(t, e, func(c *Config) { c.Pool.Size = 3 })
	eventually(t, "the pool fills to the new size 3", func() bool { return idle() == 3 })
	if got := e.Stats().Pools[0].Size; got != 3 {
		t.Errorf("Stats: pool size %d, want 3", got)
	}

	reloaded(t, e, func(c *Config) { c.Docker.MemoryLimit = 256 << 20 })
	eventually(t, "the pool holds 3 sandboxes of 256 MiB and nothing else is left", func() bool {
		return idle() == 3 && fb.Live() == 3+1 // and the persistent pool's
	})
	for _, s := range fb.Specs() {
		if s.MemoryBytes != 256<<20 {
			t.Errorf("a sandbox alive after the reload has %d bytes of memory, want 256 MiB", s.MemoryBytes)
		}
	}
	hits := e.pool().Hits()
	res, err := e.Transient(ctx, Request{Code: "print pooled"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := e.pool().Hits() - hits; got != 1 {
		t.Errorf("a call without limits after the reload: %d pool hits, want 1", got)
	}

	reloaded(t, e, func(c *Config) { c.Pool.Enabled = false })
	eventually(t, "no pool and no sandbox left", func() bool { return e.pool() == nil && fb.Live() == 0 })
}

// TestFakeReloadSessionKeepsItsLimits: a session started before the
// memory limit was lowered goes on with the memory it started with.
func TestFakeReloadSessionKeepsItsLimits(t *testing.T) {
	e, fb := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := e.Persistent(ctx, "", Request{Code: "set a 1"})
	if err != nil {
		t.Fatal(err)
	}
	reloaded(t, e, func(c *Config) { c.Docker.MemoryLimit = 128 << 20 })
	res, _, err := e.Persistent(ctx, id, Request{Code: "get a"})
	if err != nil || res.Stdout != "1\n" {
		t.Fatalf("the session after the memory limit was lowered: %+v, %v", res, err)
	}
	for _, s := range fb.Specs() {
		if s.MemoryBytes != 512<<20 {
			t.Errorf("the session's sandbox has %d bytes of memory, want the 512 MiB it started with", s.MemoryBytes)
		}
	}
}

// TestFakeReloadRefusesRestartKeys: the sandbox's image and hardening do
// not change under running sandboxes: the whole reload is refused.
func TestFakeReloadRefusesRestartKeys(t *testing.T) {
	e, _ := newFake(t, nil)
	c := *e.config()
	c.Docker.Image = "other:1"
	c.Docker.ReadOnly = false
	c.Docker.Timeout = config.Duration(time.Minute)
	err := e.Reload(c)
	if err == nil || !strings.Contains(err.Error(), "docker.image, docker.read_only") || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Reload changing docker.image and read_only: %v, want an error naming both and saying restart", err)
	}
	if got := e.config().Docker.Timeout.D(); got != 30*time.Second {
		t.Errorf("a refused reload applied docker.timeout = %v", got)
	}
}

// TestPoolFollowsReload (real Docker): a lowered docker.memory_limit
// replaces the warm sandboxes with ones of the new limit, and a call
// without limits of its own is served from the pool and runs under it.
func TestPoolFollowsReload(t *testing.T) {
	e, cli := poolExec(t, 1)
	reloaded(t, e, func(c *Config) { c.Docker.MemoryLimit = 256 << 20 })
	ctx := tctx(t, 2*time.Minute)
	memories := func() []int64 {
		l, err := cli.Containers(ctx, false, backend.LabelInstance+"="+e.instance)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, c := range l {
			if c.Labels[backend.LabelKind] != backend.KindTransient && c.Labels[backend.LabelKind] != backend.KindPersistent {
				continue // network namespace holders
			}
			mem, err := cli.Memory(ctx, c.ID)
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, mem)
		}
		return out
	}
	eventually(t, "the warm sandboxes are all of 256 MiB", func() bool {
		m := memories()
		for _, v := range m {
			if v != 256<<20 {
				return false
			}
		}
		return len(m) == 2 && e.pool().IdleCount() == 1
	})
	before := e.pool().Hits()
	res := transient(t, e, Request{Code: "int(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read())"})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "268435456" {
		t.Errorf("memory limit seen inside after the reload = %v, want 268435456", res.Result)
	}
	if e.pool().Hits() != before+1 {
		t.Error("a call without limits after the reload was not served from the pool")
	}
}

// TestFakeReloadWhileKeptSandboxesReset: reloads while a principal's calls
// end and their kept sandboxes are reset and offered again. A reload holds
// the executor's lock while it flushes the kept sandboxes; the offer of a
// reset sandbox holds the kept sandboxes' lock and asked whether the
// executor was closing under the executor's lock: the two waited for each
// other for good (a CI run hung 42 minutes on it), and every later call,
// removal and Close with them.
func TestFakeReloadWhileKeptSandboxesReset(t *testing.T) {
	e := fakePool(t, fake.New(), 1, config.ReusePrincipal)
	ctx := tctx(t, time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		end := time.Now().Add(1500 * time.Millisecond)
		for _, owner := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					if res, err := e.Transient(ctx, Request{Owner: owner, Code: "print 1"}); err != nil || res.Status != "ok" {
						t.Errorf("%s's call: %+v, %v", owner, res, err)
						return
					}
				}
			}()
		}
		for i := 0; time.Now().Before(end); i++ {
			c := *e.config()
			c.Limits.MaxCodeBytes = config.Size(1<<20 + i%2) // any reload flushes the kept sandboxes
			if err := e.Reload(c); err != nil {
				t.Errorf("Reload: %v", err)
				break
			}
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		panic("calls and reloads still under way after 30 s: a deadlock (goroutines above)")
	}
	if st := e.Stats().Reuse; st.Hits == 0 {
		t.Errorf("reuse stats %+v: no call ran in a kept sandbox; the test did not reset any", st)
	}
}
