package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The tests in this file run the executor's own logic (pool, sessions,
// time limits, OOM, reaping, Close) on the in-process fake backend: no
// Docker, so they run under -short too. Their code is the fake runner's
// script language (package fake), not Python. The real-daemon tests in the
// other files hold the same behaviour end to end.

// newFake starts an executor on a fresh fake backend with the default
// config (pool off unless edit turns it on) and checks, when the test
// ends, that Close left no sandbox behind.
func newFake(t *testing.T, edit func(*config.Config)) (*Executor, *fake.Backend) {
	t.Helper()
	fb := fake.New()
	return newFakeOn(t, fb, edit), fb
}

// newFakeOn is newFake on fb, whose hooks are set already.
func newFakeOn(t *testing.T, fb *fake.Backend, edit func(*config.Config)) *Executor {
	t.Helper()
	cfg := config.Default()
	cfg.Pool.Enabled = false
	if edit != nil {
		edit(&cfg)
	}
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("NewWithBackend: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := fb.Live(); n != 0 {
			t.Errorf("%d sandbox(es) left after Close: %v", n, fb.Specs())
		}
	})
	return e
}

// eventually waits (generously: the machine may be loaded) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 20*time.Second, what, cond)
}

// eventuallyWithin is eventually with a bound of d.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after %s: %s", d, what)
		}
	}
}

func TestFakeTransientRunsOnceAndRemoves(t *testing.T) {
	e, fb := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	res, err := e.Transient(ctx, Request{Code: "print hello\nstderr warn"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" || res.Stdout != "hello\n" || res.Stderr != "warn\n" {
		t.Errorf("Transient = %+v, want ok with hello on stdout and warn on stderr", res)
	}
	eventually(t, "the transient sandbox is removed after its call", func() bool { return fb.Live() == 0 })
	if fb.Creates() != 1 {
		t.Errorf("%d sandboxes created for one cold call, want 1", fb.Creates())
	}
}

func TestFakeErrorCarriesLine(t *testing.T) {
	e, _ := newFake(t, nil)
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print a\nraise ValueError bad value"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "error" || res.Error == nil || res.Error.Type != "ValueError" || res.Error.Line != 2 || res.Stdout != "a\n" {
		t.Errorf("Transient = %+v (error %+v), want status error, ValueError on line 2, stdout kept", res, res.Error)
	}
}

