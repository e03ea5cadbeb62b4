package executor

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
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
	eventually(t, "the pools fill", func() bool { return e.pool().IdleCount() == size && e.spool().IdleCount() == 1 })
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
			eventually(t, "the pool refills", func() bool { return e.pool().IdleCount() == 1 })
			before := e.pool().Hits()
			if res, err := e.Transient(ctx, Request{Code: "print 1", Limits: tc.limits}); err != nil || res.Status != "ok" {
				t.Fatalf("call: %+v, %v", res, err)
			}
			if got := e.pool().Hits() > before; got != tc.pooled {
				t.Errorf("served from the pool: %v, want %v", got, tc.pooled)
			}
		})
		t.Run("session/"+tc.name, func(t *testing.T) {
			eventually(t, "the session pool refills", func() bool { return e.spool().IdleCount() == 1 })
			before := e.spool().Hits()
			res, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "set x 1", Limits: tc.limits})
			if err != nil || res.Status != "ok" {
				t.Fatalf("new session: %+v, %v", res, err)
			}
			if got := e.spool().Hits() > before; got != tc.pooled {
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
	defer release()
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

// A call goes to the pooled sandbox warmed for what it imports: one that
// imports nothing to the bare interpreter, a pandas call to the one with
// numpy and pandas preloaded. Refills are held back, so the pool's
// contents after each call say which sandbox it took.
func TestFakePoolRoutesByImports(t *testing.T) {
	fb := fake.New()
	var held atomic.Bool
	release := make(chan struct{})
	defer close(release)
	fb.CreateHook = func(backend.Spec) error {
		if held.Load() {
			<-release
		}
		return nil
	}
	e := newFakeOn(t, fb, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 2, MaxSize: 2, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2,
			Preload: []string{"numpy", "pandas"}, Reuse: config.ReuseNever}
	})
	idle := e.pool().IdleByClass
	eventually(t, "the pool holds a bare and a pandas sandbox", func() bool {
		return cmp.Equal(idle(), map[string]int{"": 1, "numpy,pandas": 1})
	})
	held.Store(true)
	ctx := tctx(t, 20*time.Second)
	for _, tc := range []struct {
		name    string
		imports []analyze.Import
		left    map[string]int
	}{
		{"no imports", nil, map[string]int{"numpy,pandas": 1}},
		{"pandas", []analyze.Import{{Module: "pandas", Alias: "pd", Line: 1}}, map[string]int{}},
	} {
		if res, err := e.Transient(ctx, Request{Code: "print 1", Imports: tc.imports}); err != nil || res.Status != "ok" {
			t.Fatalf("call with %s: %+v, %v", tc.name, res, err)
		}
		if diff := cmp.Diff(tc.left, idle(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("the pool after the call with %s (-want +got):\n%s", tc.name, diff)
		}
	}
	if h := e.pool().Hits(); h != 2 {
		t.Errorf("%d of 2 calls served from the pool", h)
	}
}

// A burst larger than the pool is served in full, and the pool grows to
// the burst's size, never past pool.max_size, so the next burst of that
// size is served warm.
func TestFakePoolGrowsWithBursts(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 6, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2, Reuse: config.ReuseNever}
	})
	eventually(t, "the pool fills", func() bool { return e.pool().IdleCount() == 1 })
	burst := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := strconv.Itoa(i) + "\n"
				if res, err := e.Transient(tctx(t, time.Minute), Request{Code: "sleep 50\nprint " + strconv.Itoa(i)}); err != nil || res.Status != "ok" || res.Stdout != want {
					t.Errorf("call %d of %d: %+v, %v", i, n, res, err)
				}
			}()
		}
		wg.Wait()
	}
	burst(8)
	eventually(t, "the pool grows to pool.max_size", func() bool { return e.pool().IdleCount() == 6 })
	before := e.pool().Hits()
	burst(6)
	if got := e.pool().Hits() - before; got != 6 {
		t.Errorf("%d of a burst of 6 served from the grown pool, want 6", got)
	}
	if n := e.pool().IdleCount(); n > 6 {
		t.Errorf("the pool holds %d sandboxes, over pool.max_size 6", n)
	}
}

