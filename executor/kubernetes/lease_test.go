package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
)

// TestLeaseLogic: Hold writes a Lease naming its holder, Alive reads it,
// a missing or stale one is not alive, renew brings back a deleted one,
// release deletes it. Against the fake clientset; TestClusterReplicas
// runs the same on a real API server.
func TestLeaseLogic(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	b := &Backend{cfg: Config{Namespace: "sandboxes", LeaseNamespace: "servers", Kubeconfig: "x"}, client: cs}
	release, err := b.Hold(ctx, "abc")
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases("servers").Get(ctx, LeasePrefix+"abc", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "abc" {
		t.Fatalf("lease after Hold: %+v, %v; want holder abc in namespace servers", l, err)
	}
	if ok, err := b.Alive(ctx, "abc"); !ok || err != nil {
		t.Errorf("Alive(held) = %v, %v; want true", ok, err)
	}
	if ok, err := b.Alive(ctx, "nobody"); ok || err != nil {
		t.Errorf("Alive(no lease) = %v, %v; want false", ok, err)
	}
	now := time.Now()
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {leaseDuration, true}, {2*leaseDuration + time.Second, false}} {
		ts := metav1.NewMicroTime(now.Add(-c.age))
		if got := leaseFresh(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &ts}}, now); got != c.want {
			t.Errorf("leaseFresh(renewed %v ago) = %v, want %v", c.age, got, c.want)
		}
	}
	if leaseFresh(&coordinationv1.Lease{}, now) {
		t.Error("leaseFresh(never renewed) = true")
	}
	// Someone deletes the Lease: the next renewal writes it again.
	leases := cs.CoordinationV1().Leases("servers")
	if err := leases.Delete(ctx, LeasePrefix+"abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := renew(ctx, leases, l, func() *coordinationv1.Lease { return l.DeepCopy() }); err != nil {
		t.Fatalf("renew of a deleted lease: %v", err)
	}
	if ok, _ := b.Alive(ctx, "abc"); !ok {
		t.Error("Alive after renew re-created the lease = false")
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Alive(ctx, "abc"); ok || err != nil {
		t.Errorf("Alive after release = %v, %v; want false", ok, err)
	}
	if err := release(ctx); err != nil {
		t.Errorf("second release = %v, want nil", err)
	}
}

// TestCreateRateLimited: client-go's rate limiter refuses a request whose
// deadline it foresees passing, with an error that does not wrap ctx's;
// Create still returns ctx's DeadlineExceeded, as the backend contract
// asks (TestClusterSuite/CreateCancelled met this on the real cluster).
func TestCreateRateLimited(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	})
	b := &Backend{cfg: Config{Namespace: "sandboxes", StartTimeout: time.Minute}, client: cs}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	spec := backendtest.Spec("python-docker-mcp-sandbox:latest", "run", "pass")
	if _, err := b.Create(ctx, spec); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create rate-limited past its deadline = %v, want DeadlineExceeded", err)
	}
}

// TestCreateDeadlineSeenBeforeItsTimer: a Create whose request reached the
// API server (the Pod exists) and failed on the passed deadline before
// ctx's timer marked ctx done leaves no Pod behind and returns
// DeadlineExceeded (TestClusterSuite/CreateCancelled met this on the real
// cluster).
func TestCreateDeadlineSeenBeforeItsTimer(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if err := cs.Tracker().Add(a.(k8stesting.CreateAction).GetObject()); err != nil {
			t.Fatal(err)
		}
		return true, nil, errors.New("Post \"https://127.0.0.1:6443/api/v1/namespaces/sandboxes/pods\": net/http: request canceled")
	})
	b := &Backend{cfg: Config{Namespace: "sandboxes", StartTimeout: time.Minute}, client: cs}
	spec := backendtest.Spec("python-docker-mcp-sandbox:latest", "run", "pass")
	if _, err := b.Create(backendtest.DeadlinePassed(context.Background()), spec); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Create past its deadline = %v, want DeadlineExceeded", err)
	}
	if pods, err := cs.CoreV1().Pods("sandboxes").List(context.Background(), metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods after a Create that failed on its deadline: %d, %v; want none", len(pods.Items), err)
	}
}

