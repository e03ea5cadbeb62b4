package pool

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Sandbox is one of the executor's sandboxes, as the pools see it: a
// handle (a pointer) they keep, compare and hand back.
type Sandbox interface {
	comparable
	// ID names the sandbox in logs.
	ID() string
	// Alive says it was not removed and its runner has not hung up.
	Alive() bool
	// Dead says it was removed, or its runner failed a call.
	Dead() bool
	// Preloaded are the modules its runner imported before its first
	// call.
	Preloaded() []string
}

// Host is what the pools ask of the executor that owns them. The pools
// call Begin, Closing, Config and Log with their own locks held, and the
// executor calls the pools (Flush, Carry, Resize) with its lock held: so
// those four must never wait for a lock of the executor's.
type Host[S Sandbox] interface {
	// Begin counts a background job the executor's Close waits for;
	// false once it is closing. End ends one.
	Begin() bool
	End()
	// Stopping is closed when the executor closes; Closing says it has.
	Stopping() <-chan struct{}
	Closing() bool
	// Config is the pool configuration in force.
	Config() config.Pool
	Log() *slog.Logger
	// Create starts a sandbox of kind with the pool's limits and has its
	// runner do the preload frame returns, called once the sandbox has
	// started (so that it carries the guard of the latest call, which may
	// have begun meanwhile); failed are the modules it could not import.
	// On an error no sandbox is left.
	Create(ctx context.Context, kind string, frame func() *protocol.Preload) (sb S, failed []string, err error)
	// Ask sends req to a sandbox nobody else holds and waits at most d
	// for the reply. A nil reply comes with a Failure (the sandbox is then
	// dead) or an error.
	Ask(ctx context.Context, sb S, req protocol.Request, d time.Duration) (*protocol.Reply, *Failure, error)
	// Destroy removes a sandbox now. Finish tells its runner to exit and
	// removes it in the background.
	Destroy(sb S)
	Finish(sb S)
	// Quiet says the transient pool holds all it wants and creates
	// nothing: the host may prepare what the next burst needs.
	Quiet()
	// Succeed asks the transient pool for the successor of owner's kept
	// sandbox of class (its limits) that preloaded modules and is
	// expected to serve about left more (Pool.Expect); false while that
	// is too early, or when no pool can make it.
	Succeed(owner, class string, modules []string, left time.Duration) bool
}

// Failure is why a sandbox did not answer: its status (timeout, oom,
// killed) and the reason given.
type Failure struct {
	Status string
	Reason string
}

// ErrClosed: the executor that owns the pool is closing.
var ErrClosed = errors.New("executor closed")

// SetGuard is what the pool's next sandboxes' workers install ahead of
// their call: the capabilities and module rules of the pool's latest call.
func (p *Pool[S]) SetGuard(g *protocol.Guard) {
	if p != nil {
		p.guard.Store(g)
	}
}

// Stats are a pool's counters: its floor, the sandboxes waiting, the
// calls it served and those it could not.
func (p *Pool[S]) Stats() (kind string, size, idle int, hits, misses int64) {
	p.mu.Lock()
	size, idle = p.size, len(p.idle) // a reload may resize the pool
	p.mu.Unlock()
	return p.kind, size, idle, p.hits.Load(), p.misses.Load()
}

// Carry takes over old's counters (a reload replaced old by p).
func (p *Pool[S]) Carry(old *Pool[S]) {
	if p != nil && old != nil {
		p.hits.Store(old.hits.Load())
		p.misses.Store(old.misses.Load())
	}
}

// Idle are the sandboxes waiting, oldest first, the one the next call
// without imports of owner would take marked by its index (-1: none).
func (p *Pool[S]) Idle(owner string) (idle []S, next int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range p.idle {
		idle = append(idle, it.sb)
	}
	return idle, pick(p.idle, nil, owner)
}

// Creating counts the creations under way; Waiting the calls that missed
// and wait for a cold start or a refill.
func (p *Pool[S]) Creating() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inflight)
}

func (p *Pool[S]) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// Drain takes every idle sandbox out of the pool (a retired one): the
// caller removes them.
func (p *Pool[S]) Drain() []S {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []S
	for _, it := range p.idle {
		out = append(out, it.sb)
	}
	p.idle = nil
	return out
}

// Took is the creation time the pool learned for a bare refill and for a
// cold start (0: not measured yet); SetTook sets them. The executor's
// tests steer a call's choice between the two with them.
func (p *Pool[S]) Took() (refill, cold time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.took[""], p.took[coldClass]
}

func (p *Pool[S]) SetTook(refill, cold time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.took[""], p.took[coldClass] = refill, cold
}

// SetHold sets how long a call that leaves the pool stocked holds back
// refills (refillHold); the executor's tests shorten or lengthen it.
func (p *Pool[S]) SetHold(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = d
}

// Hits counts the calls the pool served; Misses those it could not.
func (p *Pool[S]) Hits() int64   { return p.hits.Load() }
func (p *Pool[S]) Misses() int64 { return p.misses.Load() }

// IdleByClass counts the waiting sandboxes by class (the modules'
// poolplan key, owned by a principal or shared).
func (p *Pool[S]) IdleByClass() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleByClass()
}
