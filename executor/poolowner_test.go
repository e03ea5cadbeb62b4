package executor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The idle pool never holds more than pool.max_size sandboxes, even when
// refills land after cold starts that lost their race (or whose calls gave
// up) filled it: here two refills are held back while two cancelled calls'
// cold starts join the pool, then both refills land.
func TestFakePoolIdleCap(t *testing.T) {
	fb := fake.New()
	var block atomic.Int32 // the next creations to hold back
	release := make(chan struct{})
	fb.CreateHook = func(backend.Spec) error {
		if block.Add(-1) >= 0 {
			<-release
		}
		return nil
	}
	e := newFakeOn(t, fb, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 2, MaxSize: 2, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2}
	})
	eventually(t, "both pools fill", func() bool { return e.pool().IdleCount() == 2 && e.spool().IdleCount() == 1 })
	e.pool().SetTook(time.Hour, time.Millisecond) // misses start cold at once
	ctx := tctx(t, time.Minute)

	block.Store(2)
	for i := range 2 {
		if res, err := e.Transient(ctx, Request{Code: "print 1"}); err != nil || res.Stdout != "1\n" {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	eventually(t, "two refills are held back", func() bool {
		return e.pool().Creating() == 2
	})
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for range 2 {
		if _, err := e.Transient(gone, Request{Code: "print 1"}); err == nil {
			t.Fatal("a cancelled call ran")
		}
	}
	eventually(t, "the cancelled calls' cold starts join the pool", func() bool { return e.pool().IdleCount() == 2 })
	close(release)
	eventually(t, "the refills land", func() bool {
		return e.pool().Creating() == 0
	})
	time.Sleep(100 * time.Millisecond) // a fill pass after the refills
	if n := e.pool().IdleCount(); n > 2 {
		t.Errorf("the pool holds %d idle sandboxes, over pool.max_size 2", n)
	}
	eventually(t, "nothing but the pools' sandboxes is left", func() bool { return fb.Live() == e.pool().IdleCount()+e.spool().IdleCount() })
}

// Preload classes are learned per principal: the class learned from
// alice's imports is made for her and never handed to bob, who gets a
// sandbox of his own class or a cold one; the full pool then makes room
// for bob's class (within pool.max_size) without waiting for alice's to
// age out.
func TestFakePoolClassesPerPrincipal(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 1, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1}
	})
	eventually(t, "the pool fills", func() bool { return e.pool().IdleCount() == 1 })
	ctx := tctx(t, time.Minute)
	sympy := []analyze.Import{{Module: "sympy", Line: 1}}
	call := func(owner string, imps []analyze.Import) {
		t.Helper()
		if res, err := e.Transient(ctx, Request{Owner: owner, Code: "print 1", Imports: imps}); err != nil || res.Stdout != "1\n" {
			t.Fatalf("%s's call: %+v, %v", owner, res, err)
		}
	}
	classes := e.pool().IdleByClass
	call("alice", sympy)
	alices := poolplan.Owned("alice", "sympy")
	eventually(t, "the pool makes alice's class", func() bool { return classes()[alices] == 1 })

	hits := e.pool().Hits()
	for range 2 { // bob's class then outweighs alice's in the plan
		call("bob", sympy) // needs what alice's sandbox has
	}
	if got := e.pool().Hits(); got != hits {
		t.Errorf("bob was served %d time(s) from a pool that held only alice's class", got-hits)
	}
	eventually(t, "the pool holds a sandbox bob may have instead of alice's, within its cap", func() bool {
		c := classes()
		return c[alices] == 0 && c[""]+c[poolplan.Owned("bob", "sympy")] == 1
	})
	call("bob", sympy)
	if got := e.pool().Hits(); got != hits+1 {
		t.Errorf("bob's call once the pool had his sandbox: %d hits, want 1", got-hits)
	}
	if n := fb.MaxRuns(); n != 1 {
		t.Errorf("a sandbox served %d calls", n)
	}
}
