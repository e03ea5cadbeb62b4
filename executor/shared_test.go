package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// The tests in this file run two executors on one fake cluster, as two
// replicas of the server on one Kubernetes cluster: sessions belong to
// no one server. The Kubernetes backend's cluster tests hold the same with
// server processes against a real node.

// newReplicas starts n executors on one fake cluster. Cleanup closes them
// and checks that nothing is left once the sessions are cleaned up.
func newReplicas(t *testing.T, n int, edit func(*config.Config)) ([]*Executor, fake.Cluster) {
	t.Helper()
	cfg := config.Default()
	cfg.Pool.Enabled = false
	if edit != nil {
		edit(&cfg)
	}
	fc := fake.NewCluster()
	var es []*Executor
	for range n {
		e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fc, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("NewWithBackend: %v", err)
		}
		es = append(es, e)
	}
	t.Cleanup(func() {
		for _, e := range es {
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return es, fc
}

func TestSharedSessionMovesBetweenReplicas(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	res, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set n 0"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("start on replica 0: %v %+v", err, res)
	}
	// 40 calls alternating replicas, each reading what the last one set.
	for i := 1; i <= 40; i++ {
		e := es[i%2]
		res, _, err := e.Persistent(ctx, id, Request{Owner: "alice", Code: fmt.Sprintf("get n\nset n %d", i)})
		if err != nil {
			t.Fatalf("call %d on replica %d: %v", i, i%2, err)
		}
		if want := fmt.Sprintf("%d\n", i-1); res.Status != "ok" || res.Stdout != want || res.StateLost {
			t.Fatalf("call %d on replica %d = %+v, want stdout %q and the state kept", i, i%2, res, want)
		}
	}
	if fc.Creates() != 1 {
		t.Errorf("%d sandboxes created, want the session's one", fc.Creates())
	}
	for i, e := range es {
		if got := e.Sessions("alice"); len(got) != 1 || got[0].ID != id {
			t.Errorf("replica %d lists %+v, want session %s", i, got, id)
		}
		if got := e.Sessions("bob"); len(got) != 0 {
			t.Errorf("replica %d lists bob's sessions %+v, want none", i, got)
		}
	}
	// Another owner cannot use it on either replica.
	if _, _, err := es[1].Persistent(ctx, id, Request{Owner: "bob", Code: "get n"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob's call into alice's session: %v, want ErrUnknownSession", err)
	}
	// Files follow the session too.
	if err := es[0].WriteFile(ctx, "alice", id, "a.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if data, err := es[1].ReadFile(ctx, "alice", id, "a.txt"); err != nil || string(data) != "hi" {
		t.Errorf("ReadFile on the other replica = %q, %v; want hi", data, err)
	}
	// Cleanup on one replica ends it for both.
	if err := es[1].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := es[0].Persistent(ctx, id, Request{Owner: "alice", Code: "get n"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("call after cleanup on the other replica: %v, want ErrUnknownSession", err)
	}
	eventually(t, "the session's sandbox is removed", func() bool { return fc.Live() == 0 })
}

func TestSharedSessionOneWriterAtATime(t *testing.T) {
	es, _ := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set n start"})
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent calls from both replicas: each must see a whole run of
	// its own (the lock keeps their frames apart) and get its own reply.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := es[i%2].Persistent(ctx, id, Request{Owner: "alice", Code: fmt.Sprintf("sleep 5\nprint call-%d", i)})
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf("call-%d\n", i); res.Stdout != want {
				errs <- fmt.Errorf("call %d got stdout %q, want %q", i, res.Stdout, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSharedSessionSurvivesReplicaClose(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := es[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	res, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"})
	if err != nil || res.Stdout != "kept\n" || res.StateLost {
		t.Fatalf("call on the remaining replica = %+v, %v; want x kept", res, err)
	}
	// The closed replica's sweep of dead servers leaves it alone too.
	if n, err := es[1].reapOrphans(ctx); err != nil || n != 0 {
		t.Errorf("reapOrphans = %d, %v; want the session's sandbox kept", n, err)
	}
	if err := es[1].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing is left", func() bool { return fc.Live() == 0 })
}

func TestSharedSessionTakesOverAStaleHold(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x kept"})
	if err != nil {
		t.Fatal(err)
	}
	// Replica 0 "dies" holding the lock: its hold goes stale.
	if _, err := fc.LockSession(ctx, id, "dead-replica"); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _, err = es[1].Persistent(wait, id, Request{Owner: "alice", Code: "get x"})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("call while another server holds the lock: %v, want it to wait and say the session is busy", err)
	}
	fc.StaleHold(id)
	res, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("call after the hold went stale = %+v, %v; want x kept", res, err)
	}
	if res.Interrupted != "dead-replica" {
		t.Errorf("the call that took the session over: Interrupted %q, want dead-replica (its call may have run)", res.Interrupted)
	}
	res, _, err = es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"})
	if err != nil || res.Interrupted != "" {
		t.Errorf("the next call: %v, Interrupted %q, want none (reported once)", err, res.Interrupted)
	}
}

func TestSharedSessionLostSandboxRestarts(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox dies (OOM) in a call on replica 1.
	res, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "oom"})
	if err != nil || res.Status != "oom" {
		t.Fatalf("oom call = %+v, %v", res, err)
	}
	// Replica 0 still has its stream to the dead sandbox: the record
	// now names none that runs, so it starts one and says state lost.
	res, _, err = es[0].Persistent(ctx, id, Request{Owner: "alice", Code: "set y 2\nget y"})
	if err != nil || res.Stdout != "2\n" {
		t.Fatalf("call after the OOM = %+v, %v", res, err)
	}
	res, _, err = es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get y"})
	if err != nil || res.Stdout != "2\n" || res.StateLost {
		t.Fatalf("next call on replica 1 = %+v, %v; want y from the new sandbox, no state lost", res, err)
	}
	if err := es[1].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing is left", func() bool { return fc.Live() == 0 })
}

func TestSharedSessionExpiresOnAnyReplica(t *testing.T) {
	es, fc := newReplicas(t, 2, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(300 * time.Millisecond) })
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	// Replica 0 closes: the session outlives it until its idle TTL.
	if err := es[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica 1 ends the expired session and removes its sandbox", func() bool {
		recs, _ := fc.Sessions(ctx, "")
		return len(recs) == 0 && fc.Live() == 0
	})
	_, _, err = es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"})
	if !errors.Is(err, ErrExpiredSession) && !errors.Is(err, ErrUnknownSession) {
		t.Errorf("call after expiry: %v, want expired or unknown", err)
	}
}

func TestSharedSessionLimitsCountEveryReplica(t *testing.T) {
	es, _ := newReplicas(t, 2, func(c *config.Config) { c.Sessions.MaxPerOwner = 1 })
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := es[1].Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"}); !errors.Is(err, ErrTooManySessions) {
		t.Errorf("second session on the other replica: %v, want ErrTooManySessions", err)
	}
	if err := es[1].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
}

