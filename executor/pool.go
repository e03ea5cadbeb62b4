package executor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// pool keeps pre-started sandboxes of one kind: the runner waiting, the
// configured modules imported. Each serves exactly one call and is then
// destroyed; the pool refills in the background with at most
// max_concurrent_creations creations at a time. Sandboxes older than
// max_age, or dead (killed from outside), are replaced.
//
// The transient pool holds pool.size sandboxes; the persistent pool holds
// one, labelled with the id of the session that will take it (pooled
// sandboxes carry no owner label: the owner is not known yet).
//
// Pooled sandboxes have the config's limits; a request with tighter memory,
// CPUs or pids gets a cold sandbox, never a looser one. An empty pool means
// a cold start: a refill takes as long as a cold start, so waiting for one
// would not be faster.
//
// Refills wait while a call is running (up to refillDelay after the pool's
// last hand-out): starting a container and importing the preload modules
// costs a CPU-second, and on a small machine that would be taken from the
// very call the pool is there to speed up.
type pool struct {
	e       *Executor
	kind    string // KindTransient, or KindPersistent: each sandbox labelled with a fresh session id
	lim     Limits
	size    int
	maxAge  time.Duration
	preload []string
	slots   chan struct{} // creation concurrency

	hits   atomic.Int64 // calls served from the pool
	misses atomic.Int64 // calls that found it empty (or other limits) and started cold

	mu       sync.Mutex
	idle     []pooled
	lastTake time.Time
	creating int
	lastErr  string // the last creation error, logged once
	kick     chan struct{}
}

type pooled struct {
	sb   *sandbox
	born time.Time
}

func newPool(e *Executor, cfg config.Pool, kind string, size int) *pool {
	lim, err := resolveLimits(e.cfg.Docker, Limits{})
	if err != nil || !cfg.Enabled || size <= 0 {
		return nil
	}
	n := cfg.MaxConcurrentCreations
	if n <= 0 {
		n = 1
	}
	return &pool{
		e:       e,
		kind:    kind,
		lim:     lim,
		size:    size,
		maxAge:  cfg.MaxAge.D(),
		preload: cfg.Preload,
		slots:   make(chan struct{}, n),
		kick:    make(chan struct{}, 1),
	}
}

// fits says whether a pooled sandbox has exactly the resource limits asked
// for (the timeout is per call).
func (p *pool) fits(lim Limits) bool {
	return lim.Memory == p.lim.Memory && lim.CPUs == p.lim.CPUs && lim.Pids == p.lim.Pids
}

// take hands out a live pooled sandbox, or nil.
func (p *pool) take(lim Limits) *sandbox {
	if p == nil {
		return nil
	}
	if !p.fits(lim) {
		p.misses.Add(1)
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastTake = time.Now()
	for len(p.idle) > 0 {
		it := p.idle[0]
		p.idle = p.idle[1:]
		if it.sb.alive() && (p.maxAge <= 0 || time.Since(it.born) < p.maxAge) {
			p.hits.Add(1)
			return it.sb
		}
		go p.e.destroy(it.sb)
	}
	p.misses.Add(1)
	return nil
}

// idleCount is the number of sandboxes waiting in the pool.
func (p *pool) idleCount() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *pool) signal() {
	if p == nil {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run keeps the pool full until the executor stops.
func (p *pool) run(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		p.prune()
		p.fill(stop)
		select {
		case <-stop:
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// prune drops dead and stale sandboxes.
func (p *pool) prune() {
	p.mu.Lock()
	keep := p.idle[:0]
	for _, it := range p.idle {
		if it.sb.alive() && (p.maxAge <= 0 || time.Since(it.born) < p.maxAge) {
			keep = append(keep, it)
		} else {
			go p.e.destroy(it.sb)
		}
	}
	p.idle = keep
	p.mu.Unlock()
}

// refillDelay bounds how long a refill waits for running calls to end.
const refillDelay = 2 * time.Second

// fill starts creations until idle + creating reaches the pool size, unless
// calls are running and the pool handed out a sandbox less than refillDelay
// ago (the end of each call, and a 1 s ticker, try again).
func (p *pool) fill(stop <-chan struct{}) {
	for {
		p.mu.Lock()
		short := p.size - len(p.idle) - p.creating
		if short > 0 && p.e.calls.Load() > 0 && time.Since(p.lastTake) < refillDelay {
			p.mu.Unlock()
			return
		}
		if short <= 0 {
			p.mu.Unlock()
			return
		}
		p.creating++
		p.mu.Unlock()
		select {
		case p.slots <- struct{}{}:
		case <-stop:
			p.mu.Lock()
			p.creating--
			p.mu.Unlock()
			return
		}
		p.e.bg.Add(1)
		go func() {
			defer p.e.bg.Done()
			defer func() { <-p.slots }()
			sb, err := p.create()
			p.mu.Lock()
			p.creating--
			if err == nil {
				p.idle = append(p.idle, pooled{sb: sb, born: time.Now()})
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
					// A missing image is the server's to report (once, with
					// the text tool results carry); the pool just retries.
					if !repeat && !errors.Is(err, ErrImageMissing) {
						p.e.log.Warn("pool: start sandbox (retrying every 5 s)", "kind", p.kind, "err", err)
					}
					// Back off so a missing image or a gone daemon does not spin.
					select {
					case <-stop:
					case <-time.After(5 * time.Second):
					}
				}
			}
			p.signal()
		}()
	}
}

// create starts one sandbox and imports the preload modules in it.
func (p *pool) create() (*sandbox, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
	defer cancel()
	meta := sandboxMeta{Kind: p.kind}
	if p.kind == KindPersistent {
		meta.Session = randomHex(16) // the id of the session that will take it
		meta.Packages = sessionVolume(meta.Session)
	}
	sb, err := p.e.start(ctx, meta, p.lim)
	if err != nil {
		return nil, err
	}
	if len(p.preload) > 0 {
		resp, fail, err := p.e.roundTrip(ctx, sb, map[string]any{"op": "preload", "modules": p.preload}, startupTimeout, false, preloadReplyLimit)
		switch {
		case err != nil:
			p.e.destroy(sb)
			return nil, err
		case fail != nil:
			return nil, &poolError{fail.reason}
		case len(resp.Failed) > 0:
			p.e.log.Warn("pool: preload failed", "modules", resp.Failed)
		}
	}
	return sb, nil
}

type poolError struct{ msg string }

func (e *poolError) Error() string { return "preload: " + e.msg }
