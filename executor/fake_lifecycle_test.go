package executor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// A backend that cannot be reached fails calls with ErrDockerUnavailable,
// transient calls and new sessions alike, and once it is back calls run
// again with nothing to restart. TestDockerGoesAwayAndComesBack (in
// executor/docker) holds the same with the real daemon behind a proxy.
func TestFakeBackendGoesAwayAndComesBack(t *testing.T) {
	fb := fake.New()
	var down atomic.Bool
	fb.CreateHook = func(backend.Spec) error {
		if down.Load() {
			return fmt.Errorf("create sandbox: %w: connection refused", backend.ErrUnavailable)
		}
		return nil
	}
	e := newFakeOn(t, fb, nil)
	ctx := tctx(t, time.Minute)
	calls := map[string]func() error{
		"transient": func() error { _, err := e.Transient(ctx, Request{Code: "print 1"}); return err },
		"new session": func() error {
			_, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "print 1"})
			if err == nil {
				err = e.Cleanup(ctx, "o", sid)
			}
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s with the backend up: %v", name, err)
		}
		down.Store(true)
		if err := call(); !errors.Is(err, ErrDockerUnavailable) {
			t.Errorf("%s while the backend is gone: %v, want ErrDockerUnavailable", name, err)
		}
		down.Store(false)
		if err := call(); err != nil {
			t.Errorf("%s after the backend came back: %v", name, err)
		}
	}
}

// A pooled sandbox that dies while idle (removed behind the executor's
// back) is replaced, and no call is handed the dead one.
func TestFakePoolReplacesLostSandbox(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 2, MaxSize: 2, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1, Reuse: config.ReuseNever}
	})
	eventually(t, "the pool fills", func() bool { return e.pool().IdleCount() == 2 })
	idle, _ := e.pool().Idle("")
	victim := idle[0].id
	if err := fb.Remove(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lost sandbox is replaced", func() bool {
		idle, _ := e.pool().Idle("")
		ok := len(idle) == 2
		for _, sb := range idle {
			ok = ok && sb.id != victim
		}
		return ok
	})
	for i := range 2 {
		if res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print 1"}); err != nil || res.Status != "ok" {
			t.Errorf("call %d after the loss: %+v, %v", i, res, err)
		}
	}
}

// A frozen pooled sandbox (one that answers nothing, as a paused
// container) is never handed a call: it fails the ping and is removed, and
// the call runs in the next pooled sandbox, or in a refill or a cold one
// when every pooled one is frozen, instead of spending its time limit.
func TestFakePoolRetiresFrozenSandbox(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 2, MaxSize: 2, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1, Reuse: config.ReuseNever}
	})
	full := func() bool { return e.pool().IdleCount() == 2 }
	var frozen []string
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
			if !fb.Freeze(id) {
				t.Fatalf("freeze %s: no such sandbox", id)
			}
			frozen = append(frozen, id)
		}
	}
	run := func() {
		t.Helper()
		res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print 4", Limits: Limits{Timeout: 5 * time.Second}})
		if err != nil || res.Status != "ok" || res.Stdout != "4\n" {
			t.Fatalf("call: %+v, %v; want ok printing 4", res, err)
		}
	}
	eventually(t, "the pool fills", full)
	freeze(false) // the sandbox the call would get
	hits := e.pool().Hits()
	run()
	if got := e.pool().Hits() - hits; got != 1 {
		t.Errorf("%d calls served from the pool, want 1: the other pooled sandbox", got)
	}
	eventually(t, "the pool refills", full)
	freeze(true)
	run()
	eventually(t, "the frozen sandboxes are removed", func() bool {
		for _, id := range frozen {
			if fb.Has(id) {
				return false
			}
		}
		return true
	})
}