func TestSharedSessionKeepsTheLockForATightLoop(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	defer func(g time.Duration) { holdGrace = g }(holdGrace)
	holdGrace = time.Second
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := es[0].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := fc.Locks(); n != 0 {
		t.Errorf("%d record locks for calls that followed each other at once, want 0 (the kept lock)", n)
	}
	// The other replica waits for the grace, then takes the record.
	if _, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"}); err != nil {
		t.Fatal(err)
	}
	if fc.Locks() != 1 {
		t.Errorf("locks %d after the other replica's call, want 1", fc.Locks())
	}
	// Closing a replica releases the lock it keeps at once.
	if _, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "get x"}); err != nil {
		t.Fatal(err)
	}
	if err := es[1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := fc.Sessions(ctx, "alice")
	if len(recs) != 1 || recs[0].Held(time.Now()) {
		t.Errorf("record after the holder closed = %+v, want it free", recs)
	}
	if err := es[0].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
}

// TestSharedSessionIdempotencyKey: a keyed call into a shared session runs
// once whichever replica its retry reaches; a retry of a call whose server
// died mid-call says it may have run, also after another call took the
// session over first.
func TestSharedSessionIdempotencyKey(t *testing.T) {
	es, fc := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	_, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "set n 0"})
	if err != nil {
		t.Fatal(err)
	}
	n := func(e *Executor) string {
		t.Helper()
		res, _, err := e.Persistent(ctx, id, Request{Owner: "alice", Code: "get n"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	if res, _, err := es[0].Persistent(ctx, id, Request{Owner: "alice", Code: "set n 1", IdempotencyKey: "k1"}); err != nil || res.Status != "ok" {
		t.Fatalf("keyed call: %v %+v", err, res)
	}
	for i, e := range es {
		if _, _, err := e.Persistent(ctx, id, Request{Owner: "alice", Code: "set n 99", IdempotencyKey: "k1"}); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("retry of k1 on replica %d: %v, want ErrAlreadyRan", i, err)
		}
	}
	if got := n(es[1]); got != "1" {
		t.Errorf("n = %s after the retries, want 1 (the retries did not run)", got)
	}

	// A server runs the call with key k2 and dies before it answers.
	dead := func(key string) {
		lk, err := fc.LockSession(ctx, id, "dead-replica")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.SetMeta(ctx, map[string]string{metaCall: callHash("alice", key)}); err != nil {
			t.Fatal(err)
		}
		fc.StaleHold(id)
	}
	dead("k2")
	_, _, err = es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "set n 2", IdempotencyKey: "k2"})
	if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "may have run") {
		t.Errorf("retry of k2 after its server died: %v, want ErrOutcomeUnknown saying it may have run", err)
	}
	// Another owner's key never matches alice's.
	if got := callHash("bob", "k2"); got == callHash("alice", "k2") {
		t.Errorf("callHash ignores the owner: %s", got)
	}
	if res, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "set n 3", IdempotencyKey: "k3"}); err != nil || res.Status != "ok" {
		t.Fatalf("a new key after the takeover: %v %+v", err, res)
	}
	if got := n(es[0]); got != "3" {
		t.Errorf("n = %s, want 3", got)
	}

	// A call without a key takes the session over first; the retry of
	// the interrupted call still learns it may have run.
	dead("k4")
	if got := n(es[0]); got != "3" {
		t.Errorf("n = %s after the takeover, want 3", got)
	}
	if _, _, err := es[1].Persistent(ctx, id, Request{Owner: "alice", Code: "set n 4", IdempotencyKey: "k4"}); !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("retry of k4 after another call took the session over: %v, want ErrOutcomeUnknown", err)
	}
	if got := n(es[1]); got != "3" {
		t.Errorf("n = %s, want 3 (no retry ran)", got)
	}
	if err := es[0].Cleanup(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
}