// A session started from the pool has imported what the pool preloads:
// Imported counts it (by top-level name), as a later install's restart
// notice needs.
func TestFakeImportedCountsThePoolsPreload(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 1, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1,
			Preload: []string{"json.decoder"}, Reuse: config.ReuseNever}
	})
	eventually(t, "the session pool fills", func() bool { return e.spool().IdleCount() == 1 })
	sid := fakeSession(t, e, "alice", "set x 1")
	if e.spool().Hits() != 1 {
		t.Fatal("the session did not start from the pool")
	}
	if got := e.Imported("alice", sid, []string{"json", "csv"}); !slices.Equal(got, []string{"json"}) {
		t.Errorf("Imported in a pooled session = %v, want [json] (preloaded)", got)
	}
}

// Kept sandboxes have a bounded life: one serves at most
// pool.reuse_max_calls calls and lives at most pool.reuse_max_age, and
// at most pool.reuse_max_idle of all principals wait idle.
func TestFakeReuseBoundedLife(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*config.Pool)
		owners   []string // one call each, in turn
		maxRuns  int      // the most calls one sandbox served
		maxIdle  int      // idle kept sandboxes after the calls
		someHits bool     // some call ran in a kept sandbox
	}{
		{"reuse_max_calls", func(p *config.Pool) { p.ReuseMaxCalls = 3 },
			[]string{"alice", "alice", "alice", "alice", "alice", "alice", "alice"}, 3, 1, true},
		{"reuse_max_age", func(p *config.Pool) { p.ReuseMaxAge = config.Duration(time.Nanosecond) },
			[]string{"alice", "alice", "alice"}, 1, 0, false},
		{"reuse_max_idle", func(p *config.Pool) { p.ReuseMaxIdle = 1 },
			[]string{"alice", "bob", "carol"}, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := fake.New()
			e := newFakeOn(t, fb, func(c *config.Config) {
				c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 1, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1,
					Reuse: config.ReusePrincipal, ReuseMaxCalls: 100, ReuseMaxAge: config.Duration(time.Hour), MaxPerPrincipal: 1, ReuseMaxIdle: 16}
				tc.edit(&c.Pool)
			})
			ctx := tctx(t, time.Minute)
			for i, owner := range tc.owners {
				if res, err := e.Transient(ctx, Request{Owner: owner, Code: "print 1"}); err != nil || res.Status != "ok" {
					t.Fatalf("call %d of %s: %+v, %v", i, owner, res, err)
				}
				// Each call's sandbox is reset for its principal, or removed,
				// before the next call comes.
				eventually(t, "the call's sandbox is reset or removed", func() bool {
					st := e.Stats().Reuse
					return st.Resets+st.ResetFailures+st.Retired+st.Evicted >= int64(i+1)
				})
			}
			if n := fb.MaxRuns(); n != tc.maxRuns {
				t.Errorf("a sandbox served %d calls at most, want %d", n, tc.maxRuns)
			}
			if st := e.Stats().Reuse; st.Idle > tc.maxIdle || (st.Hits > 0) != tc.someHits {
				t.Errorf("reuse stats %+v: want at most %d idle, calls in kept sandboxes %v", st, tc.maxIdle, tc.someHits)
			}
		})
	}
}

