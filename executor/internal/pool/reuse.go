package pool

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Reuse keeps the transient sandboxes that served a principal's calls for
// that principal's next calls (pool.reuse: principal). Each call still
// runs in a fresh process: the runner, which has imported the sandbox's
// modules and never runs user code, forks a new worker for it. Between
// calls the runner resets the sandbox (protocol.Reset: every process but
// itself ended, writable paths, System V IPC, its own descriptors,
// environment, working directory, umask and limits as before the first
// call, each checked); a sandbox whose reset fails is removed, never
// reused.
//
// A kept sandbox belongs to one principal and one class (its limits,
// runtime included; sandboxes that mount a package volume are never
// kept) and is never handed to another. It serves at most
// pool.reuse_max_calls calls and lives at most pool.reuse_max_age; a call
// that ends in timeout, OOM, kill or an invalid reply removes it at once.
// A principal holds at most pool.max_per_principal kept sandboxes (idle,
// serving a call, or being reset); all principals' idle ones together at
// most pool.reuse_max_idle, the least recently used removed first. Safe
// for concurrent use.
type Reuse[S Sandbox] struct {
	h       Host[S]
	startup time.Duration // a creation's bound: how long a call waits for one of its principal's being created

	mu      sync.Mutex
	idle    []*Kept[S]     // all principals', least recently used first
	owned   map[string]int // kept sandboxes per principal: idle, serving, resetting or being created
	pending map[string]int // of those, places reserved for sandboxes being created
	resets  map[string]int // resets under way per principal
	waiters map[string][]*keptWaiter[S]
	gen     int // flush's count: a kept sandbox of an older one is not reused

	hits    atomic.Int64 // calls served by a kept sandbox
	resetOK atomic.Int64 // resets that passed every check
	failed  atomic.Int64 // resets that failed a check (the sandbox was removed)
	retired atomic.Int64 // kept sandboxes removed for their age, calls, or a call's timeout, OOM, kill or invalid reply
	evicted atomic.Int64 // idle ones removed to stay within reuse_max_idle or max_per_principal
	renewed atomic.Int64 // kept sandboxes that asked the warm pool for their successor
}

// Kept is one sandbox kept for its principal.
type Kept[S Sandbox] struct {
	sb      S
	owner   string
	class   string // the class of its limits (Take's class)
	modules []string
	born    time.Time
	calls   int
	used    time.Time
	gen     int  // Reuse.gen when it was adopted
	renewed bool // its successor was asked for (Host.Succeed)
}

// keptWaiter is a call waiting for one of its principal's sandboxes.
type keptWaiter[S Sandbox] struct {
	class string
	need  []string
	ch    chan *Kept[S] // buffered: gets at most one
	// placed: the call holds a place already and starts a fresh sandbox
	// meanwhile (Watch); a place given up is not handed to it, and
	// handed says a sandbox was handed over (called with w.mu held).
	placed bool
	handed func()
}

// resetDeadline bounds a reset; an idle runner's takes a few milliseconds.
const resetDeadline = 5 * time.Second

// resetWait bounds how long a call waits for one of its principal's
// sandboxes being reset, when it has none idle: a reset takes a few
// milliseconds, a fresh sandbox costs a container.
const resetWait = 100 * time.Millisecond

// busyWait bounds how long a call whose principal holds
// pool.max_per_principal sandboxes, all serving calls, waits for one
// before it runs in a fresh sandbox (which is not kept): long enough for
// calls of a few hundred milliseconds to hand theirs over, short against
// a long call.
const busyWait = time.Second

// NewReuse makes the kept sandboxes' keeper; startup bounds a sandbox's
// creation.
func NewReuse[S Sandbox](h Host[S], startup time.Duration) *Reuse[S] {
	return &Reuse[S]{h: h, startup: startup, owned: map[string]int{}, pending: map[string]int{}, resets: map[string]int{}, waiters: map[string][]*keptWaiter[S]{}}
}