// TestFakeTimeout: the runner answers a call past its limit with timeout;
// one that never answers is ended by the server's own timer, and its
// sandbox is killed and removed either way.
func TestFakeTimeout(t *testing.T) {
	e, fb := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	lim := Limits{Timeout: 100 * time.Millisecond}
	res, err := e.Transient(ctx, Request{Code: "sleep 60000", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "timeout" {
		t.Errorf("runner-side timeout: status %q (%+v), want timeout", res.Status, res.Error)
	}
	res, err = e.Transient(ctx, Request{Code: "hang", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "timeout" || res.Error == nil || !strings.Contains(res.Error.Message, "killed") {
		t.Errorf("a runner that never answers: %+v (error %+v), want timeout saying the sandbox was killed", res, res.Error)
	}
	eventually(t, "both sandboxes removed", func() bool { return fb.Live() == 0 })
}

func TestFakeOOM(t *testing.T) {
	e, fb := newFake(t, nil)
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print before\noom"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "oom" || res.Error == nil || res.Error.Type != "OutOfMemory" || !strings.Contains(res.Error.Message, "out of memory") {
		t.Errorf("OOM: %+v (error %+v), want status oom, OutOfMemory, saying so", res, res.Error)
	}
	eventually(t, "the OOM-killed sandbox is removed", func() bool { return fb.Live() == 0 })
}

func TestFakeCreateFailure(t *testing.T) {
	e, fb := newFake(t, nil)
	fb.CreateHook = func(backend.Spec) error {
		return errors.Join(errors.New("create sandbox"), backend.ErrImageMissing)
	}
	_, err := e.Transient(tctx(t, time.Minute), Request{Code: "print x"})
	if !errors.Is(err, ErrImageMissing) {
		t.Errorf("Transient with the image missing: %v, want ErrImageMissing", err)
	}
}

// TestFakeSession: globals live across calls; a timeout loses them and the
// next call says so; an OOM loses the sandbox, and the session goes on in
// a new one with state_lost; Cleanup removes it.
func TestFakeSession(t *testing.T) {
	e, fb := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	call := func(sid, code string) *Result {
		t.Helper()
		res, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: code, Limits: Limits{Timeout: 200 * time.Millisecond}})
		if err != nil {
			t.Fatalf("Persistent(%q): %v", code, err)
		}
		return res
	}
	sid := call("", "set x 1").SessionID
	if res := call(sid, "get x"); res.Stdout != "1\n" || res.StateLost {
		t.Errorf("second call = %+v, want x == 1 and no state lost", res)
	}
	if res := call(sid, "sleep 60000"); res.Status != "timeout" {
		t.Errorf("sleep past the limit: %+v, want timeout", res)
	}
	if res := call(sid, "get x"); res.Status != "error" || !res.StateLost {
		t.Errorf("after a timeout: %+v, want NameError with state_lost", res)
	}
	call(sid, "set y 2")
	if res := call(sid, "oom"); res.Status != "oom" || !res.StateLost {
		t.Errorf("OOM in a session: %+v, want oom with state_lost", res)
	}
	if res := call(sid, "get y"); res.Status != "error" || res.Error.Type != "NameError" {
		t.Errorf("after the OOM: %+v, want a fresh interpreter (NameError)", res)
	}
	if fb.Creates() != 2 {
		t.Errorf("%d sandboxes created, want 2 (the first, and one after the OOM)", fb.Creates())
	}
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "mallory", Code: "get y"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("another owner's call: %v, want ErrUnknownSession", err)
	}
	if err := e.Cleanup(ctx, "alice", sid); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session's sandbox is removed by Cleanup", func() bool { return fb.Live() == 0 })
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: "get y"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("after Cleanup: %v, want ErrUnknownSession", err)
	}
}

// TestFakeSessionSerializes: two calls on one session never overlap; the
// second waits for the first and says so.
func TestFakeSessionSerializes(t *testing.T) {
	e, _ := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	_, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "set n 0"})
	if err != nil {
		t.Fatal(err)
	}
	// The second call is made once the first is running (it then runs
	// for a second): it has to wait for it.
	running := make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		_, _, err := e.Persistent(ctx, sid, Request{Owner: "o", Code: "sleep 1000\nset n 1", Progress: func(m string) {
			if m == "running" {
				once.Do(func() { close(running) })
			}
		}})
		first <- err
	}()
	<-running
	var waited []string
	_, _, err = e.Persistent(ctx, sid, Request{Owner: "o", Code: "set n 2", Progress: func(m string) { waited = append(waited, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(waited, "|"), "waiting for the session") {
		t.Errorf("progress %q: want the second call to wait for the session's running call", waited)
	}
}

func TestFakeSessionIdleExpiry(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(200 * time.Millisecond) })
	ctx := tctx(t, time.Minute)
	_, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "set a 1"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle session's sandbox is reaped", func() bool { return fb.Live() == 0 })
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "o", Code: "get a"}); !errors.Is(err, ErrExpiredSession) {
		t.Errorf("after the idle TTL: %v, want ErrExpiredSession", err)
	}
}

