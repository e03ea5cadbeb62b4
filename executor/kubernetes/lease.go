package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Each server holds a Lease (coordination.k8s.io) named LeasePrefix +
// its instance id, renewed every leaseRenew and valid for leaseDuration.
// Another replica's reaper treats a server as gone once its Lease is
// missing or has not been renewed for twice leaseDuration by the reader's
// clock (the margin absorbs clock skew between nodes), so a replica never
// removes a live replica's sandboxes, and a dead one's go within about a
// minute and a half.
const (
	LeasePrefix   = "pdm-server-"
	leaseDuration = 30 * time.Second
	leaseRenew    = 10 * time.Second
)

// inClusterNamespaceFile holds the namespace of the Pod the server runs in.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

var _ backend.Liveness = (*Backend)(nil)

// leaseNamespace is where the servers' Leases live: Config.LeaseNamespace,
// else the server's own namespace when it runs in a Pod, else the sandbox
// namespace.
func (b *Backend) leaseNamespace() string {
	if b.cfg.LeaseNamespace != "" {
		return b.cfg.LeaseNamespace
	}
	if b.cfg.Kubeconfig == "" {
		if ns, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(ns)) != "" {
			return strings.TrimSpace(string(ns))
		}
	}
	return b.cfg.Namespace
}

func (b *Backend) leaseErr(what, ns string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%w: %s: the kubernetes API refused it (%v): the server's account needs leases create/get/update/delete in namespace %s (examples/kubernetes/rbac.yaml)", backend.ErrUnavailable, what, err, ns)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: namespace %q not found: %w", what, ns, err)
	}
	return b.apiErr(what, err)
}

// Hold creates this server's Lease and renews it until release, which
// deletes it. A renewal that fails is retried at the next tick (and
// logged); a Lease deleted by someone else is created again.
func (b *Backend) Hold(ctx context.Context, instance string) (func(context.Context) error, error) {
	ns, name := b.leaseNamespace(), LeasePrefix+instance
	leases := b.client.CoordinationV1().Leases(ns)
	secs := int32(leaseDuration / time.Second)
	fresh := func() *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "python-docker-mcp"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &instance, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
		}
	}
	cur, err := leases.Create(ctx, fresh(), metav1.CreateOptions{})
	if err != nil {
		return nil, b.leaseErr("create lease "+ns+"/"+name, ns, err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		renewals := 0
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
			next, err := renew(rctx, leases, cur, fresh)
			cancel()
			if err != nil {
				b.log().Warn("renewing this server's lease failed; retrying", "lease", ns+"/"+name, "error", err)
				continue
			}
			cur = next
			if renewals++; renewals%leaseSweepEvery == 0 {
				b.dropStaleLeases(ns, instance)
			}
		}
	}()
	var once sync.Once
	return func(ctx context.Context) error {
		once.Do(func() { close(stop) })
		<-done
		err := leases.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return b.leaseErr("delete lease "+ns+"/"+name, ns, err)
		}
		return nil
	}, nil
}

// renew moves the Lease's renewTime to now: an update conditioned on the
// last version seen, read again on a conflict, created again when gone.
func renew(ctx context.Context, leases interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
}, cur *coordinationv1.Lease, fresh func() *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	for range 3 {
		l := cur.DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		next, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return next, nil
		case apierrors.IsNotFound(err):
			return leases.Create(ctx, fresh(), metav1.CreateOptions{})
		case apierrors.IsConflict(err):
			if cur, err = leases.Get(ctx, l.Name, metav1.GetOptions{}); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("lease %s: conflicting updates", cur.Name)
}

// Alive says whether the server with this instance id holds a Lease
// renewed within twice its duration.
func (b *Backend) Alive(ctx context.Context, instance string) (bool, error) {
	ns := b.leaseNamespace()
	l, err := b.client.CoordinationV1().Leases(ns).Get(ctx, LeasePrefix+instance, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, b.leaseErr("get lease "+ns+"/"+LeasePrefix+instance, ns, err)
	}
	return leaseFresh(l, time.Now()), nil
}

// leaseFresh: renewed (or acquired) within twice the Lease's duration.
func leaseFresh(l *coordinationv1.Lease, now time.Time) bool {
	last, ok := lastRenewed(l)
	dur := leaseDuration
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		dur = time.Duration(*d) * time.Second
	}
	return ok && now.Sub(last) < 2*dur
}

// lastRenewed is when the Lease was last renewed, else acquired; false
// when it says neither.
func lastRenewed(l *coordinationv1.Lease) (time.Time, bool) {
	if t := l.Spec.RenewTime; t != nil {
		return t.Time, true
	}
	if t := l.Spec.AcquireTime; t != nil {
		return t.Time, true
	}
	return time.Time{}, false
}

// A dead server's Lease is deleted by a live one once it has not been
// renewed for leaseForget (long after the dead server's sandboxes were
// reaped); each live server looks every leaseSweepEvery renewals.
const (
	leaseForget     = 10 * time.Minute
	leaseSweepEvery = 30
)

// dropStaleLeases deletes other servers' Leases not renewed for
// leaseForget, each only in the version read (a server that renewed it
// meanwhile keeps it).
func (b *Backend) dropStaleLeases(ns, self string) {
	ctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
	defer cancel()
	leases := b.client.CoordinationV1().Leases(ns)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=python-docker-mcp"})
	if err != nil {
		return
	}
	now := time.Now()
	for i := range list.Items {
		l := &list.Items[i]
		if !strings.HasPrefix(l.Name, LeasePrefix) || l.Name == LeasePrefix+self || leaseAge(l, now) < leaseForget {
			continue
		}
		rv := l.ResourceVersion
		leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	}
}

// leaseAge is how long ago the Lease was last renewed (or acquired).
func leaseAge(l *coordinationv1.Lease, now time.Time) time.Duration {
	last, ok := lastRenewed(l)
	if !ok {
		return 0
	}
	return now.Sub(last)
}

// log is Config.Log, or slog's default logger when none is set.
func (b *Backend) log() *slog.Logger {
	if b.cfg.Log != nil {
		return b.cfg.Log
	}
	return slog.Default()
}
