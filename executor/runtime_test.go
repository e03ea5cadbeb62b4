package executor

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// runtimesOf records the runtime of every sandbox fb creates.
func runtimesOf(fb *fake.Backend) func() []string {
	var mu sync.Mutex
	var got []string
	fb.CreateHook = func(spec backend.Spec) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, spec.Runtime)
		return nil
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestFakeRuntimePerCall: a call runs under the runtime its request names
// (the policy's decision), never in a pooled sandbox of another runtime;
// a runtime that is not configured is refused; a session keeps the runtime
// it started with and refuses a call naming another.
func TestFakeRuntimePerCall(t *testing.T) {
	fb := fake.New()
	runtimes := runtimesOf(fb)
	e := newFakeOn(t, fb, func(c *config.Config) {
		c.Docker.Runtimes = []string{"runsc"}
		c.Pool.Enabled = true
		c.Pool.Size = 1
		c.Pool.MaxSize = 1
	})
	ctx := tctx(t, time.Minute)
	pool := func() PoolStats {
		for _, p := range e.Stats().Pools {
			if p.Kind == backend.KindTransient {
				return p
			}
		}
		return PoolStats{}
	}
	eventually(t, "the pool fills", func() bool { return pool().Idle >= 1 })
	if got := runtimes(); slices.ContainsFunc(got, func(r string) bool { return r != "" }) {
		t.Fatalf("pooled sandboxes' runtimes %q, want the default runtime's only", got)
	}

	res, err := e.Transient(ctx, Request{Code: "print gvisor", Runtime: "runsc"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("runsc call: %+v, %v", res, err)
	}
	if p := pool(); p.Hits != 0 {
		t.Errorf("a runsc call was served from the pool of the default runtime (%+v)", p)
	}
	if got := runtimes(); !slices.Contains(got, "runsc") {
		t.Errorf("runtimes created %q: no runsc sandbox for the runsc call", got)
	}
	if res, err := e.Transient(ctx, Request{Code: "print default"}); err != nil || res.Status != "ok" {
		t.Fatalf("default call: %+v, %v", res, err)
	}
	if p := pool(); p.Hits != 1 {
		t.Errorf("a call of the default runtime missed the pool (%+v)", p)
	}

	if _, err := e.Transient(ctx, Request{Code: "print x", Runtime: "kata"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a runtime not configured: %v, want ErrInvalidRequest", err)
	}

	before := len(runtimes())
	res, id, err := e.Persistent(ctx, "", Request{Code: "set a 1", Runtime: "runsc"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("new runsc session: %+v, %v", res, err)
	}
	// The default pool may refill meanwhile (runtime ""): the session
	// itself made exactly one sandbox, a runsc one.
	if got := slices.DeleteFunc(runtimes()[before:], func(r string) bool { return r == "" }); len(got) != 1 || got[0] != "runsc" {
		t.Errorf("the runsc session's sandbox runtimes %q (the default pool's refills left out), want [runsc]", got)
	}
	if _, _, err := e.Persistent(ctx, id, Request{Code: "get a"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a call naming the default runtime on a runsc session: %v, want ErrInvalidRequest", err)
	}
	if res, _, err := e.Persistent(ctx, id, Request{Code: "get a", Runtime: "runsc"}); err != nil || res.Stdout != "1\n" {
		t.Errorf("a runsc call on the runsc session: %+v, %v", res, err)
	}
}