// TestFakePoolSingleUse: with a warm pool and pool.reuse never every
// transient call gets a sandbox of its own, and the pool refills.
func TestFakePoolSingleUse(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool.Enabled = true
		c.Pool.Size = 2
		c.Pool.Reuse = config.ReuseNever
	})
	ctx := tctx(t, time.Minute)
	idle := func() int {
		for _, p := range e.Stats().Pools {
			if p.Kind == backend.KindTransient {
				return p.Idle
			}
		}
		return 0
	}
	eventually(t, "the pool fills to its size", func() bool { return idle() >= 2 })
	const calls = 6
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Transient(ctx, Request{Code: "print " + strconv.Itoa(i)})
			if err != nil || res.Status != "ok" || res.Stdout != strconv.Itoa(i)+"\n" {
				t.Errorf("call %d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	if n := fb.MaxRuns(); n != 1 {
		t.Errorf("a sandbox served %d calls, want every sandbox to serve exactly one", n)
	}
	if fb.Creates() < calls {
		t.Errorf("%d sandboxes created for %d calls", fb.Creates(), calls)
	}
	eventually(t, "the pool refills after the burst", func() bool { return idle() >= 2 })
}

// TestFakeReapsLeftovers: a new executor removes sandboxes whose server is
// gone and keeps those of live servers (this process's live executors,
// another machine's server).
func TestFakeReapsLeftovers(t *testing.T) {
	fb := fake.New()
	host := e0Host(t)
	spec := func(kind, pid, h, instance string) backend.Spec {
		return sandboxSpec(config.Default().Docker, Limits{}, sandboxMeta{Kind: kind, PID: atoi(pid), Host: h, Instance: instance, Created: time.Now()})
	}
	crashed := fb.Adopt(spec(backend.KindTransient, "999999", host, "gone"))
	foreign := fb.Adopt(spec(backend.KindTransient, "1", "elsewhere", "x"))
	cfg := config.Default()
	cfg.Pool.Enabled = false
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "o", Code: "set k v"})
	if err != nil {
		t.Fatal(err)
	}
	// A second executor's start must leave the first one's session alone.
	e2, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if fb.Has(crashed) || !fb.Has(foreign) {
		t.Errorf("after New: crashed leftover present %v (want removed), foreign present %v (want kept)", fb.Has(crashed), fb.Has(foreign))
	}
	if res, _, err := e.Persistent(tctx(t, time.Minute), live.SessionID, Request{Owner: "o", Code: "get k"}); err != nil || res.Stdout != "v\n" {
		t.Errorf("a live executor's session after another New: %+v, %v", res, err)
	}
	for _, x := range []*Executor{e2, e} {
		if err := x.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
	if fb.Live() != 1 || !fb.Has(foreign) {
		t.Errorf("after Close: %d sandboxes, want only the foreign one", fb.Live())
	}
}

func e0Host(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestFakeCloseEndsEverything: Close removes idle pooled sandboxes, live
// sessions and running calls' sandboxes; later calls fail with ErrClosed.
func TestFakeCloseEndsEverything(t *testing.T) {
	cfg := config.Default()
	cfg.Pool.Enabled, cfg.Pool.Size = true, 2
	fb := fake.New()
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t, time.Minute)
	_, sid, err := e.Persistent(ctx, "", Request{Owner: "o", Code: "set a 1"})
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan error, 1)
	go func() {
		_, err := e.Transient(ctx, Request{Code: "sleep 60000", Limits: Limits{Timeout: 30 * time.Second}})
		running <- err
	}()
	eventually(t, "a call is running", func() bool { return e.calls.Load() >= 1 })
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fb.Live(); n != 0 {
		t.Errorf("%d sandboxes left after Close, want 0", n)
	}
	<-running
	if _, err := e.Transient(ctx, Request{Code: "print x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Transient after Close: %v, want ErrClosed", err)
	}
	for _, id := range []string{sid, ""} {
		if _, _, err := e.Persistent(ctx, id, Request{Owner: "o", Code: "print a"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Persistent(%q) after Close: %v, want ErrClosed", id, err)
		}
	}
	if got := e.Sessions("o"); len(got) != 0 {
		t.Errorf("Sessions after Close: %v, want none", got)
	}
	if n := e.Stats().Sessions; n != 0 {
		t.Errorf("Stats().Sessions after Close: %d, want 0", n)
	}
}

