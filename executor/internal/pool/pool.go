// Package pool holds the executor's warm sandboxes: Pool keeps
// pre-started ones, each for one call; Reuse keeps those that served a
// principal's transient calls for that principal's next calls. Both hold
// the executor's sandboxes (S) and ask the executor (Host) to make, ask
// and remove them: the pools decide which sandbox serves a call, the host
// what a sandbox is.
package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Pool keeps pre-started sandboxes: the runner waiting, a preload class's
// modules imported and one empty run done. Each serves exactly one call and
// is then destroyed.
//
// The transient pool follows demand (see package internal/poolplan): it holds between
// pool.size and pool.max_size sandboxes, as many as calls recently arrived
// within one creation time of each other, split among the preload classes
// recent calls needed (bare interpreter, the scientific stack, ...). A call
// takes the warm sandbox that fits it best (pick). Refills run whenever the
// pool is below its target, with at most pool.max_concurrent_creations at a
// time: that is the pool's CPU budget (a creation keeps about one core busy
// while it runs). A call that leaves the pool stocked holds back the refill
// it asks for until it has answered, at most refillHold: the creation's
// CPU would otherwise slow that call down (measured: spaced print(1) p50
// 9.9 ms with the refill beside the call, 7.2-8.1 ms after it), and
// the sandboxes left serve the next calls meanwhile. A call that empties
// the pool starts its refill at once.
//
// A call that finds no warm sandbox starts a cold one (no preload: it
// imports what it needs itself, and it waits for no refill slot) and takes
// whichever is ready first, that cold sandbox or the next refill; the other
// joins the pool. So a call never waits for a refill a cold start would
// beat. A call that needs no preloaded module (for which a cold sandbox and
// a refill are the same thing) holds its cold start only while a refill
// already under way is expected sooner than a cold start would be (each
// creation's time is learned per class), and starts it if that refill is
// late. On a busy machine creations share the CPUs, so a cold start begun
// beside refills that are nearly done slows them all and serves nobody
// sooner. A call that needs preloaded modules starts cold at once: its
// cold sandbox lacks them, and while the call imports them the refills
// under way stock the pool for the calls after it (measured: back-to-back
// pandas calls p50 83-99 ms so, 310-399 ms when they held too).
//
// The persistent pool holds pool.size (at most one) sandbox with
// pool.preload imported, labelled with the id of the session that will take
// it (pooled sandboxes carry no owner label: the owner is not known yet).
//
// Pooled sandboxes have the config's limits; a request with tighter memory,
// CPUs or pids gets a cold sandbox, never a looser one. Sandboxes older
// than pool.max_age, or dead (killed from outside), are replaced. A pooled
// sandbox answers a ping within pingDeadline before it gets a call; one
// that does not (frozen, hung) is removed and the call served by another
// or a cold one, so a sandbox's fault is never reported as the code's.
//
// Classes are learned per principal: a class of modules a principal's
// calls imported is made for that principal only, and its sandboxes go to
// that principal's calls only, so no call sees what another principal
// imports. The bare class and the operator's pool.preload class are
// shared. The pool never holds more than maxSize idle sandboxes.
type Pool[S Sandbox] struct {
	h       Host[S]
	kind    string // the sandboxes' kind (Options.Kind)
	limits  string // the class of the pooled sandboxes' limits (Options.Limits)
	startup time.Duration
	size    int // the floor
	maxSize int
	maxAge  time.Duration
	preload []string      // the persistent pool's class; the transient pool's seed
	learn   bool          // classes and size follow demand (transient)
	slots   chan struct{} // creation concurrency: the CPU budget

	hits   atomic.Int64          // calls served from the pool
	misses atomic.Int64          // calls that found nothing warm (or other limits) and started cold
	guard  atomic.Pointer[guard] // the capabilities and module rules of the pool's latest call

	mu         sync.Mutex
	idle       []pooled[S]
	demand     poolplan.Demand
	unloadable map[string]bool          // modules whose preload failed: left out of classes
	waiters    []*waiter[S]             // calls that missed, racing a cold start against refills
	inflight   map[*refill]bool         // the creations under way
	took       map[string]time.Duration // a refill's time by class, cold ("\x00cold") included: moving averages
	drained    time.Time                // when a call last found the pool empty or left it empty
	lastErr    string                   // the last creation error, logged once
	heldBy     S                        // the latest call that left the pool stocked, until it answers
	holdTill   time.Time                // and at the latest until then
	expected   map[string][]expectation // successors kept sandboxes asked for, by class (successor.go)
	hold       time.Duration            // refillHold; tests shorten or lengthen it
	kick       chan struct{}
}