// On says the configuration keeps sandboxes (pool.enabled, pool.reuse:
// principal).
func (w *Reuse[S]) On() bool {
	p := w.h.Config()
	return p.Enabled && p.Reuse == config.ReusePrincipal
}

// Take hands out an idle sandbox of owner's that fits a call of class
// importing need (the one with fewest other modules, most recently used
// first). With none idle:
//   - when one of owner's is being reset, it waits for that one (at most
//     resetWait: a reset takes a few milliseconds, a new container a
//     hundred times that), unless owner holds fewer than
//     max_per_principal and pooled says a started sandbox that fits waits
//     in the pool: back-to-back calls then alternate between two kept
//     sandboxes, each reset while the other serves;
//   - while owner holds fewer than max_per_principal, it reserves a place
//     for the fresh sandbox the call starts (reserved true: the caller
//     calls adopt, or unreserve if it starts none);
//   - at the cap it waits for one of owner's to come back: up to busyWait
//     when all serve calls, up to the startup bound while some are still
//     being created (a fresh sandbox would only slow them down); not at
//     all when all of owner's are idle and none fits.
//
// nil: run in a fresh sandbox. pooled may be nil (no pool).
func (w *Reuse[S]) Take(ctx context.Context, owner, class string, need []string, pooled func() bool) (k *Kept[S], reserved bool) {
	triedReset := false
	var until time.Time // the end of the wait at the cap, once begun
	for {
		w.mu.Lock()
		if k := w.pop(owner, class, need); k != nil {
			w.mu.Unlock()
			w.hits.Add(1)
			return k, false
		}
		below := w.owned[owner] < w.h.Config().MaxPerPrincipal
		// pooled takes the pool's lock under w.mu (the pool never takes
		// w.mu), and only when the answer matters.
		if w.resets[owner] > 0 && !triedReset && !(below && pooled != nil && pooled()) {
			triedReset = true
			kw := w.enqueue(owner, class, need)
			w.mu.Unlock()
			if k, _ := w.wait(ctx, owner, kw, resetWait); k != nil {
				return k, false
			}
			continue
		}
		if below {
			w.owned[owner]++
			w.pending[owner]++
			w.mu.Unlock()
			return nil, true
		}
		if w.idleOf(owner) == w.owned[owner] {
			// All of owner's are idle, none fits this call: none will
			// come back that does. The call runs in a fresh sandbox,
			// which replaces one of them (adopt).
			w.mu.Unlock()
			return nil, false
		}
		if until.IsZero() {
			d := busyWait
			if w.pending[owner] > 0 {
				d = w.startup
			}
			until = time.Now().Add(d)
		}
		d := time.Until(until)
		if d <= 0 {
			w.mu.Unlock()
			return nil, false
		}
		kw := w.enqueue(owner, class, need)
		w.mu.Unlock()
		k, freed := w.wait(ctx, owner, kw, d)
		if k != nil {
			return k, false
		}
		if !freed {
			return nil, false
		}
		// One of owner's places was given up: take it.
	}
}

// Watch lets a call that reserved a place (Take's reserved) and is
// starting a fresh sandbox for it take instead one of owner's that
// comes back from its reset first: a call that waited resetWait in vain
// would otherwise wait for the whole start (on a full Kubernetes node, a
// start that the node turns away until it gives up) while its own
// sandbox waits idle. handed is called (with the keeper's lock held: it
// must not block) when one is handed over: the caller cancels its start.
// stop ends the watch: with keep, it returns the sandbox handed over, if
// any (the caller gives back its place with Unreserve and runs in it);
// without, such a sandbox is offered again. nil when none of owner's is
// being reset: none comes back soon.
func (w *Reuse[S]) Watch(owner, class string, need []string, handed func()) (stop func(keep bool) *Kept[S]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resets[owner] == 0 {
		return nil
	}
	kw := w.enqueue(owner, class, need)
	kw.placed, kw.handed = true, handed
	return func(keep bool) *Kept[S] {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.dropWaiter(owner, kw)
		select {
		case k := <-kw.ch:
			if keep {
				k, _ = w.got(k) // counts the hit
				return k
			}
			w.offer(k)
		default:
		}
		return nil
	}
}