// TestDropStaleLeases: a live server deletes other servers' Leases not
// renewed for leaseForget, and leaves its own, fresh ones and session
// records alone.
func TestDropStaleLeases(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	b := &Backend{cfg: Config{Namespace: "sandboxes", LeaseNamespace: "servers", Kubeconfig: "x"}, client: cs}
	leases := cs.CoordinationV1().Leases("servers")
	now := time.Now()
	for name, age := range map[string]time.Duration{
		LeasePrefix + "self":       time.Hour,
		LeasePrefix + "dead":       leaseForget + time.Minute,
		LeasePrefix + "recent":     time.Minute,
		SessionLeasePrefix + "old": time.Hour,
	} {
		ts := metav1.NewMicroTime(now.Add(-age))
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "python-docker-mcp"}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &ts}}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b.dropStaleLeases("servers", "self")
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range list.Items {
		left = append(left, l.Name)
	}
	want := []string{LeasePrefix + "recent", LeasePrefix + "self", SessionLeasePrefix + "old"}
	if strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("leases left %v, want %v", left, want)
	}
}

// TestSessionLockTakeover: a session record whose holder stopped renewing
// for twice SessionHold is taken over; a fresh hold makes LockSession wait;
// a released record is taken from the cached version without a read.
func TestSessionLockTakeover(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	b := &Backend{cfg: Config{Namespace: "sandboxes", LeaseNamespace: "servers", Kubeconfig: "x"}, client: cs}
	lk, err := b.CreateSession(ctx, backend.SessionRecord{ID: "s1", Owner: "alice", Created: time.Now(), LastUsed: time.Now()}, "a")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := b.LockSession(short, "s1", "b"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("LockSession while a holds it: %v, want busy", err)
	}
	cancel()
	// a dies: its renewals stop and the hold goes stale.
	lk.(*sessionLock).halt()
	leases := cs.CoordinationV1().Leases("servers")
	l, err := leases.Get(ctx, SessionLeasePrefix+"s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-2*backend.SessionHold - time.Second))
	l.Spec.RenewTime = &old
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb, err := b.LockSession(ctx, "s1", "b")
	if err != nil {
		t.Fatalf("LockSession of a stale hold: %v", err)
	}
	if rec := lb.Record(); rec.Holder != "b" || rec.Owner != "alice" {
		t.Errorf("record after takeover = %+v, want held by b", rec)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	lc, err := b.LockSession(ctx, "s1", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("LockSession after this server's own release read the record (%v); want the cached version used", a)
		}
	}
	if err := lc.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockSession(ctx, "s1", "b"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("LockSession after Delete: %v, want ErrNotFound", err)
	}
}

// TestSessionLockTakeoverOfADeadHolder: a server waiting for a record
// whose holder died (its renewals stopped) takes it over by itself once
// the hold is stale, never before.
func TestSessionLockTakeoverOfADeadHolder(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	b := &Backend{cfg: Config{Namespace: "sandboxes", LeaseNamespace: "servers", Kubeconfig: "x"}, client: cs}
	lk, err := b.CreateSession(ctx, backend.SessionRecord{ID: "s1", Owner: "alice", Created: time.Now(), LastUsed: time.Now()}, "a")
	if err != nil {
		t.Fatal(err)
	}
	lk.(*sessionLock).halt() // a dies mid-call
	last := lk.Record().Renewed
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	lb, err := b.LockSession(wctx, "s1", "b")
	if err != nil {
		t.Fatalf("LockSession of a dead holder's record: %v", err)
	}
	took := time.Now()
	if rec := lb.Record(); rec.Holder != "b" || rec.TakenOver != "a" {
		t.Errorf("record after takeover = %+v, want held by b, taken over from a", rec)
	}
	if err := lb.SetMeta(ctx, map[string]string{"call": "c1", "gone": ""}); err != nil {
		t.Fatal(err)
	}
	recs, err := b.Sessions(ctx, "alice")
	if err != nil || len(recs) != 1 || recs[0].Meta["call"] != "c1" || recs[0].TakenOver != "" {
		t.Errorf("records after SetMeta: %v %+v, want Meta call=c1 and no TakenOver outside the lock", err, recs)
	}
	if age := took.Sub(last); age < 2*backend.SessionHold {
		t.Errorf("taken over %s after the last renewal, before the hold went stale (%s)", age, 2*backend.SessionHold)
	}
	t.Logf("taken over %s after the dead holder's last renewal (%s after b asked; stale after %s)",
		took.Sub(last).Round(time.Millisecond), took.Sub(t0).Round(time.Millisecond), 2*backend.SessionHold)
	lb.Release(ctx)
}
