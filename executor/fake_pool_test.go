package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// Pool routing and kept-sandbox bookkeeping on the fake backend. The
// real-daemon tests in pool_test.go and reuse_test.go hold what only a
// container shows (limits seen inside, nothing of a call left behind).

// fakePool is an executor on fb with a warm pool of size sandboxes (no
// preload) and pool.reuse as reuse, whose pools are full.
func fakePool(t *testing.T, fb *fake.Backend, size int, reuse string) *Executor {
	t.Helper()
	e := newFakeOn(t, fb, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: size, MaxSize: size, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1,
			Reuse: reuse, ReuseMaxCalls: 100, ReuseMaxAge: config.Duration(time.Hour), MaxPerPrincipal: 2, ReuseMaxIdle: 4}
	})
	eventually(t, "the pools fill", func() bool { return e.pool().idleCount() == size && e.spool().idleCount() == 1 })
	return e
}

// A pooled sandbox serves only calls whose limits are its own: a call
// asking for less memory, fewer processes or fewer CPUs starts cold; one
// that only changes the timeout (not fixed at the sandbox's start) takes
// the pooled one. The same holds for new sessions and their pool.
func TestFakePoolServesOnlyItsLimits(t *testing.T) {
	e := fakePool(t, fake.New(), 1, config.ReuseNever)
	cases := []struct {
		name   string
		limits Limits
		pooled bool
	}{
		{"tighter memory", Limits{Memory: 256 << 20}, false},
		{"fewer processes", Limits{Pids: 64}, false},
		{"fewer CPUs", Limits{CPUs: 0.25}, false},
		{"another timeout only", Limits{Timeout: 5 * time.Second}, true},
		{"the config's limits", Limits{}, true},
	}
	ctx := tctx(t, time.Minute)
	for _, tc := range cases {
		t.Run("transient/"+tc.name, func(t *testing.T) {
			eventually(t, "the pool refills", func() bool { return e.pool().idleCount() == 1 })
			before := e.pool().hits.Load()
			if res, err := e.Transient(ctx, Request{Code: "print 1", Limits: tc.limits}); err != nil || res.Status != "ok" {
				t.Fatalf("call: %+v, %v", res, err)
			}
			if got := e.pool().hits.Load() > before; got != tc.pooled {
				t.Errorf("served from the pool: %v, want %v", got, tc.pooled)
			}
		})
		t.Run("session/"+tc.name, func(t *testing.T) {
			eventually(t, "the session pool refills", func() bool { return e.spool().idleCount() == 1 })
			before := e.spool().hits.Load()
			res, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "set x 1", Limits: tc.limits})
			if err != nil || res.Status != "ok" {
				t.Fatalf("new session: %+v, %v", res, err)
			}
			if got := e.spool().hits.Load() > before; got != tc.pooled {
				t.Errorf("started from the pool: %v, want %v", got, tc.pooled)
			}
			if err := e.Cleanup(ctx, "o", sid); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A call that misses the pool (its refill is stuck) and is cancelled
// fails with context.Canceled and leaves nothing behind once the executor
// closes (newFakeOn checks that).
func TestFakePoolMissCancelled(t *testing.T) {
	e, _, gate := gatedPool(t)
	release := gate()
	defer close(release)
	emptyPool(t, tctx(t, time.Minute), e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Transient(ctx, Request{Code: "print 1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
}

// With pool.reuse never, or a request whose Reuse is never, no call runs
// in a sandbox kept from an earlier one.
func TestFakeReuseNever(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pool, call string
	}{
		{"pool.reuse never", config.ReuseNever, ""},
		{"the request's reuse never", config.ReusePrincipal, config.ReuseNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := fake.New()
			e := fakePool(t, fb, 1, tc.pool)
			ctx := tctx(t, time.Minute)
			for i := range 3 {
				if res, err := e.Transient(ctx, Request{Owner: "alice", Reuse: tc.call, Code: "print 1"}); err != nil || res.Status != "ok" {
					t.Fatalf("call %d: %+v, %v", i, res, err)
				}
			}
			if st := e.Stats().Reuse; st.Hits != 0 || st.Idle != 0 {
				t.Errorf("reuse stats %+v, want no kept sandbox and no call in one", st)
			}
			if n := fb.MaxRuns(); n != 1 {
				t.Errorf("a sandbox served %d calls, want 1", n)
			}
		})
	}
}

// A kept sandbox whose call timed out, by the runner's answer or by the
// server's own timer, is retired: the principal's next call runs in
// another.
func TestFakeReuseRetiresAfterTimeout(t *testing.T) {
	for _, code := range []string{"sleep 60000", "hang"} {
		t.Run(code, func(t *testing.T) {
			e := fakePool(t, fake.New(), 1, config.ReusePrincipal)
			ctx := tctx(t, time.Minute)
			if res, err := e.Transient(ctx, Request{Owner: "alice", Code: "print 1"}); err != nil || res.Status != "ok" {
				t.Fatalf("first call: %+v, %v", res, err)
			}
			eventually(t, "alice's sandbox is kept", func() bool { return e.Stats().Reuse.Idle == 1 })
			res, err := e.Transient(ctx, Request{Owner: "alice", Code: code, Limits: Limits{Timeout: 200 * time.Millisecond}})
			if err != nil || res.Status != "timeout" {
				t.Fatalf("%s: %+v, %v; want timeout", code, res, err)
			}
			if st := e.Stats().Reuse; st.Hits != 1 || st.Retired != 1 || st.Idle != 0 {
				t.Errorf("reuse stats %+v: want the timed-out call in the kept sandbox, which is retired", st)
			}
			if res, err := e.Transient(ctx, Request{Owner: "alice", Code: "print 1"}); err != nil || res.Status != "ok" {
				t.Fatalf("call after: %+v, %v", res, err)
			}
			if st := e.Stats().Reuse; st.Hits != 1 {
				t.Errorf("reuse stats %+v: the call after the timeout ran in a kept sandbox", st)
			}
		})
	}
}