// refillHold bounds how long a call that leaves the pool stocked holds
// back refills: a long call does not keep the pool below its target.
const refillHold = 50 * time.Millisecond

type pooled[S Sandbox] struct {
	sb      S
	born    time.Time
	modules []string // its class's modules, imported
	owner   string   // the principal whose imports chose modules; "" shared
}

// class is the pooled sandbox's class key, its owner included.
func (it pooled[S]) class() string { return poolplan.Owned(it.owner, poolplan.Key(it.modules)) }

// pingDeadline bounds a pooled sandbox's answer to the ping it gets before
// it is handed out; an idle runner answers in well under a millisecond.
const pingDeadline = 2 * time.Second

// waiter is a call that missed: it gets exactly one result, its own cold
// start's or a refill's (of a class it may have), whichever comes first.
// done is closed once it has left the pool's waiters (served, or its call
// gave up).
type waiter[S Sandbox] struct {
	ch    chan started[S]
	done  chan struct{}
	owner string // the call's principal
}

// refill is a creation under way.
type refill struct {
	class string
	began time.Time
}

// coldClass keys the cold starts' times in pool.took.
const coldClass = "\x00cold"

// started is what a waiter gets: a sandbox (it.sb) with its class, or err.
type started[S Sandbox] struct {
	it  pooled[S]
	err error
}

// Options say what a pool holds.
type Options struct {
	// Kind is the sandboxes' kind, handed to Host.Create and named in
	// logs.
	Kind string
	// Learn: classes and size follow demand (the transient pool); else
	// the pool holds size sandboxes of pool.preload's class.
	Learn bool
	// Limits keys the pooled sandboxes' limits: a call of other limits
	// (Fits) is never served from the pool.
	Limits string
	// Startup bounds a creation, the runner's warm-up run included.
	Startup time.Duration
}

// New makes a pool of size sandboxes (the floor) for cfg, or nil when
// pooling is off or size is 0. Run keeps it filled.
func New[S Sandbox](h Host[S], cfg config.Pool, o Options, size int) *Pool[S] {
	if !cfg.Enabled || size <= 0 {
		return nil
	}
	n := cfg.MaxConcurrentCreations
	if n <= 0 {
		n = 1
	}
	p := &Pool[S]{
		h:          h,
		kind:       o.Kind,
		limits:     o.Limits,
		startup:    o.Startup,
		size:       size,
		maxSize:    size,
		maxAge:     cfg.MaxAge.D(),
		preload:    cfg.Preload,
		slots:      make(chan struct{}, n),
		inflight:   map[*refill]bool{},
		took:       map[string]time.Duration{},
		unloadable: map[string]bool{},
		hold:       refillHold,
		kick:       make(chan struct{}, 1),
	}
	if o.Learn {
		p.learn = true
		p.maxSize = max(size, cfg.MaxSize)
	}
	p.demand = poolplan.Demand{Floor: p.size, Max: p.maxSize, Seed: poolplan.Key(cfg.Preload)}
	return p
}

// Resize sets the floor (pool.size) and the transient pool's cap
// (pool.max_size) on a reload: refills start at once, sandboxes beyond the
// new target are trimmed as those demand left are.
func (p *Pool[S]) Resize(size, maxSize int) {
	p.mu.Lock()
	p.size, p.maxSize = size, size
	if p.learn {
		p.maxSize = max(size, maxSize)
	}
	p.demand.Floor, p.demand.Max = p.size, p.maxSize
	p.mu.Unlock()
	p.Signal()
}

