package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Phase is one step of a sandbox's life as MeasureSandbox saw it.
type Phase struct {
	// Name is create, attach, start (the API call), ready (the runner's
	// ready frame), preload (the preload op), or remove.
	Name string
	Wall time.Duration
	// CPU is the growth of what the caller's cpu function reports across
	// the step.
	CPU time.Duration
}

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
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	r, err := e.createMeasured(ctx, cpu, nil)
	if err != nil {
		return nil, err
	}
	defer r.discard()
	box, err := r.st.AttachDefined(ctx, r.sb.id)
	if err != nil {
		return nil, err
	}
	defer box.Close()
	r.mark("attach")
	pr := box.Stdout
	if err := r.st.Start(ctx, r.sb.id); err != nil {
		return nil, err
	}
	r.mark("start")
	go e.sendRunner(box.Stdin)
	var ready protocol.Ready
	if err := readCostFrame(pr, &ready); err != nil || ready.Op != "ready" {
		return nil, fmt.Errorf("start sandbox: no ready frame from the runner (%v, op %q)", err, ready.Op)
	}
	r.mark("ready")
	// As the pool does, the first fresh sandbox is asked for the runner's
	// compiled code, which the sandboxes after it load. Without a preload
	// the ask is a round trip of its own, left out of the phases (the
	// caller's warm-up sandbox takes it).
	ask := e.runner.ask()
	if preload || ask {
		req := &protocol.Preload{Header: protocol.Header{ID: 1, Nonce: randomHex(16)}, Modules: orEmpty(modules), RunnerCode: ask}
		if !preload {
			req.Modules = []string{}
		}
		if err := protocol.WriteRequest(box.Stdin, req); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		var resp protocol.Reply
		if err := readCostFrame(pr, &resp); err != nil || resp.Status != "ok" || len(resp.Failed) > 0 {
			return nil, fmt.Errorf("preload %v: status %q, failed %v, %v", modules, resp.Status, resp.Failed, err)
		}
		if ask {
			e.runner.keep(resp.RunnerCode)
			if t, ok := e.be.(backend.Tree); ok && resp.Stdlib != "" {
				t.MakeTree(ctx, e.helperSpec(KindTree), resp.Stdlib) // before the next sandbox, as a pool's sandboxes soon have it
			}
		}
		if preload {
			r.mark("preload")
		} else {
			r.skip()
		}
	}
	r.remove()
	return r.phases, nil
}

// EmptyCommand is what MeasureEmpty's container runs: nothing, at once.
var EmptyCommand = []string{"true"}

// MeasureEmpty lives through one container that does nothing: a sandbox's
// spec (its hardening, limits and mounts, and the network namespace it
// joins) running EmptyCommand instead of the runner, with nothing
// attached. Its phases are create, start (the API call), exit (until the
// process has exited) and remove. What it costs is Docker's own floor for
// a container like a sandbox: with one container per call, no sandbox
// costs this machine less. For `python-docker-mcp bench`, like
// MeasureSandbox.
func (e *Executor) MeasureEmpty(ctx context.Context, cpu func() time.Duration) ([]Phase, error) {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	r, err := e.createMeasured(ctx, cpu, func(spec *backend.Spec) { spec.Command = slices.Clone(EmptyCommand) })
	if err != nil {
		return nil, err
	}
	defer r.discard()
	wait := r.st.Await(ctx, r.sb.id)
	if err := r.st.Start(ctx, r.sb.id); err != nil {
		return nil, fmt.Errorf("empty container: %w", err)
	}
	r.mark("start")
	code, err := wait()
	if err != nil {
		return nil, fmt.Errorf("empty container: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("empty container: %q exited with status %d, want 0: the image %s needs it on its PATH", strings.Join(EmptyCommand, " "), code, e.config().Docker.Image)
	}
	r.mark("exit")
	r.remove()
	return r.phases, nil
}

// measured is one container that MeasureSandbox or MeasureEmpty lives
// through, and its phases so far.
type measured struct {
	e      *Executor
	st     backend.Stepper
	sb     *sandbox
	cpu    func() time.Duration
	phases []Phase
	t      time.Time
	last   time.Duration
}

// createMeasured creates a container from a transient sandbox's spec (the
// config's limits, this executor's labels, the standard library volume
// and, as the executor's sandboxes do, a leased network namespace) that
// edit may change, and measures the create phase. A holder started for
// it is made before the measuring starts, as it serves many sandboxes.
// The caller defers discard.
func (e *Executor) createMeasured(ctx context.Context, cpu func() time.Duration, edit func(*backend.Spec)) (*measured, error) {
	st, ok := e.be.(backend.Stepper)
	if !ok {
		return nil, errors.New("measuring a sandbox's phases needs the docker backend")
	}
	lim, err := resolveLimits(e.config().Docker, Limits{})
	if err != nil {
		return nil, err
	}
	meta := sandboxMeta{Kind: KindTransient, Instance: e.instance, PID: e.pid, Host: e.host, Created: time.Now()}
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
	r := &measured{e: e, st: st, cpu: cpu, t: time.Now(), last: cpu()}
	id, err := st.Define(ctx, spec)
	if err != nil {
		if prep.Release != nil {
			prep.Release(false)
		}
		return nil, e.createErr(err)
	}
	r.sb = &sandbox{id: id, release: prep.Release, meta: meta, quit: make(chan struct{})}
	if !e.track(r.sb) {
		e.returnPrepared(r.sb, e.removeContainer(r.sb.id))
		return nil, ErrClosed
	}
	r.mark("create")
	return r, nil
}

// mark ends phase name: the wall time and the CPU time since the last mark.
func (r *measured) mark(name string) {
	now, c := time.Now(), r.cpu()
	r.phases = append(r.phases, Phase{Name: name, Wall: now.Sub(r.t), CPU: c - r.last})
	r.t, r.last = now, c
}

// skip leaves the time since the last mark out of every phase.
func (r *measured) skip() { r.t, r.last = time.Now(), r.cpu() }

// remove removes the container as the executor does and measures the
// remove phase.
func (r *measured) remove() {
	r.e.destroy(r.sb)
	r.mark("remove")
}

// discard removes the container unless remove did (destroy acts once).
func (r *measured) discard() { r.e.destroy(r.sb) }

// readCostFrame reads one frame (at most 1 MiB) into v.
func readCostFrame(r io.Reader, v any) error {
	data, err := readFrame(r, func() int64 { return 1 << 20 })
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
