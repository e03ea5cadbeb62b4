package quota

import (
	"context"
	"fmt"
	"sync"
	"time"
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
	charge  func(principal string, held time.Duration)
}

// OnRelease has charge called with the principal and how long it held
// the slot each time a slot is given back (Pace.Charge: the time counts
// against the principal's pace). Call it before the Fair is used.
func (f *Fair) OnRelease(charge func(principal string, held time.Duration)) { f.charge = charge }

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
	start := time.Now()
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.ungrant(principal)
			f.mu.Unlock()
			if f.charge != nil {
				f.charge(principal, time.Since(start))
			}
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

// Pace spaces each principal's requests: after a burst, a principal's
// requests start at most one per interval, each waiting its turn (a
// generic cell rate algorithm; nothing is refused). A flood of cheap
// requests from one principal then costs the server at most its rate of
// work however fast its clients send. Safe for concurrent use.
type Pace struct {
	mu       sync.Mutex
	interval time.Duration
	burst    int
	factor   float64
	tat      map[string]time.Time // principal -> its theoretical arrival time
	now      func() time.Time
}

// paceSweep is how many principals Pace tracks before it forgets the
// ones that have been quiet for a whole burst.
const paceSweep = 4096

// NewPace returns a Pace of perSecond requests a second (at most; 0 or
// less paces nothing) after a burst of burst requests (at least 1), where
// the server's time on a principal's work counts factor times (Charge;
// 0 counts none).
func NewPace(perSecond float64, burst int, factor float64) *Pace {
	p := &Pace{burst: max(burst, 1), factor: factor, tat: map[string]time.Time{}, now: time.Now}
	if perSecond > 0 {
		p.interval = time.Duration(float64(time.Second) / perSecond)
	}
	return p
}

// Charge counts work the server did for principal against its pace: its
// later requests wait as if it had sent d×factor/interval more requests
// (NewPace's factor: with factor k, a principal keeps the server busy
// for at most 1/k of a core sustained, its burst aside).
func (p *Pace) Charge(principal string, d time.Duration) {
	if p == nil || p.interval <= 0 || p.factor <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	tat := p.tat[principal]
	if tat.Before(now) {
		tat = now
	}
	p.tat[principal] = tat.Add(time.Duration(float64(d) * p.factor))
}

// Wait waits for principal's turn, or for ctx to end (its error,
// wrapped; the turn is spent).
func (p *Pace) Wait(ctx context.Context, principal string) error {
	if p == nil || p.interval <= 0 {
		return nil
	}
	p.mu.Lock()
	now := p.now()
	if len(p.tat) >= paceSweep {
		for k, t := range p.tat {
			if t.Before(now) {
				delete(p.tat, k)
			}
		}
	}
	tat := p.tat[principal]
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(p.interval)
	p.tat[principal] = tat
	p.mu.Unlock()
	wait := tat.Sub(now) - time.Duration(p.burst)*p.interval
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gave up waiting for the principal's turn (its requests are paced): %w", context.Cause(ctx))
	}
}