// A request that asks for more than the operator's config is refused with
// ErrLimitExceeded naming the config key, before any sandbox starts: for a
// transient call and for a new session alike.
func TestFakeLimitsAboveTheConfigRefusedBeforeAnySandbox(t *testing.T) {
	e, fb := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	calls := []struct {
		name string
		call func(Request) error
	}{
		{"transient", func(req Request) error { _, err := e.Transient(ctx, req); return err }},
		{"new session", func(req Request) error { _, _, err := e.Persistent(ctx, "", req); return err }},
	}
	for _, tc := range []struct {
		limits Limits
		key    string
	}{
		{Limits{Memory: 1 << 40}, "docker.memory_limit"},
		{Limits{CPUs: 1000}, "docker.cpu_limit"},
		{Limits{Pids: 1 << 30}, "docker.pids_limit"},
		{Limits{Timeout: 1000 * time.Hour}, "docker.timeout"},
	} {
		for _, c := range calls {
			err := c.call(Request{Owner: "o", Code: "print 1", Limits: tc.limits})
			if !errors.Is(err, ErrLimitExceeded) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("%s asking %+v: %v, want ErrLimitExceeded naming %s", c.name, tc.limits, err, tc.key)
			}
		}
	}
	if n := fb.Creates(); n != 0 {
		t.Errorf("%d sandboxes created for refused requests, want 0", n)
	}
	if got := e.Sessions("o"); len(got) != 0 {
		t.Errorf("sessions after refused requests: %+v, want none", got)
	}
}

// A request the executor cannot run as asked is refused with a
// structured error that says why, before any sandbox starts: code over
// limits.max_code_bytes, an unknown language, bash with state or without
// the processes capability, and state_keys where they do not apply.
func TestFakeRequestsRefusedBeforeAnySandbox(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) { c.Limits.MaxCodeBytes = 1000 })
	ctx := tctx(t, time.Minute)
	sid := fakeSession(t, e, "o", "set x 1")
	created := fb.Creates()
	many := make([]string, MaxStateKeys+1)
	for i := range many {
		many[i] = "k" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name    string
		req     Request
		session bool // a call in sid instead of a transient one
		is      error
		says    string
	}{
		{"code too large", Request{Code: strings.Repeat("x", 1001)}, false, ErrLimitExceeded, "limits.max_code_bytes"},
		{"code too large in a session", Request{Code: strings.Repeat("x", 1001)}, true, ErrLimitExceeded, "limits.max_code_bytes"},
		{"unknown language", Request{Language: "ruby", Code: "puts 1"}, false, ErrInvalidRequest, `language "ruby" is not supported`},
		{"bash with state", Request{Language: "bash", Code: "echo", State: []byte(`{"a": 1}`)}, false, ErrInvalidRequest, "state is for python code only"},
		{"bash without processes", Request{Language: "bash", Code: "echo", Capabilities: &Capabilities{}}, false, ErrInvalidRequest, "processes capability"},
		{"bash without processes in a session", Request{Language: "bash", Code: "echo", Capabilities: &Capabilities{}}, true, ErrInvalidRequest, "processes capability"},
		{"state_keys in a session", Request{Code: "print 1", StateKeys: []string{"x"}}, true, ErrInvalidRequest, "only for transient runs"},
		{"state_keys for bash", Request{Language: "bash", Code: "echo", StateKeys: []string{"x"}}, false, ErrInvalidRequest, "python code only"},
		{"too many state_keys", Request{Code: "print 1", StateKeys: many}, false, ErrInvalidRequest, "the maximum is " + strconv.Itoa(MaxStateKeys)},
		{"an empty state key", Request{Code: "print 1", StateKeys: []string{""}}, false, ErrInvalidRequest, "1 to 256 bytes"},
	} {
		tc.req.Owner = "o"
		var err error
		if tc.session {
			_, _, err = e.Persistent(ctx, sid, tc.req)
		} else {
			_, err = e.Transient(ctx, tc.req)
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.is, tc.says)
		}
	}
	if n := fb.Creates() - created; n != 0 {
		t.Errorf("%d sandboxes created for refused requests, want 0", n)
	}
	if res, _, err := e.Persistent(ctx, sid, Request{Owner: "o", Code: "get x"}); err != nil || res.Stdout != "1\n" || res.StateLost {
		t.Errorf("the session after the refusals: %+v, %v; want it untouched", res, err)
	}
}