// enqueue adds a waiting call of owner's; called with w.mu held, in the
// same hold as the look for an idle sandbox that found none, so that no
// sandbox offered in between is missed.
func (w *Reuse[S]) enqueue(owner, class string, need []string) *keptWaiter[S] {
	kw := &keptWaiter[S]{class: class, need: need, ch: make(chan *Kept[S], 1)}
	w.waiters[owner] = append(w.waiters[owner], kw)
	return kw
}

// wait waits up to d for one of owner's sandboxes to come back from a
// reset (offer hands it over: k), or for one of owner's places to be
// given up (freed), or gives up (neither). kw is enqueued.
func (w *Reuse[S]) wait(ctx context.Context, owner string, kw *keptWaiter[S], d time.Duration) (k *Kept[S], freed bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case k := <-kw.ch:
		return w.got(k)
	case <-t.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	w.dropWaiter(owner, kw)
	w.mu.Unlock()
	select {
	case k := <-kw.ch: // handed over just before it gave up
		return w.got(k)
	default:
		return nil, false
	}
}

// got is what a waiter received: a sandbox, or nil for a freed place.
func (w *Reuse[S]) got(k *Kept[S]) (*Kept[S], bool) {
	if k == nil {
		return nil, true
	}
	w.hits.Add(1)
	return k, false
}

// dropWaiter removes kw from owner's waiters. Called with w.mu held.
func (w *Reuse[S]) dropWaiter(owner string, kw *keptWaiter[S]) {
	w.waiters[owner] = slices.DeleteFunc(w.waiters[owner], func(x *keptWaiter[S]) bool { return x == kw })
	if len(w.waiters[owner]) == 0 {
		delete(w.waiters, owner)
	}
}

// idleOf counts owner's idle kept sandboxes. Called with w.mu held.
func (w *Reuse[S]) idleOf(owner string) int {
	n := 0
	for _, k := range w.idle {
		if k.owner == owner {
			n++
		}
	}
	return n
}

// Unreserve gives back a place take reserved for a sandbox that was not
// started.
func (w *Reuse[S]) Unreserve(owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unpend(owner)
	w.release(owner)
}

// unpend ends a reservation of owner's: the place is kept (adopt) or
// given up (unreserve). Called with w.mu held.
func (w *Reuse[S]) unpend(owner string) {
	if w.pending[owner]--; w.pending[owner] <= 0 {
		delete(w.pending, owner)
	}
}

// release ends one of owner's places and tells owner's first waiting
// call, which may take it. Called with w.mu held.
func (w *Reuse[S]) release(owner string) {
	w.owned[owner]--
	if w.owned[owner] <= 0 {
		delete(w.owned, owner)
	}
	for _, kw := range w.waiters[owner] {
		if !kw.placed {
			w.dropWaiter(owner, kw) // it shifts the list: return at once
			kw.ch <- nil
			return
		}
	}
}

// pop removes and returns owner's best idle sandbox for class and need,
// or nil. Called with w.mu held.
func (w *Reuse[S]) pop(owner, class string, need []string) *Kept[S] {
	now := time.Now()
	best, bestExtra := -1, 0
	for i := 0; i < len(w.idle); i++ {
		k := w.idle[i]
		if k.owner != owner || k.class != class {
			continue
		}
		if !w.usable(k, now) {
			w.idle = slices.Delete(w.idle, i, i+1)
			i--
			w.drop(k, &w.retired)
			continue
		}
		if !coversAll(k.modules, need) {
			continue
		}
		extra := len(k.modules)
		if best < 0 || extra <= bestExtra {
			best, bestExtra = i, extra // later ones are more recently used
		}
	}
	if best < 0 {
		return nil
	}
	k := w.idle[best]
	w.idle = slices.Delete(w.idle, best, best+1)
	return k
}