// A call whose principal's kept sandbox is being reset takes a started
// sandbox waiting in the pool (the principal holding fewer than
// pool.max_per_principal) instead of waiting for the reset: back-to-back
// calls then alternate between two kept sandboxes, each reset while the
// other serves. Were the call to wait, the reset is let through at once,
// so the call would run in the sandbox it waited for.
func TestFakeReuseTakesThePoolWhileResetting(t *testing.T) {
	fb := fake.New()
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	fb.ResetHold = hold
	e := fakePool(t, fb, 2, config.ReusePrincipal) // max_per_principal 2
	ctx := tctx(t, time.Minute)
	if res, err := e.Transient(ctx, Request{Owner: "alice", Code: "print 1"}); err != nil || res.Status != "ok" {
		t.Fatalf("first call: %+v, %v", res, err)
	}
	eventually(t, "alice's sandbox is being reset", func() bool {
		return e.warm.Resetting("alice") == 1
	})
	eventually(t, "the pool refills", func() bool { return e.pool().IdleCount() == 2 })
	poolHits, keptHits := e.pool().Hits(), e.warm.Stats().Hits
	done := make(chan error, 1)
	go func() {
		res, err := e.Transient(ctx, Request{Owner: "alice", Code: "print 2"})
		if err == nil && res.Status != "ok" {
			err = errors.New("status " + res.Status)
		}
		done <- err
	}()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-time.After(time.Millisecond):
			if e.warm.Waiting("alice") > 0 {
				release() // the call waits for the reset: let it have the sandbox
			}
		}
	}
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if got := e.pool().Hits() - poolHits; got != 1 {
		t.Errorf("the second call took %d pooled sandboxes, want 1", got)
	}
	if got := e.warm.Stats().Hits - keptHits; got != 0 {
		t.Errorf("the second call ran in alice's sandbox being reset (%d kept hits), want the pool's", got)
	}
	release()
	eventually(t, "alice keeps both sandboxes", func() bool { return e.Stats().Reuse.Idle == 2 })
}

// A call that waited for its principal's sandbox being reset in vain and
// starts a fresh one takes its own when that comes back first: on a full
// node (here, no transient sandbox can be created) it would otherwise
// wait for a start that never comes while its own sandbox waits idle.
func TestFakeReuseTakesItsOwnBackDuringAStart(t *testing.T) {
	fb := fake.New()
	var full atomic.Bool
	blocked := new(atomic.Int32)
	room := make(chan struct{})
	hold := make(chan struct{})
	var roomOnce, holdOnce sync.Once
	makeRoom := func() { roomOnce.Do(func() { close(room) }) }
	endResets := func() { holdOnce.Do(func() { close(hold) }) }
	fb.CreateHook = func(spec backend.Spec) error {
		if full.Load() && spec.Labels[backend.LabelKind] == backend.KindTransient {
			blocked.Add(1)
			<-room
		}
		return nil
	}
	fb.ResetHold = hold
	e := fakePool(t, fb, 1, config.ReusePrincipal) // max_per_principal 2
	t.Cleanup(makeRoom)                            // before Close
	t.Cleanup(endResets)
	full.Store(true)
	ctx := tctx(t, time.Minute)
	if res, err := e.Transient(ctx, Request{Owner: "alice", Code: "print 1"}); err != nil || res.Status != "ok" {
		t.Fatalf("first call: %+v, %v", res, err)
	}
	eventually(t, "alice's sandbox is being reset and the pool's refill cannot start", func() bool {
		return e.warm.Resetting("alice") == 1 && blocked.Load() == 1
	})
	hits := e.warm.Stats().Hits
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		res, err := e.Transient(cctx, Request{Owner: "alice", Code: "print 2"})
		if err == nil && (res.Status != "ok" || res.Stdout != "2\n") {
			err = errors.New("status " + res.Status + ", stdout " + strconv.Quote(res.Stdout))
		}
		done <- err
	}()
	// The call's wait for the reset ends and its own start is stuck too.
	eventually(t, "the second call starts a sandbox", func() bool { return blocked.Load() == 2 })
	endResets()
	if err := <-done; err != nil {
		t.Fatalf("second call, its own sandbox back from its reset while its start was stuck: %v", err)
	}
	if got := e.warm.Stats().Hits - hits; got != 1 {
		t.Errorf("the second call ran in %d kept sandboxes, want 1 (alice's, back from its reset)", got)
	}
	if n := fb.MaxRuns(); n != 2 {
		t.Errorf("a sandbox served %d calls at most, want 2", n)
	}
	makeRoom()
	// The cancelled start joins the pool; alice's sandbox is kept.
	eventually(t, "alice's sandbox is kept and the pool refills", func() bool {
		return e.Stats().Reuse.Idle == 1 && e.pool().IdleCount() == 1
	})
}