// Fits says whether a pooled sandbox has exactly the resource limits and
// the runtime of limits, a class like Options.Limits (the timeout is per
// call): a call of another runtime than the pool's (docker.runtime) never
// gets a pooled sandbox.
func (p *Pool[S]) Fits(limits string) bool {
	return p != nil && limits == p.limits
}

// classOf is the class a call of owner importing need would be best
// served by: need without the modules that cannot be preloaded, owned by
// owner unless it is the bare class or the operator's pool.preload.
func (p *Pool[S]) classOf(need []string, owner string) string {
	var m []string
	for _, x := range need {
		if !p.unloadable[x] {
			m = append(m, x)
		}
	}
	c := poolplan.Key(m)
	if c == p.demand.Seed {
		return c
	}
	return poolplan.Owned(owner, c)
}

// plan is the number of sandboxes of each class the pool wants now.
func (p *Pool[S]) plan(now time.Time) map[string]int {
	if !p.learn {
		return map[string]int{poolplan.Key(p.preload): p.size}
	}
	plan := map[string]int{}
	for c, n := range p.demand.Plan(now) {
		if len(p.unloadable) > 0 {
			c = p.classOf(poolplan.Modules(c), poolplan.Owner(c))
		}
		plan[c] += n
	}
	p.expect(plan, now)
	return plan
}

// usable says an idle sandbox can still serve a call.
func (p *Pool[S]) usable(it pooled[S], now time.Time) bool {
	return it.sb.Alive() && (p.maxAge <= 0 || now.Sub(it.born) < p.maxAge)
}

// Take hands out the live pooled sandbox that fits a call of owner
// importing need (preloadable modules) best, or nil; never one preloaded
// from another principal's imports. Every call is counted as demand. The
// sandbox has answered a ping first: one that did not is retired and the
// next tried.
func (p *Pool[S]) Take(limits string, need []string, owner string) (sb S, ok bool) {
	if p == nil {
		return sb, false
	}
	if !p.Fits(limits) {
		p.misses.Add(1)
		return sb, false // a miss: other limits than the pool's
	}
	p.mu.Lock()
	p.demand.Record(time.Now(), p.classOf(need, owner))
	p.mu.Unlock()
	for {
		sb, ok := p.pop(need, owner)
		p.Signal() // the pool may want more now
		if !ok {
			p.misses.Add(1)
			return sb, false // a miss: nothing warm
		}
		if p.ping(sb) {
			p.hits.Add(1) // a hit
			return sb, true
		}
		p.Answered(sb) // retired: its hold ends, the pool refills
	}
}

// Ready says whether an idle sandbox for a call of owner with limits that
// has need imported waits in the pool now (take may still miss it: another
// call can take it first).
func (p *Pool[S]) Ready(limits string, need []string, owner string) bool {
	if p == nil || !p.Fits(limits) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i := pick(p.idle, need, owner)
	return i >= 0 && coversAll(p.idle[i].modules, need)
}

// pop removes the usable idle sandbox that fits a call of owner importing
// need best from the pool and returns it, or false; unusable ones met on the
// way are destroyed. A call that leaves the pool stocked holds back
// refills (see refillHold).
func (p *Pool[S]) pop(need []string, owner string) (sb S, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for {
		i := pick(p.idle, need, owner)
		if i < 0 {
			p.drained = now
			return sb, false
		}
		it := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		if !p.usable(it, now) {
			go p.h.Destroy(it.sb)
			continue
		}
		p.taken(it, owner)
		if len(p.idle) == 0 {
			var none S
			p.drained = now
			p.heldBy, p.holdTill = none, time.Time{}
		} else {
			p.heldBy, p.holdTill = it.sb, now.Add(p.hold)
			time.AfterFunc(p.hold, p.Signal)
		}
		return it.sb, true
	}
}