// coversAll says modules (a sandbox's preloaded ones) hold every one of need.
func coversAll(modules, need []string) bool {
	for _, m := range need {
		if !poolplan.Covers(modules, m) {
			return false
		}
	}
	return true
}

// usable says a kept sandbox may serve another call.
func (w *Reuse[S]) usable(k *Kept[S], now time.Time) bool {
	p := w.h.Config()
	return k.gen == w.gen && k.sb.Alive() && k.calls < p.ReuseMaxCalls && now.Sub(k.born) < p.ReuseMaxAge.D()
}

// drop removes a kept sandbox for good, counting it in c. Called with
// w.mu held; the removal runs in the background (Close removes what it
// has not reached).
func (w *Reuse[S]) drop(k *Kept[S], c *atomic.Int64) {
	c.Add(1)
	w.release(k.owner)
	go w.h.Finish(k.sb) // not under w.mu: it writes to the sandbox's stdin
}

// Adopt makes sb, a fresh sandbox that served a call of owner, one of
// owner's kept sandboxes: in the place take reserved, or else (the call
// waited for one of owner's in vain) in the place of owner's least
// recently used idle one; nil when there is none: sb is not kept.
func (w *Reuse[S]) Adopt(sb S, owner, class string, reserved bool) *Kept[S] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if reserved {
		w.unpend(owner)
	} else {
		i := slices.IndexFunc(w.idle, func(k *Kept[S]) bool { return k.owner == owner })
		if i < 0 {
			return nil
		}
		k := w.idle[i]
		w.idle = slices.Delete(w.idle, i, i+1)
		w.drop(k, &w.evicted)
		w.owned[owner]++
	}
	now := time.Now()
	return &Kept[S]{sb: sb, owner: owner, class: class, modules: sb.Preloaded(), born: now, used: now, gen: w.gen}
}

// GiveBack ends a call that ran in k: the sandbox is retired when the
// call's outcome says so (retire: no valid reply, or a timeout, OOM or
// kill) or its life is spent,
// and otherwise reset in the background and offered again: to a waiting
// call of its owner, or to the idle list.
func (w *Reuse[S]) GiveBack(k *Kept[S], retire bool, arm *protocol.Guard) {
	k.calls++
	k.used = time.Now()
	retire = retire || k.sb.Dead()
	if !retire && !k.renewed {
		// Near its end (or at it: its last call) it asks for its successor,
		// so that its principal's call after its last finds its modules
		// imported (successor.go).
		if k.renewed = w.h.Succeed(k.owner, k.class, k.modules, w.left(k)); k.renewed {
			w.renewed.Add(1)
		}
	}
	w.mu.Lock()
	if retire || !w.usable(k, k.used) || !w.h.Begin() {
		w.drop(k, &w.retired)
		w.mu.Unlock()
		return
	}
	w.resets[k.owner]++
	w.mu.Unlock()
	go func() {
		defer w.h.End()
		ok := w.reset(k, arm)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.resets[k.owner]--; w.resets[k.owner] <= 0 {
			delete(w.resets, k.owner)
		}
		if !ok {
			w.drop(k, &w.failed)
			return
		}
		w.resetOK.Add(1)
		w.offer(k)
	}()
}

// left is how much longer k is expected to serve: its calls left at the
// pace of those it served, or its age left, whichever ends first.
func (w *Reuse[S]) left(k *Kept[S]) time.Duration {
	p := w.h.Config()
	life := k.used.Sub(k.born)
	byCalls := time.Duration(max(p.ReuseMaxCalls-k.calls, 0)) * (life / time.Duration(max(k.calls, 1)))
	return max(min(byCalls, p.ReuseMaxAge.D()-life), 0)
}