// strays adopts, in fc, a sandbox of kind labelled as instance's own that
// instance never tracked (what a start that lost the backend half way and
// could not clean up leaves).
func stray(fc fake.Cluster, kind, instance string) string {
	return fc.Adopt(sandboxSpec(config.Default().Docker, Limits{}, sandboxMeta{Kind: kind, PID: 1, Host: "h", Instance: instance, Created: time.Now()}))
}

// TestFakeSweepsStrays: a server's reaper removes a sandbox labelled with
// its instance that it does not track, once older than strayAge (a start
// that could still own it has ended by then), and leaves younger ones,
// its sessions' sandboxes (their records name them), the backend's own
// helpers and other servers' sandboxes.
func TestFakeSweepsStrays(t *testing.T) {
	oldEvery, oldAge := sweepEvery, strayAge
	sweepEvery, strayAge = 50*time.Millisecond, 500*time.Millisecond
	t.Cleanup(func() { sweepEvery, strayAge = oldEvery, oldAge })
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	if _, _, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x kept"}); err != nil {
		t.Fatal(err)
	}
	recs, err := fc.Sessions(ctx, "alice")
	if err != nil || len(recs) != 1 {
		t.Fatalf("session records: %v, %v", recs, err)
	}
	fc.SetAlive("elsewhere", true)
	lost := stray(fc, backend.KindTransient, es[0].instance)
	helper := stray(fc, backend.KindNetwork, es[0].instance)
	foreign := stray(fc, backend.KindTransient, "elsewhere")
	if n, err := es[0].sweep().Strays(ctx, time.Hour, sandboxKinds...); err != nil || n != 0 || !fc.Has(lost) {
		t.Fatalf("Strays(1h) = %d, %v; stray present %v: want a young stray kept", n, err, fc.Has(lost))
	}
	eventually(t, "the reaper removes the stray once older than strayAge", func() bool { return !fc.Has(lost) })
	for what, id := range map[string]string{"the session's sandbox": recs[0].Sandbox, "the backend's helper": helper, "another server's sandbox": foreign} {
		if !fc.Has(id) {
			t.Errorf("%s was removed by the stray sweep", what)
		}
	}
}

// TestFakeCloseRemovesStrays: Close removes every sandbox labelled with
// the server's instance that it does not track, however young, and keeps
// the sandboxes of sessions other servers go on with.
func TestFakeCloseRemovesStrays(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	if _, _, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x kept"}); err != nil {
		t.Fatal(err)
	}
	lost := []string{stray(fc, backend.KindPersistent, es[0].instance), stray(fc, backend.KindTransient, es[0].instance), stray(fc, KindInstaller, es[0].instance)}
	other := stray(fc, backend.KindTransient, es[1].instance)
	if err := es[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range lost {
		if fc.Has(id) {
			t.Errorf("stray %s (%s) is still there after Close", id, kind(fc, ctx, id))
		}
	}
	if !fc.Has(other) {
		t.Error("Close removed a sandbox of another server")
	}
	recs, err := fc.Sessions(ctx, "alice")
	if err != nil || len(recs) != 1 || !fc.Has(recs[0].Sandbox) {
		t.Fatalf("the session after Close: records %v, %v; want its sandbox kept for the other replica", recs, err)
	}
}

// kind is the kind label of fc's sandbox id ("" when gone).
func kind(fc fake.Cluster, ctx context.Context, id string) string {
	list, _ := fc.List(ctx, nil)
	for _, c := range list {
		if c.ID == id {
			return c.Labels[backend.LabelKind]
		}
	}
	return ""
}