// ping says whether a sandbox nobody else holds answers a ping within
// pingDeadline; if not, it is removed (a frozen or hung sandbox would
// otherwise spend the call's time limit and be blamed on the code).
func (p *Pool[S]) ping(sb S) bool {
	_, fail, err := p.h.Ask(context.Background(), sb, &protocol.Ping{}, pingDeadline)
	if err == nil && fail == nil {
		return true
	}
	reason := fmt.Sprintf("no answer within %s", pingDeadline)
	if fail != nil && fail.Status != "timeout" {
		reason = fail.Reason
	}
	p.h.Log().Warn("pool: a pooled sandbox did not answer a ping; removed", "kind", p.kind, "container", sb.ID(), "reason", reason)
	p.h.Destroy(sb)
	return false
}

// ColdStart serves a call the pool missed (limits fit, nothing warm) that
// imports need (preloadable modules): it starts a sandbox for the call with
// start (at once, or after holdCold for a call needing no preloaded module)
// and takes it or the pool's next refill, whichever is ready first; the
// other joins the pool.
// start must make a sandbox fit for the pool (no owner, the pool's
// limits). The start runs on even if ctx ends (its sandbox joins the pool).
func (p *Pool[S]) ColdStart(ctx context.Context, need []string, owner string, start func(context.Context) (S, error)) (S, error) {
	if !p.h.Begin() {
		var none S
		return none, ErrClosed
	}
	w := &waiter[S]{ch: make(chan started[S], 1), done: make(chan struct{}), owner: owner}
	p.mu.Lock()
	p.waiters = append(p.waiters, w)
	var hold time.Duration
	if p.classOf(need, owner) == "" {
		hold = p.holdCold(len(p.waiters)-1, time.Now(), owner)
	}
	p.mu.Unlock()
	go func() {
		defer p.h.End()
		if hold > 0 {
			t := time.NewTimer(hold)
			select {
			case <-w.done:
				t.Stop()
				return // a refill served the call, or the call gave up
			case <-t.C: // the refill is late: start cold after all
			case <-p.h.Stopping():
				t.Stop() // closing: the start fails at once and tells the call
			}
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.startup)
		t0 := time.Now()
		sb, err := start(sctx)
		p.mu.Lock()
		if err == nil {
			p.learnTook(coldClass, time.Since(t0))
		}
		won := p.dropWaiter(w)
		if won {
			w.ch <- started[S]{pooled[S]{sb: sb, born: time.Now()}, err} // the cold start won
		}
		p.mu.Unlock()
		if !won && err == nil {
			// A refill served the call: this one does the runner's
			// warm-up run, as pooled ones do, and joins the pool.
			if p.warm(sctx, sb) {
				p.mu.Lock()
				p.donate(sb)
				p.mu.Unlock()
			}
		}
		cancel()
	}()
	select {
	case r := <-w.ch:
		return r.it.sb, r.err
	case <-ctx.Done():
		p.mu.Lock()
		if !p.dropWaiter(w) {
			// Served meanwhile: the sandbox is unused, back to the pool
			// with its class (and owner).
			if r := <-w.ch; r.err == nil {
				p.deliver(r.it)
			}
		}
		p.mu.Unlock()
		var none S
		return none, ctx.Err()
	}
}

// dropWaiter removes w from the waiters; false if it was served already.
// p.mu is held.
func (p *Pool[S]) dropWaiter(w *waiter[S]) bool {
	i := slices.Index(p.waiters, w)
	if i < 0 {
		return false
	}
	p.waiters = slices.Delete(p.waiters, i, i+1)
	close(w.done)
	return true
}