// reset asks k's runner to reset the sandbox; false when it could not.
func (w *Reuse[S]) reset(k *Kept[S], arm *protocol.Guard) bool {
	resp, fail, err := w.h.Ask(context.Background(), k.sb, &protocol.Reset{Arm: arm}, resetDeadline)
	switch {
	case err != nil:
		w.h.Log().Debug("reuse: reset failed", "sandbox", k.sb.ID(), "error", err)
		return false
	case fail != nil:
		w.h.Log().Debug("reuse: reset failed", "sandbox", k.sb.ID(), "reason", fail.Reason)
		return false
	case resp.Status != "ok":
		w.h.Log().Info("reuse: a sandbox could not be reset and was removed", "sandbox", k.sb.ID(), "reason", resp.Reason)
		return false
	}
	return true
}

// offer hands a reset sandbox to the first waiting call of its owner it
// fits, or puts it at the idle list's most recently used end (removing
// the least recently used idle one past reuse_max_idle). Called with
// w.mu held.
func (w *Reuse[S]) offer(k *Kept[S]) {
	if !w.On() || !w.usable(k, time.Now()) || w.h.Closing() {
		w.drop(k, &w.retired) // reuse turned off, or settings reloaded, while it was reset
		return
	}
	for _, kw := range w.waiters[k.owner] {
		if kw.class == k.class && coversAll(k.modules, kw.need) {
			w.dropWaiter(k.owner, kw)
			kw.ch <- k
			if kw.handed != nil {
				kw.handed()
			}
			return
		}
	}
	w.idle = append(w.idle, k)
	for len(w.idle) > w.h.Config().ReuseMaxIdle {
		old := w.idle[0]
		w.idle = w.idle[1:]
		w.drop(old, &w.evicted)
	}
}

// Expire removes idle sandboxes past their age (the executor's reaper
// calls it), and all idle ones when reuse is off.
func (w *Reuse[S]) Expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	off := !w.On()
	w.idle = slices.DeleteFunc(w.idle, func(k *Kept[S]) bool {
		if off || !w.usable(k, now) {
			w.drop(k, &w.retired)
			return true
		}
		return false
	})
}

// Flush removes every idle kept sandbox and keeps those serving calls
// from being reused (a reload changed the settings they were made with).
func (w *Reuse[S]) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	for _, k := range w.idle {
		w.drop(k, &w.retired)
	}
	w.idle = nil
}

// ReuseStats count what the kept sandboxes did (see Reuse).
type ReuseStats struct {
	// Idle are the kept sandboxes waiting for a call of their principal.
	Idle int
	// Hits are transient calls served by a kept sandbox.
	Hits int64
	// Resets passed every check; ResetFailures did not (the sandbox was
	// removed).
	Resets        int64
	ResetFailures int64
	// Retired were removed for their age or calls, or after a call that
	// ended in timeout, OOM, kill or an invalid reply; Evicted were idle
	// ones removed to stay within pool.reuse_max_idle or
	// pool.max_per_principal.
	Retired int64
	Evicted int64
	// Successors are the kept sandboxes that asked the warm pool for their
	// successor near their end (Pool.Expect).
	Successors int64
}

// Stats are the kept sandboxes' counters.
func (w *Reuse[S]) Stats() ReuseStats {
	w.mu.Lock()
	idle := len(w.idle)
	w.mu.Unlock()
	return ReuseStats{Idle: idle, Hits: w.hits.Load(), Resets: w.resetOK.Load(), ResetFailures: w.failed.Load(),
		Retired: w.retired.Load(), Evicted: w.evicted.Load(), Successors: w.renewed.Load()}
}

// Sandbox is the kept sandbox.
func (k *Kept[S]) Sandbox() S { return k.sb }

// Resetting counts owner's kept sandboxes being reset; Waiting owner's
// calls waiting for one.
func (w *Reuse[S]) Resetting(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resets[owner]
}

func (w *Reuse[S]) Waiting(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters[owner])
}
