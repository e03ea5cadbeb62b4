package quota

import (
	"context"
	"fmt"
	"sync"
)

// Fair shares a fixed number of slots (the cores the server gives its own
// CPU-heavy work, such as analysing code) between principals. One
// principal runs at most per of them at once; a free slot goes to the
// waiting principal that runs the fewest (the one waiting longest among
// equals), and each principal's requests wait in order behind its own,
// never behind another's. Safe for concurrent use.
type Fair struct {
	mu      sync.Mutex
	slots   int
	per     int
	busy    int
	held    map[string]int       // principal -> slots it runs
	waiting map[string][]*waiter // principal -> its waiters, oldest first
	seq     uint64
}

type waiter struct {
	ready   chan struct{}
	granted bool
	seq     uint64
}

// NewFair returns a Fair of slots slots (at least 1) of which one
// principal runs at most per (at least 1, at most slots).
func NewFair(slots, per int) *Fair {
	slots = max(slots, 1)
	return &Fair{slots: slots, per: min(max(per, 1), slots), held: map[string]int{}, waiting: map[string][]*waiter{}}
}

// Slots returns the number of slots and how many one principal runs at
// most.
func (f *Fair) Slots() (slots, per int) { return f.slots, f.per }

// Acquire waits for a slot for principal, or for ctx to end (its error,
// wrapped). The returned release gives the slot back (once; later calls
// do nothing).
func (f *Fair) Acquire(ctx context.Context, principal string) (release func(), err error) {
	f.mu.Lock()
	if len(f.waiting[principal]) == 0 && f.busy < f.slots && f.held[principal] < f.per {
		f.grant(principal)
		f.mu.Unlock()
		return f.releaser(principal), nil
	}
	f.seq++
	w := &waiter{ready: make(chan struct{}), seq: f.seq}
	f.waiting[principal] = append(f.waiting[principal], w)
	f.mu.Unlock()
	select {
	case <-w.ready:
		return f.releaser(principal), nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.granted { // granted as ctx ended: give it to the next
		f.ungrant(principal)
	} else {
		q := f.waiting[principal]
		for i, o := range q {
			if o == w {
				q = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		if len(q) == 0 {
			delete(f.waiting, principal)
		} else {
			f.waiting[principal] = q
		}
	}
	f.mu.Unlock()
	return func() {}, fmt.Errorf("gave up waiting for one of the server's %d analysis slots: %w", f.slots, context.Cause(ctx))
}

// Waiting returns how many of principal's requests wait for a slot, and
// how many slots it runs.
func (f *Fair) Waiting(principal string) (waiting, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiting[principal]), f.held[principal]
}

func (f *Fair) releaser(principal string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.ungrant(principal)
			f.mu.Unlock()
		})
	}
}

// grant gives principal a slot; f.mu is held.
func (f *Fair) grant(principal string) {
	f.busy++
	f.held[principal]++
}

// ungrant takes principal's slot back and hands free slots to the
// waiters; f.mu is held.
func (f *Fair) ungrant(principal string) {
	f.busy--
	if f.held[principal]--; f.held[principal] <= 0 {
		delete(f.held, principal)
	}
	for f.busy < f.slots {
		next, best := "", (*waiter)(nil)
		for p, q := range f.waiting {
			if f.held[p] >= f.per {
				continue
			}
			if best == nil || f.held[p] < f.held[next] || f.held[p] == f.held[next] && q[0].seq < best.seq {
				next, best = p, q[0]
			}
		}
		if best == nil {
			return
		}
		if q := f.waiting[next][1:]; len(q) == 0 {
			delete(f.waiting, next)
		} else {
			f.waiting[next] = q
		}
		f.grant(next)
		best.granted = true
		close(best.ready)
	}
}

// Held is a slot of a Fair that one request holds from its first step on
// (the HTTP layer takes it before reading the request's body), and that a
// later step of the same request can take over (Take) instead of waiting
// for a slot of its own. Safe for concurrent use.
type Held struct {
	f       *Fair
	mu      sync.Mutex
	release func() // nil once released or taken
}

type heldKey struct{}

// Hold waits for a slot for principal, as Acquire, and returns ctx
// carrying it for a later step (Take) and the Held, whose Release gives
// the slot back unless a step took it over.
func (f *Fair) Hold(ctx context.Context, principal string) (context.Context, *Held, error) {
	release, err := f.Acquire(ctx, principal)
	if err != nil {
		return ctx, nil, err
	}
	h := &Held{f: f, release: release}
	return context.WithValue(ctx, heldKey{}, h), h, nil
}

// Release gives the slot back, unless it was taken over or released
// already.
func (h *Held) Release() {
	h.mu.Lock()
	release := h.release
	h.release = nil
	h.mu.Unlock()
	if release != nil {
		release()
	}
}

// Release gives back the slot of f that ctx's request holds, if any
// (a step that will not use it, so that the principal's next request
// need not wait for this one to end).
func (f *Fair) Release(ctx context.Context) {
	if h, ok := ctx.Value(heldKey{}).(*Held); ok && h.f == f {
		h.Release()
	}
}

// Take takes over the slot of f that ctx's request holds: ok is true
// and the caller gives it back with release. With no such slot (none
// held, or released or taken already) ok is false.
func (f *Fair) Take(ctx context.Context) (release func(), ok bool) {
	h, _ := ctx.Value(heldKey{}).(*Held)
	if h == nil || h.f != f {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	release, h.release = h.release, nil
	return release, release != nil
}