// holdCold is how long the call of owner that is waiter k (0: the next to
// be served) lets its cold start wait for a refill under way: 0 (start at
// once) unless the k-th refill it may have to finish is expected sooner
// than a cold start would be, then that refill's expected remaining time
// plus a quarter of a cold start's, after which the refill counts as late
// (a refill of a class not measured yet counts as never; one of another
// principal's class is never handed to this call).
// p.mu is held.
func (p *Pool[S]) holdCold(k int, now time.Time, owner string) time.Duration {
	cold, ok := p.took[coldClass]
	if !ok {
		// No cold start measured yet: a bare refill is a cold start plus
		// the runner's warm-up run, so a little longer.
		cold, ok = p.took[""]
	}
	if !ok {
		return 0 // nothing measured yet
	}
	left := make([]time.Duration, 0, len(p.inflight))
	for r := range p.inflight {
		if o := poolplan.Owner(r.class); o != "" && o != owner {
			continue
		}
		if est, ok := p.took[poolplan.Unowned(r.class)]; ok {
			left = append(left, max(est-now.Sub(r.began), 0))
		} // a class not measured yet: no telling when it ends
	}
	slices.Sort(left)
	if k >= len(left) || left[k] >= cold {
		return 0
	}
	return left[k] + cold/4
}

// learnTook folds one creation's time into class's moving average. p.mu
// is held.
func (p *Pool[S]) learnTook(class string, d time.Duration) {
	if old, ok := p.took[class]; ok {
		d = time.Duration(0.7*float64(old) + 0.3*float64(d))
	}
	p.took[class] = d
}

// deliver hands a new sandbox to the first waiting call that may have it
// (its class is shared or the call's principal's), or keeps it; a pool
// that holds maxSize idle sandboxes already removes it instead (refills
// and cold starts that lost their race can land together). p.mu is held.
func (p *Pool[S]) deliver(it pooled[S]) {
	for i, w := range p.waiters {
		if it.owner != "" && it.owner != w.owner {
			continue
		}
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.taken(it, w.owner) // a call takes it, as in pop
		w.ch <- started[S]{it: it}
		close(w.done)
		return
	}
	if len(p.idle) >= p.maxSize {
		go p.h.Destroy(it.sb)
		return
	}
	p.idle = append(p.idle, it)
}

// donate keeps an unused cold-started sandbox as a bare one, unless the
// pool is full. p.mu is held.
func (p *Pool[S]) donate(sb S) {
	p.deliver(pooled[S]{sb: sb, born: time.Now()})
}

// IdleCount is the number of sandboxes waiting in the pool.
func (p *Pool[S]) IdleCount() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// idleByClass counts waiting sandboxes by class. p.mu is held.
func (p *Pool[S]) idleByClass() map[string]int {
	n := map[string]int{}
	for _, it := range p.idle {
		n[it.class()]++
	}
	return n
}

// Answered ends the refill hold of the call that took sb, if it holds one.
func (p *Pool[S]) Answered(sb S) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.heldBy == sb {
		var none S
		p.heldBy, p.holdTill = none, time.Time{}
	}
	p.mu.Unlock()
	p.Signal()
}

// held reports whether refills wait for a call to answer. p.mu is held.
func (p *Pool[S]) held(now time.Time) bool {
	var none S
	return p.heldBy != none && now.Before(p.holdTill) && len(p.idle) > 0
}

