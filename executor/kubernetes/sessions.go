package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	coordv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// A persistent session's record (backend.Shared) is a Lease named
// SessionLeasePrefix + the session id, next to the servers' own Leases.
// Its holderIdentity is the server that talks to the session's sandbox
// now (none while no call runs), renewTime its last renewal; annotations
// carry the owner, the times, the sandbox's Pod name and the executor's
// data. Updates are conditioned on the resourceVersion last read, so two
// servers never both take a free record.
const (
	SessionLeasePrefix = "pdm-session-"
	componentSession   = "session"
	// LabelOwnerHash selects an owner's records: the first 40 hex digits
	// of the SHA-256 of the owner (owners are free text, labels are not).
	LabelOwnerHash = "python-docker-mcp.owner-sha256"

	annOwner    = "python-docker-mcp.owner"
	annCreated  = "python-docker-mcp.created"
	annLastUsed = "python-docker-mcp.last-used"
	annSandbox  = "python-docker-mcp.sandbox"
	annMeta     = "python-docker-mcp.meta."
)

var _ backend.Shared = (*Backend)(nil)

func ownerHash(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:])[:40]
}

func (b *Backend) sessionLeases() (coordv1client.LeaseInterface, string) {
	ns := b.leaseNamespace()
	return b.client.CoordinationV1().Leases(ns), ns
}

// toRecord reads a session Lease.
func toRecord(l *coordinationv1.Lease) backend.SessionRecord {
	a := l.Annotations
	r := backend.SessionRecord{
		ID:      strings.TrimPrefix(l.Name, SessionLeasePrefix),
		Owner:   a[annOwner],
		Sandbox: a[annSandbox],
		Meta:    map[string]string{},
	}
	r.Created, _ = time.Parse(time.RFC3339Nano, a[annCreated])
	r.LastUsed, _ = time.Parse(time.RFC3339Nano, a[annLastUsed])
	if h := l.Spec.HolderIdentity; h != nil {
		r.Holder = *h
	}
	r.Renewed, _ = lastRenewed(l)
	for k, v := range a {
		if m, ok := strings.CutPrefix(k, annMeta); ok {
			r.Meta[m] = v
		}
	}
	return r
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// hold makes l held by holder as of now.
func hold(l *coordinationv1.Lease, holder string) {
	now := metav1.NewMicroTime(time.Now())
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		n := int32(0)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions
		}
		n++
		l.Spec.LeaseTransitions = &n
		l.Spec.AcquireTime = &now
	}
	h := holder
	secs := int32((backend.SessionHold + time.Second - 1) / time.Second) // whole seconds, rounded up
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &h, &now, &secs
}

// CreateSession stores a new session record held by holder.
func (b *Backend) CreateSession(ctx context.Context, rec backend.SessionRecord, holder string) (backend.SessionLock, error) {
	leases, ns := b.sessionLeases()
	name := SessionLeasePrefix + rec.ID
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns,
		Labels: map[string]string{
			LabelManagedBy: partOf, LabelPartOf: partOf, LabelComponent: componentSession,
			LabelOwnerHash: ownerHash(rec.Owner),
		},
		Annotations: map[string]string{
			annOwner: rec.Owner, annCreated: stamp(rec.Created), annLastUsed: stamp(rec.LastUsed), annSandbox: rec.Sandbox,
		},
	}}
	for k, v := range rec.Meta {
		l.Annotations[annMeta+k] = v
	}
	hold(l, holder)
	cur, err := leases.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return nil, b.leaseErr("create session record "+ns+"/"+name, ns, err)
	}
	return b.startLock(leases, cur, holder), nil
}

// LockSession takes session id's record for holder (see backend.Shared).
func (b *Backend) LockSession(ctx context.Context, id, holder string) (backend.SessionLock, error) {
	leases, ns := b.sessionLeases()
	name := SessionLeasePrefix + id
	pause := 10 * time.Millisecond
	var cur *coordinationv1.Lease
	if c, ok := b.sessionCache.Load(id); ok {
		cur = c.(*coordinationv1.Lease)
	}
	for {
		if cur == nil {
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("session record %s/%s: %w", ns, name, backend.ErrNotFound)
			}
			if err != nil {
				return nil, b.leaseErr("get session record "+ns+"/"+name, ns, err)
			}
			cur = l
		}
		rec := toRecord(cur)
		if !rec.Held(time.Now()) || rec.Holder == holder {
			l := cur.DeepCopy()
			hold(l, holder)
			next, err := leases.Update(ctx, l, metav1.UpdateOptions{})
			switch {
			case err == nil:
				lk := b.startLock(leases, next, holder)
				if rec.Holder != "" && rec.Holder != holder {
					lk.takenOver = rec.Holder // its hold was stale: it died mid-call
				}
				return lk, nil
			case apierrors.IsConflict(err):
				cur = nil // changed since read: read again
				continue
			case apierrors.IsNotFound(err):
				b.sessionCache.Delete(id)
				return nil, fmt.Errorf("session record %s/%s: %w", ns, name, backend.ErrNotFound)
			default:
				return nil, b.leaseErr("take session record "+ns+"/"+name, ns, err)
			}
		}
		// Another server's call runs in the session: wait for its
		// release (watching the record), or for its hold to go stale
		// (that server died).
		stale := time.Until(rec.Renewed.Add(2 * backend.SessionHold))
		next, err := b.waitChange(ctx, leases, cur, max(stale, pause))
		if ctx.Err() != nil {
			return nil, fmt.Errorf("session %s is busy: server %s holds it (renewed %s ago): %w",
				id, rec.Holder, time.Since(rec.Renewed).Round(time.Millisecond), ctx.Err())
		}
		if err != nil {
			// The watch failed: poll instead.
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, 250*time.Millisecond)
		}
		cur = next // nil: read again
	}
}