// TestFakeReapsDeadReplicas: on a backend with liveness records a server
// removes the sandboxes of a server whose record is gone, wherever that
// server ran, at its start and, for one that dies later, in its periodic
// sweep; it keeps those of servers whose record is fresh; it holds its own
// record while open and deletes it on Close.
func TestFakeReapsDeadReplicas(t *testing.T) {
	old := sweepEvery
	sweepEvery = 50 * time.Millisecond
	t.Cleanup(func() { sweepEvery = old })
	fb := fake.New()
	lb := fake.Liveness{Backend: fb}
	spec := func(instance string) backend.Spec {
		return sandboxSpec(config.Default().Docker, Limits{}, sandboxMeta{Kind: backend.KindPersistent, PID: 1, Host: "replica-" + instance, Instance: instance, Created: time.Now()})
	}
	fb.SetAlive("replica2", true)
	dead := fb.Adopt(spec("replica1"))
	alive := fb.Adopt(spec("replica2"))
	cfg := config.Default()
	cfg.Pool.Enabled = false
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), lb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if fb.Has(dead) || !fb.Has(alive) {
		t.Fatalf("after New: dead replica's sandbox present %v (want removed), live replica's present %v (want kept)", fb.Has(dead), fb.Has(alive))
	}
	if ok, _ := lb.Alive(context.Background(), e.instance); !ok {
		t.Error("an open executor holds no liveness record")
	}
	own, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "o", Code: "set k v"})
	if err != nil {
		t.Fatal(err)
	}
	fb.SetAlive("replica2", false) // replica2 dies
	deadline := time.Now().Add(10 * time.Second)
	for fb.Has(alive) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if fb.Has(alive) {
		t.Error("the sandbox of a replica that died later is still there after 10 s of sweeps")
	}
	if res, _, err := e.Persistent(tctx(t, time.Minute), own.SessionID, Request{Owner: "o", Code: "get k"}); err != nil || res.Stdout != "v\n" {
		t.Errorf("the sweeping executor's own session after sweeps: %+v, %v", res, err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lb.Alive(context.Background(), e.instance); ok {
		t.Error("a closed executor's liveness record is still there")
	}
	if fb.Live() != 0 {
		t.Errorf("after Close: %d sandboxes left", fb.Live())
	}
}

// gatedPool is an executor whose transient pool holds one sandbox, made one
// at a time, on a fake backend whose next creation of a transient sandbox
// after gate() blocks until the returned release is called (or the test
// ends: a failed test must not leave Close waiting for a creation held
// at the gate). Only transient creations are gated: the pool of sandboxes
// for new sessions fills on its own, and a creation of its that reached
// the gate first would be the one held, leaving the transient refill free.
func gatedPool(t *testing.T) (e *Executor, fb *fake.Backend, gate func() (release func())) {
	t.Helper()
	fb = fake.New()
	var next atomic.Pointer[chan struct{}]
	stuck := new(atomic.Int32)
	fb.CreateHook = func(spec backend.Spec) error {
		if spec.Labels[backend.LabelKind] != backend.KindTransient {
			return nil
		}
		if g := next.Swap(nil); g != nil {
			stuck.Add(1)
			<-*g
		}
		return nil
	}
	e = newFakeOn(t, fb, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: 1, MaxSize: 1, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1}
	})
	eventually(t, "both pools fill", func() bool { return e.pool().IdleCount() == 1 && e.spool().IdleCount() == 1 })
	gatesEntered.Store(e, stuck)
	t.Cleanup(func() { gatesEntered.Delete(e) })
	gate = func() func() {
		g := make(chan struct{})
		next.Store(&g)
		var once sync.Once
		release := func() { once.Do(func() { close(g) }) }
		t.Cleanup(release) // before newFakeOn's Close, which runs later
		return release
	}
	return e, fb, gate
}

// gatesEntered counts, per executor of gatedPool, the creations stuck at
// its gate.
var gatesEntered sync.Map // *Executor -> *atomic.Int32

// emptyPool has one call take the pool's sandbox and waits until the
// refill that replaces it is under way and, if a gate is set, stuck at it
// (not merely counted in flight: a cold start that reached the gate first
// would be the one held, and the refill would serve the call).
func emptyPool(t *testing.T, ctx context.Context, e *Executor) {
	t.Helper()
	if res, err := e.Transient(ctx, Request{Code: "print 1"}); err != nil || res.Stdout != "1\n" {
		t.Fatalf("first call: %+v, %v", res, err)
	}
	eventually(t, "the refill is under way", func() bool { return e.pool().Creating() == 1 })
	if v, ok := gatesEntered.Load(e); ok {
		eventually(t, "the refill is stuck at the gate", func() bool { return v.(*atomic.Int32).Load() == 1 })
	}
}