// Signal wakes the pool's upkeep: its demand or its calls changed.
func (p *Pool[S]) Signal() {
	if p == nil {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run keeps the pool at its target until stop is closed.
func (p *Pool[S]) Run(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		p.prune()
		if p.fill(stop) && p.learn && len(p.slots) == 0 {
			p.h.Quiet() // quiet: the host may prepare for the next burst
		}
		select {
		case <-stop:
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// prune drops dead and stale sandboxes, and those beyond their class's
// target that have waited poolplan.TrimAfter (demand went away), newest kept.
func (p *Pool[S]) prune() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	plan := p.plan(now)
	kept := map[string]int{}
	keep := make([]pooled[S], 0, len(p.idle))
	for i := len(p.idle) - 1; i >= 0; i-- {
		it := p.idle[i]
		c := it.class()
		surplus := kept[c] >= plan[c] && now.Sub(it.born) >= poolplan.TrimAfter
		if p.usable(it, now) && !surplus {
			keep = append(keep, it)
			kept[c]++
		} else {
			go p.h.Destroy(it.sb)
		}
	}
	slices.Reverse(keep)
	p.idle = keep
}

// fill starts refills while the pool is below its target and a creation
// slot is free; done says the pool wants nothing more.
func (p *Pool[S]) fill(stop <-chan struct{}) (done bool) {
	for {
		p.mu.Lock()
		_, want := p.next()
		held := p.held(time.Now())
		p.mu.Unlock()
		if !want {
			return true
		}
		if held {
			return false // the call's answer or the hold's end kicks
		}
		select {
		case p.slots <- struct{}{}:
		case <-stop:
			return false
		default:
			return false // the budget is in use; the end of a creation kicks
		}
		p.mu.Lock()
		class, want := p.next()
		if !want || !p.room(class) {
			p.mu.Unlock()
			<-p.slots
			return true
		}
		r := &refill{class: class, began: time.Now()}
		p.inflight[r] = true
		p.mu.Unlock()
		if !p.h.Begin() {
			p.mu.Lock()
			delete(p.inflight, r)
			p.mu.Unlock()
			<-p.slots
			return false // closing
		}
		go func() {
			defer p.h.End()
			modules := poolplan.Modules(class)
			sb, err := p.create(modules, stop)
			p.mu.Lock()
			delete(p.inflight, r)
			if err == nil {
				p.demand.Created(time.Since(r.began))
				p.learnTook(poolplan.Unowned(class), time.Since(r.began)) // as long whoever owns it
				p.deliver(pooled[S]{sb: sb, born: time.Now(), modules: modules, owner: poolplan.Owner(class)})
				p.lastErr = ""
			}
			p.mu.Unlock()
			if err != nil {
				select {
				case <-stop:
				default:
					p.mu.Lock()
					repeat := err.Error() == p.lastErr
					p.lastErr = err.Error()
					p.mu.Unlock()
					// A missing image is the server's to report; the pool
					// just retries.
					if !repeat && !errors.Is(err, backend.ErrImageMissing) {
						p.h.Log().Warn("pool: start sandbox (retrying every 5 s)", "kind", p.kind, "err", err)
					}
					// Back off, holding the slot, so a missing image or a
					// gone daemon does not spin.
					select {
					case <-stop:
					case <-time.After(5 * time.Second):
					}
				}
			}
			<-p.slots
			p.Signal()
		}()
	}
}

// room says whether one more refill of class keeps the pool within
// maxSize sandboxes, idle and under way. A full pool makes room by
// removing its oldest idle sandbox of another principal's class beyond
// its target (demand moved on), which would otherwise wait poolplan.TrimAfter
// while serving nobody else. A shared sandbox beyond its target is kept
// that long instead: any call can use it; but not in the way of a kept
// sandbox's successor. p.mu is held.
func (p *Pool[S]) room(class string) bool {
	if len(p.idle)+len(p.inflight) < p.maxSize {
		return true
	}
	plan := p.plan(time.Now())
	have := p.idleByClass()
	for i, it := range p.idle {
		// A successor (successor.go) may also replace a shared one.
		if c := it.class(); c != class && (it.owner != "" || p.successor(class)) && have[c] > plan[c] {
			p.idle = slices.Delete(p.idle, i, i+1)
			go p.h.Destroy(it.sb)
			return true
		}
	}
	return false
}

// guard is what a worker enforces from its first run on: the capabilities
// (its seccomp filter) and the module rules (its audit hook).
type guard = protocol.Guard

// preloadFrame is the runner's preload op: import modules, then fork the
// spare worker and, when the pool has seen a call, have it install that
// call's guard ahead of the next one (a call whose guard differs gets a
// fresh worker, as before).
func (p *Pool[S]) preloadFrame(modules []string) *protocol.Preload {
	return &protocol.Preload{Modules: orEmpty(modules), Arm: p.guard.Load()}
}

// warm does the runner's warm-up run (a preload of nothing) in a sandbox
// nobody else holds; false (and the sandbox destroyed) if it failed.
func (p *Pool[S]) warm(ctx context.Context, sb S) bool {
	_, fail, err := p.h.Ask(ctx, sb, p.preloadFrame(nil), p.startup)
	if err != nil || fail != nil {
		p.h.Destroy(sb)
		return false
	}
	return true
}

// next is the class the next refill makes, if any. p.mu is held.
func (p *Pool[S]) next() (string, bool) {
	now := time.Now()
	plan := p.plan(now)
	var urgent []string
	if p.learn && !p.drained.IsZero() && now.Sub(p.drained) < poolplan.PressureFor {
		for _, c := range p.demand.Latest(poolplan.UrgentOf) {
			urgent = append(urgent, p.classOf(poolplan.Modules(c), poolplan.Owner(c)))
		}
	}
	creating := map[string]int{}
	for r := range p.inflight {
		creating[r.class]++
	}
	idle := p.idleByClass()
	if len(urgent) > 0 {
		// Under pressure any waiting sandbox counts as one more call
		// served, except one of a principal's class beyond its target:
		// it serves that principal only, whose calls the plan no longer
		// expects (room removes it for a refill).
		for c, n := range idle {
			if poolplan.Owner(c) != "" {
				idle[c] = min(n, plan[c])
			}
		}
		// And a principal's class is made only below its target.
		urgent = slices.DeleteFunc(urgent, func(c string) bool {
			return poolplan.Owner(c) != "" && idle[c]+creating[c] >= plan[c]
		})
	}
	return poolplan.Next(plan, idle, creating, urgent)
}

// create starts one sandbox, imports modules in it and does one empty run
// (the runner's preload op), so its one call pays neither. Stopping the
// pool (closing the server, a reload) gives it up: a refill can wait long
// for room on a full cluster, and no call needs it any more.
func (p *Pool[S]) create(modules []string, stop <-chan struct{}) (S, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.startup)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	sb, failed, err := p.h.Create(ctx, p.kind, func() *protocol.Preload { return p.preloadFrame(modules) })
	if err != nil {
		return sb, err
	}
	if len(failed) > 0 {
		// Learned classes guess that `from M import n` names a submodule;
		// a wrong guess is only remembered. The operator's list is warned of.
		var configured []string
		p.mu.Lock()
		for _, f := range failed {
			name, _, _ := strings.Cut(f, ":")
			if !p.unloadable[name] && slices.Contains(p.preload, name) {
				configured = append(configured, f)
			}
			p.unloadable[name] = true
		}
		p.mu.Unlock()
		if len(configured) > 0 {
			p.h.Log().Warn("pool: preload failed", "modules", configured)
		}
	}
	return sb, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// pick returns the index in idle of the sandbox that serves a call of
// owner needing need at the least cost: fewest needed modules it has not
// imported (the call would import them itself), then fewest modules the
// call does not need (the cheapest to replace), then the oldest. Sandboxes
// of another principal's class are never picked. -1 when none is left.
func pick[S Sandbox](idle []pooled[S], need []string, owner string) int {
	best, bestMiss, bestExtra := -1, 0, 0
	for i, it := range idle {
		if it.owner != "" && it.owner != owner {
			continue
		}
		miss := 0
		for _, m := range need {
			if !poolplan.Covers(it.modules, m) {
				miss++
			}
		}
		extra := 0
		for _, x := range it.modules {
			if !slices.ContainsFunc(need, func(m string) bool { return x == m || strings.HasPrefix(x, m+".") }) {
				extra++
			}
		}
		if best < 0 || miss < bestMiss || (miss == bestMiss && extra < bestExtra) {
			best, bestMiss, bestExtra = i, miss, extra
		}
	}
	return best
}