// waitChange watches the record from cur's version until it changes
// (returned; nil when it was deleted or the watch ended without news) or
// wait passes.
func (b *Backend) waitChange(ctx context.Context, leases coordv1client.LeaseInterface, cur *coordinationv1.Lease, wait time.Duration) (*coordinationv1.Lease, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w, err := leases.Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", cur.Name).String(),
		ResourceVersion: cur.ResourceVersion,
	})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return nil, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified {
				return l, nil
			}
			return nil, nil // deleted, or an error event: read again
		}
	}
}

// Sessions lists the session records of owner ("" = all).
func (b *Backend) Sessions(ctx context.Context, owner string) ([]backend.SessionRecord, error) {
	leases, ns := b.sessionLeases()
	sel := labels.Set{LabelManagedBy: partOf, LabelComponent: componentSession}
	if owner != "" {
		sel[LabelOwnerHash] = ownerHash(owner)
	}
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, b.leaseErr("list session records in "+ns, ns, err)
	}
	out := make([]backend.SessionRecord, 0, len(list.Items))
	for i := range list.Items {
		r := toRecord(&list.Items[i])
		if owner != "" && r.Owner != owner {
			continue // a hash collision
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteSession removes session id's record.
func (b *Backend) DeleteSession(ctx context.Context, id string) error {
	leases, ns := b.sessionLeases()
	b.sessionCache.Delete(id)
	err := leases.Delete(ctx, SessionLeasePrefix+id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return b.leaseErr("delete session record "+ns+"/"+SessionLeasePrefix+id, ns, err)
	}
	return nil
}

// sessionLock is a held session Lease, renewed every SessionHold/3 until
// released or deleted.
type sessionLock struct {
	b      *Backend
	leases coordv1client.LeaseInterface
	holder string
	id     string

	mu   sync.Mutex
	cur  *coordinationv1.Lease
	lost error // set when the hold was lost (taken over or deleted)
	// takenOver is the server whose stale hold LockSession took over.
	takenOver string

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (b *Backend) startLock(leases coordv1client.LeaseInterface, cur *coordinationv1.Lease, holder string) *sessionLock {
	l := &sessionLock{b: b, leases: leases, holder: holder, id: strings.TrimPrefix(cur.Name, SessionLeasePrefix),
		cur: cur, stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l
}

func (l *sessionLock) Record() backend.SessionRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := toRecord(l.cur)
	r.TakenOver = l.takenOver
	return r
}

func (l *sessionLock) renewLoop() {
	defer close(l.done)
	t := time.NewTicker(backend.SessionHold / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		// A renewal may take up to SessionHold (a slow API server); the
		// ticker drops the ticks it missed meanwhile.
		ctx, cancel := context.WithTimeout(context.Background(), backend.SessionHold)
		err := l.update(ctx, func(x *coordinationv1.Lease) { hold(x, l.holder) })
		cancel()
		if err != nil {
			l.b.log().Warn("renewing a session's lock failed", "session", l.id, "error", err)
			if l.lostErr() != nil {
				return
			}
		}
	}
}

func (l *sessionLock) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// update applies change to the Lease and writes it, conditioned on the
// version last seen; on a conflict it reads the Lease again and goes on
// only while this server still holds it.
func (l *sessionLock) update(ctx context.Context, change func(*coordinationv1.Lease)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	for range 5 {
		x := l.cur.DeepCopy()
		change(x)
		next, err := l.leases.Update(ctx, x, metav1.UpdateOptions{})
		switch {
		case err == nil:
			l.cur = next
			return nil
		case apierrors.IsNotFound(err):
			l.lost = fmt.Errorf("session %s: its record was deleted: %w", l.id, backend.ErrNotFound)
			return l.lost
		case apierrors.IsConflict(err):
			got, gerr := l.leases.Get(ctx, l.cur.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				l.lost = fmt.Errorf("session %s: its record was deleted: %w", l.id, backend.ErrNotFound)
				return l.lost
			}
			if gerr != nil {
				return l.b.apiErr("get session record", gerr)
			}
			if h := got.Spec.HolderIdentity; h == nil || *h != l.holder {
				l.lost = fmt.Errorf("session %s: another server took its lock over: %w", l.id, errLockLost)
				return l.lost
			}
			l.cur = got
		default:
			return l.b.apiErr("update session record", err)
		}
	}
	return fmt.Errorf("session %s: conflicting updates of its record", l.id)
}

var errLockLost = errors.New("session lock lost")

func (l *sessionLock) SetSandbox(ctx context.Context, id string) error {
	return l.update(ctx, func(x *coordinationv1.Lease) {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[annSandbox] = id
	})
}

func (l *sessionLock) SetMeta(ctx context.Context, meta map[string]string) error {
	return l.update(ctx, func(x *coordinationv1.Lease) {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		for k, v := range meta {
			if v == "" {
				delete(x.Annotations, annMeta+k)
				continue
			}
			x.Annotations[annMeta+k] = v
		}
	})
}

func (l *sessionLock) halt() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

func (l *sessionLock) Release(ctx context.Context) error {
	l.halt()
	err := l.update(ctx, func(x *coordinationv1.Lease) {
		x.Spec.HolderIdentity = nil
		now := metav1.NewMicroTime(time.Now())
		x.Spec.RenewTime = &now
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[annLastUsed] = stamp(now.Time)
	})
	l.mu.Lock()
	if err == nil {
		l.b.sessionCache.Store(l.id, l.cur)
	} else {
		l.b.sessionCache.Delete(l.id)
	}
	l.mu.Unlock()
	return err
}

func (l *sessionLock) Delete(ctx context.Context) error {
	l.halt()
	return l.b.DeleteSession(ctx, l.id)
}