// coldTook is the cold start's time the pool learned.
func coldTook(p *sandboxPool) time.Duration {
	_, cold := p.Took()
	return cold
}

// A call that misses while a refill is expected sooner than a cold start
// takes that refill and starts no cold sandbox.
func TestFakeMissWaitsForNearRefill(t *testing.T) {
	e, _, gate := gatedPool(t)
	ctx := tctx(t, time.Minute)
	release := gate()
	e.pool().SetTook(time.Second, time.Hour) // a refill is due well before a cold start
	emptyPool(t, ctx, e)
	go func() { time.Sleep(200 * time.Millisecond); release() }()
	if res, err := e.Transient(ctx, Request{Code: "print 2"}); err != nil || res.Stdout != "2\n" {
		t.Fatalf("second call: %+v, %v", res, err)
	}
	if got := coldTook(e.pool()); got != time.Hour {
		t.Errorf("a cold start ran (its time %s was learned): the call should have taken the refill", got)
	}
}

// The call starts cold and is served while the pool's refill is stuck:
// when that refill is late (past its expected time), and when the call
// needs a preloadable module even though the refill is expected sooner (the
// cold sandbox lacks the module either way, and the refill stocks the pool
// for the next call).
func TestFakeMissStartsColdWhileRefillStuck(t *testing.T) {
	for _, tc := range []struct {
		name         string
		refill, cold time.Duration
		req          Request
	}{
		{"refill late", 50 * time.Millisecond, time.Second, Request{Code: "print 2"}},
		// A bare call would hold for an hour.
		{"needs modules", time.Second, time.Hour, Request{Code: "print 2", Imports: []analyze.Import{{Module: "pandas"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, gate := gatedPool(t)
			ctx := tctx(t, time.Minute)
			release := gate()
			defer release()
			e.pool().SetTook(tc.refill, tc.cold)
			emptyPool(t, ctx, e)
			if res, err := e.Transient(ctx, tc.req); err != nil || res.Stdout != "2\n" {
				t.Fatalf("second call: %+v, %v", res, err)
			}
			if got := coldTook(e.pool()); got == tc.cold {
				t.Error("the call was served while the refill was stuck, but no cold start's time was learned")
			}
		})
	}
}

// Close does not wait out a call's hold: the held call fails with
// ErrClosed at once.
func TestFakeCloseEndsHold(t *testing.T) {
	e, _, gate := gatedPool(t)
	ctx := tctx(t, time.Minute)
	release := gate()
	e.pool().SetTook(time.Hour, 2*time.Hour) // a refill due in an hour: hold that long
	emptyPool(t, ctx, e)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Transient(ctx, Request{Code: "print 2"})
		errc <- err
	}()
	eventually(t, "the second call waits", func() bool { return e.pool().Waiting() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- e.Close(context.Background()) }()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("held call during Close: err = %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Error("the held call did not end when the executor closed")
	}
	// Close also waits for the stuck refill: let it go.
	release()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A call that leaves the pool stocked holds back the refill it asks for
// until it has answered (its creation would share the CPUs with the call),
// at most the pool's hold; a call that empties the pool has it start at once.
func TestFakeRefillWaitsForTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size       int
		hold       time.Duration
		code       string
		beforeDone bool // the refill starts while the call still runs
	}{
		{"held until the answer", 2, time.Hour, "sleep 400", false},
		{"pool emptied", 1, time.Hour, "sleep 3000", true},
		{"held at most the hold", 2, 100 * time.Millisecond, "sleep 3000", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only the transient pool's creations count: the pool of
			// sandboxes for new sessions fills on its own, maybe later.
			fb := fake.New()
			var created sync.Mutex
			var kinds []string
			fb.CreateHook = func(spec backend.Spec) error {
				created.Lock()
				kinds = append(kinds, spec.Labels[backend.LabelKind])
				created.Unlock()
				return nil
			}
			transients := func(from int) (n int, all []string) {
				created.Lock()
				defer created.Unlock()
				for _, k := range kinds[from:] {
					if k == backend.KindTransient {
						n++
					}
				}
				return n, slices.Clone(kinds[from:])
			}
			e := newFakeOn(t, fb, func(c *config.Config) {
				c.Pool = config.Pool{Enabled: true, Size: tc.size, MaxSize: tc.size, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 1}
			})
			e.pool().SetHold(tc.hold)
			ctx := tctx(t, time.Minute)
			eventually(t, "the pool fills", func() bool { return e.pool().IdleCount() == tc.size })
			created.Lock()
			before := len(kinds)
			created.Unlock()
			hits := e.pool().Hits()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if res, err := e.Transient(ctx, Request{Code: tc.code}); err != nil || res.Status != "ok" {
					t.Errorf("call: %+v, %v", res, err)
				}
			}()
			if tc.beforeDone {
				eventually(t, "a refill starts while the call runs", func() bool {
					select {
					case <-done:
						t.Fatal("the call answered before any refill started")
					default:
					}
					n, _ := transients(before)
					return n > 0
				})
				<-done
				return
			}
			eventually(t, "the call took a pooled sandbox", func() bool { return e.pool().Hits() > hits })
			time.Sleep(200 * time.Millisecond) // the call sleeps 400 ms
			select {
			case <-done:
				t.Fatal("the call answered too soon to tell")
			default:
			}
			if n, all := transients(before); n != 0 {
				t.Errorf("%d refill(s) started while the call that left the pool stocked was running (creations since the pool filled, by kind: %v)", n, all)
			}
			<-done
			eventually(t, "the refill starts once the call has answered", func() bool { n, _ := transients(before); return n > 0 })
			eventually(t, "the pool refills", func() bool { return e.pool().IdleCount() == tc.size })
		})
	}
}

