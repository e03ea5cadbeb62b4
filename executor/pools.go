package executor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/pool"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// The warm sandboxes live in package internal/pool, which decides which
// sandbox serves a call; this file is what it asks of the executor.
type (
	// sandboxPool keeps pre-started sandboxes, each for one call.
	sandboxPool = pool.Pool[*sandbox]
	// keeper keeps the transient sandboxes that served a principal's
	// calls for that principal's next calls (pool.reuse: principal).
	keeper = pool.Reuse[*sandbox]
	kept   = pool.Kept[*sandbox]
	// guard is what a worker enforces from its first run on: the
	// capabilities (its seccomp filter) and the module rules (its audit
	// hook).
	guard = protocol.Guard
)

// ReuseStats count what the kept sandboxes did (pool.reuse: principal).
type ReuseStats = pool.ReuseStats

// newPool makes the pool of kind for cfg (nil when off or size is 0).
func newPool(e *Executor, cfg config.Pool, kind string, size int) *sandboxPool {
	lim, err := resolveLimits(e.config().Docker, Limits{})
	if err != nil {
		return nil
	}
	o := pool.Options{Kind: kind, Learn: kind == backend.KindTransient, Limits: limitsClass(lim), Startup: startupTimeout}
	return pool.New[*sandbox](poolHost{e, lim}, cfg, o, size)
}

func newKeeper(e *Executor) *keeper { return pool.NewReuse[*sandbox](poolHost{e: e}, startupTimeout) }

// limitsClass keys sandboxes that can serve each other's calls: the
// container's limits and runtime (the timeout is per call).
func limitsClass(lim Limits) string {
	return fmt.Sprintf("%d/%g/%d/%s", lim.Memory, lim.CPUs, lim.Pids, lim.Runtime)
}

// reuses says whether a transient call of req, in a sandbox with no
// package volume, may run in a kept sandbox and leave its own to be kept.
func (e *Executor) reuses(req Request, pkgs string) bool {
	return e.warm != nil && e.warm.On() && req.Reuse != config.ReuseNever && pkgs == ""
}

// poolHost is the executor as its pools see it; lim are a pool's
// sandboxes' limits.
type poolHost struct {
	e   *Executor
	lim Limits
}

func (h poolHost) Begin() bool               { return h.e.bgAdd() }
func (h poolHost) End()                      { h.e.bg.Done() }
func (h poolHost) Stopping() <-chan struct{} { return h.e.stop }
func (h poolHost) Closing() bool             { return h.e.closing() }
func (h poolHost) Config() config.Pool       { return h.e.config().Pool }
func (h poolHost) Log() *slog.Logger         { return h.e.log }
func (h poolHost) Destroy(sb *sandbox)       { h.e.destroy(sb) }
func (h poolHost) Finish(sb *sandbox)        { h.e.finish(sb) }
func (h poolHost) Quiet()                    { h.e.topUpNetworks() } // holders for the next burst
func (h poolHost) Succeed(owner, class string, modules []string, left time.Duration) bool {
	return h.e.pool().Expect(class, modules, owner, left)
}
func (h poolHost) ask(ctx context.Context, sb *sandbox, req protocol.Request, d time.Duration) (*protocol.Reply, *failure, error) {
	return h.e.roundTrip(ctx, sb, req, d, false, preloadReplyLimit)
}

func (h poolHost) Ask(ctx context.Context, sb *sandbox, req protocol.Request, d time.Duration) (*protocol.Reply, *pool.Failure, error) {
	resp, fail, err := h.ask(ctx, sb, req, d)
	if fail != nil {
		return nil, &pool.Failure{Status: fail.status, Reason: fail.reason}, err
	}
	return resp, nil, err
}

// Create starts a pooled sandbox (a persistent one labelled with the id
// of the session that will take it) and has its runner preload; the
// transient pool's first sandboxes are also asked for the runner's
// compiled code.
func (h poolHost) Create(ctx context.Context, kind string, preload func() *protocol.Preload) (*sandbox, []string, error) {
	e := h.e
	meta := sandboxMeta{Kind: kind}
	if kind == backend.KindPersistent {
		meta.Session = randomHex(16) // the id of the session that will take it
		meta.Packages = sessionVolume(meta.Session)
	}
	sb, err := e.start(ctx, meta, h.lim)
	if err != nil {
		return nil, nil, err
	}
	frame := preload()
	ask := kind == backend.KindTransient && e.runner.Ask()
	if ask {
		frame.RunnerCode = true
	}
	resp, fail, err := h.ask(ctx, sb, frame, startupTimeout)
	switch {
	case err != nil:
		e.destroy(sb)
		return nil, nil, err
	case fail != nil:
		return nil, nil, &poolError{fail.reason}
	}
	if ask {
		if !e.runner.Keep(resp.RunnerCode) {
			e.log.Debug("pool: the sandbox did not give the runner's compiled code")
		}
		e.makeTree(resp.Stdlib)
	}
	sb.preloaded = frame.Modules
	return sb, resp.Failed, nil
}

type poolError struct{ msg string }

func (e *poolError) Error() string { return "preload: " + e.msg }

func (sb *sandbox) ID() string          { return sb.id }
func (sb *sandbox) Alive() bool         { return sb.alive() }
func (sb *sandbox) Dead() bool          { return sb.dead.Load() }
func (sb *sandbox) Preloaded() []string { return sb.preloaded }
