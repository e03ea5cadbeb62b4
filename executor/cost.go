package executor

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/cost"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Phase is one step of a sandbox's life as MeasureSandbox or MeasureEmpty
// saw it (see internal/cost).
type Phase = cost.Phase

// EmptyCommand is what MeasureEmpty's container runs: nothing, at once.
var EmptyCommand = []string{"true"}

var errNoStepper = errors.New("measuring a sandbox's phases needs the docker backend")

// MeasureSandbox lives through one sandbox step by step (on a backend that
// is a backend.Stepper: Docker) with the calls the executor makes for a sandbox (create, attach, start, the
// runner's ready frame, with preload the preload op importing modules, and
// forced removal) and returns each step's wall time and the CPU time that
// cpu reports across it; cpu decides what to count (bench: the Docker
// daemons and everything they start, the container's processes among
// them). The container has the config's limits and this executor's
// labels and is removed whatever happens. For `python-docker-mcp bench`;
// safe for concurrent use, but measure one at a time for clean figures.
func (e *Executor) MeasureSandbox(ctx context.Context, modules []string, preload bool, cpu func() time.Duration) ([]Phase, error) {
	st, ok := e.be.(backend.Stepper)
	if !ok {
		return nil, errNoStepper
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	return cost.Sandbox(ctx, st, measured{e}, modules, preload, cpu)
}

// MeasureEmpty lives through one container that does nothing: a sandbox's
// spec (its hardening, limits and mounts, and the network namespace it
// joins) running EmptyCommand instead of the runner, with nothing
// attached. Its phases are create, start (the API call), exit (until the
// process has exited) and remove. What it costs is Docker's own floor for
// a container like a sandbox: with one container per call, no sandbox
// costs this machine less. For `python-docker-mcp bench`, like
// MeasureSandbox.
func (e *Executor) MeasureEmpty(ctx context.Context, cpu func() time.Duration) ([]Phase, error) {
	st, ok := e.be.(backend.Stepper)
	if !ok {
		return nil, errNoStepper
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	return cost.Empty(ctx, st, measured{e}, EmptyCommand, cpu)
}

// measured makes the sandboxes that MeasureSandbox and MeasureEmpty live
// through as the executor makes its transient ones (cost.Sandboxes).
type measured struct{ e *Executor }

// Ready readies a sandbox from a transient sandbox's spec (the config's
// limits, this executor's labels, the interpreter tree and, as the
// executor's sandboxes do, a leased network namespace) that edit may
// change. A holder started for it is made here, before the measuring
// starts, as it serves many sandboxes.
func (m measured) Ready(ctx context.Context, edit func(*backend.Spec)) (func(context.Context) (string, func(), error), error) {
	e := m.e
	st := e.be.(backend.Stepper)
	lim, err := resolveLimits(e.config().Docker, Limits{})
	if err != nil {
		return nil, err
	}
	meta := e.owned(sandboxMeta{Kind: backend.KindTransient})
	spec := sandboxSpec(e.config().Docker, lim, meta)
	if edit != nil {
		edit(&spec)
	}
	var prep backend.Prepared
	if p, ok := e.be.(backend.Preparer); ok {
		needs := e.needs(meta)
		needs.Tree = true
		if prep, err = p.Prepare(ctx, &spec, needs); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) (string, func(), error) {
		id, err := st.Define(ctx, spec)
		if err != nil {
			if prep.Release != nil {
				prep.Release(false)
			}
			return "", nil, e.createErr(err)
		}
		sb := &sandbox{id: id, release: prep.Release, meta: meta, quit: make(chan struct{})}
		if !e.track(sb) {
			e.returnPrepared(sb, e.removeContainer(sb.id))
			return "", nil, ErrClosed
		}
		return id, func() { e.destroy(sb) }, nil
	}, nil
}

// Preamble sends the runner as to every sandbox.
func (m measured) Preamble(stdin io.Writer) { m.e.sendRunner(stdin) }

// AskCode says whether the runner's compiled code is still wanted, as the
// pool's first sandbox is asked for it.
func (m measured) AskCode() bool { return m.e.runner.Ask() }

// Answered keeps the runner's code the sandboxes after it load, and has
// the backend make its interpreter tree before the next sandbox, as a
// pool's sandboxes soon have it.
func (m measured) Answered(ctx context.Context, reply *protocol.Reply) {
	m.e.runner.Keep(reply.RunnerCode)
	if t, ok := m.e.be.(backend.Tree); ok && reply.Stdlib != "" {
		t.MakeTree(ctx, m.e.helperSpec(backend.KindTree), reply.Stdlib)
	}
}