// TestFakeReuseBounds: a principal's concurrent calls use at most
// pool.max_per_principal kept sandboxes, the others wait for one; each
// is reset between calls; another principal gets sandboxes of its own;
// a place given up (a failed call's sandbox) goes to a waiting call.
func TestFakeReuseBounds(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) {
		c.Pool.Enabled = true
		c.Pool.Size = 1
		c.Pool.MaxPerPrincipal = 2
	})
	ctx := tctx(t, time.Minute)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := "print " + strconv.Itoa(i)
			if i == 5 {
				code = "oom" // retires its sandbox: a waiting call gets the place
			}
			res, err := e.Transient(ctx, Request{Owner: "alice", Code: code})
			if err != nil || (i != 5 && (res.Status != "ok" || res.Stdout != strconv.Itoa(i)+"\n")) {
				t.Errorf("call %d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	st := e.Stats().Reuse
	if st.Hits < 8 || fb.Resets() < 8 {
		t.Errorf("12 calls with 2 kept sandboxes: reuse stats %+v, %d resets; want at least 8 calls in kept sandboxes, each reset after", st, fb.Resets())
	}
	if st.Retired < 1 {
		t.Errorf("reuse stats %+v: want the oom call's sandbox retired", st)
	}
	eventually(t, "alice's kept sandboxes are reset and idle", func() bool { return e.Stats().Reuse.Resets == 11 })
	if n := e.Stats().Reuse.Idle; n < 1 || n > 2 {
		t.Errorf("%d idle kept sandboxes after the calls, want 1 or 2 (pool.max_per_principal)", n)
	}
	if res, err := e.Transient(ctx, Request{Owner: "bob", Code: "print 1"}); err != nil || res.Status != "ok" {
		t.Fatalf("bob: %+v, %v", res, err)
	}
	if e.Stats().Reuse.Hits != st.Hits {
		t.Errorf("bob's call was served by one of alice's kept sandboxes: %+v", e.Stats().Reuse)
	}
}
