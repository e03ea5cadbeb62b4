// Package cost lives through one sandbox step by step on a backend that
// can take a sandbox's creation one step at a time (backend.Stepper:
// Docker) and measures each step's wall time and the CPU time a caller's
// meter sees across it: python-docker-mcp bench's cost scenario. The
// executor readies the sandbox as it readies its own and removes it
// (Sandboxes); this package takes the steps and keeps the time.
package cost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Phase is one step of a sandbox's life as Sandbox or Empty saw it.
type Phase struct {
	// Name is create, attach, start (the API call), ready (the runner's
	// ready frame), preload (the preload op), exit (Empty: until the
	// process has exited), or remove.
	Name string
	Wall time.Duration
	// CPU is the growth of what the caller's cpu function reports across
	// the step.
	CPU time.Duration
}

// Sandboxes is the executor's side of a measured sandbox.
type Sandboxes interface {
	// Ready readies a sandbox from a transient sandbox's spec, which edit
	// (if not nil) may change, as the executor readies its own (its
	// labels and limits, and what the backend prepares for it, such as a
	// leased network namespace), before the measuring starts. It returns
	// define, which creates the sandbox without starting it (measured:
	// the create phase) and returns its id and what removes it as the
	// executor removes its sandboxes (a second call does nothing).
	Ready(ctx context.Context, edit func(*backend.Spec)) (define func(context.Context) (id string, remove func(), err error), err error)
	// Preamble writes what the runner reads first to its stdin.
	Preamble(stdin io.Writer)
	// AskCode says whether this sandbox's preload asks the runner for its
	// compiled code (the executor's first sandboxes are asked).
	AskCode() bool
	// Answered takes the reply to a preload that asked for the runner's
	// code.
	Answered(ctx context.Context, reply *protocol.Reply)
}

// Sandbox lives through one sandbox on st, made by s: create, attach,
// start, the runner's ready frame, with preload the preload op importing
// modules, and removal. A sandbox that s says to ask for the runner's code
// is asked in its preload; without preload that ask is a round trip of
// its own, left out of the phases. The sandbox is removed whatever
// happens.
func Sandbox(ctx context.Context, st backend.Stepper, s Sandboxes, modules []string, preload bool, cpu func() time.Duration) ([]Phase, error) {
	r, err := create(ctx, s, cpu, nil)
	if err != nil {
		return nil, err
	}
	defer r.remove()
	box, err := st.AttachDefined(ctx, r.id)
	if err != nil {
		return nil, err
	}
	defer box.Close()
	r.mark("attach")
	pr := box.Stdout
	if err := st.Start(ctx, r.id); err != nil {
		return nil, err
	}
	r.mark("start")
	go s.Preamble(box.Stdin)
	var ready protocol.Ready
	if err := readFrame(pr, &ready); err != nil || ready.Op != "ready" {
		return nil, fmt.Errorf("start sandbox: no ready frame from the runner (%v, op %q)", err, ready.Op)
	}
	r.mark("ready")
	ask := s.AskCode()
	if preload || ask {
		if modules == nil || !preload {
			modules = []string{}
		}
		req := &protocol.Preload{Header: protocol.Header{ID: 1, Nonce: nonce()}, Modules: modules, RunnerCode: ask}
		if err := protocol.WriteRequest(box.Stdin, req); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		var resp protocol.Reply
		if err := readFrame(pr, &resp); err != nil || resp.Status != "ok" || len(resp.Failed) > 0 {
			return nil, fmt.Errorf("preload %v: status %q, failed %v, %v", modules, resp.Status, resp.Failed, err)
		}
		if ask {
			s.Answered(ctx, &resp)
		}
		if preload {
			r.mark("preload")
		} else {
			r.skip()
		}
	}
	r.remove()
	r.mark("remove")
	return r.phases, nil
}

// Empty lives through one container that does nothing: a sandbox's spec
// (its hardening, limits and mounts, and the network namespace it joins)
// running command instead of the runner, with nothing attached. Its
// phases are create, start (the API call), exit (until the process has
// exited) and remove. What it costs is the runtime's own floor for a
// container like a sandbox: with one container per call, no sandbox costs
// the machine less. A command that exits with another status than 0 is
// an error.
func Empty(ctx context.Context, st backend.Stepper, s Sandboxes, command []string, cpu func() time.Duration) ([]Phase, error) {
	var image string
	r, err := create(ctx, s, cpu, func(spec *backend.Spec) {
		spec.Command = slices.Clone(command)
		image = spec.Image
	})
	if err != nil {
		return nil, err
	}
	defer r.remove()
	wait := st.Await(ctx, r.id)
	if err := st.Start(ctx, r.id); err != nil {
		return nil, fmt.Errorf("empty container: %w", err)
	}
	r.mark("start")
	code, err := wait()
	if err != nil {
		return nil, fmt.Errorf("empty container: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("empty container: %q exited with status %d, want 0: the image %s needs it on its PATH", strings.Join(command, " "), code, image)
	}
	r.mark("exit")
	r.remove()
	r.mark("remove")
	return r.phases, nil
}

// measured is one sandbox that Sandbox or Empty lives through, and its
// phases so far.
type measured struct {
	id     string
	remove func()
	cpu    func() time.Duration
	phases []Phase
	t      time.Time
	last   time.Duration
}

// create readies a sandbox with s (not measured: a namespace holder
// started for it serves many sandboxes) and creates it, the create phase.
// The caller defers remove.
func create(ctx context.Context, s Sandboxes, cpu func() time.Duration, edit func(*backend.Spec)) (*measured, error) {
	define, err := s.Ready(ctx, edit)
	if err != nil {
		return nil, err
	}
	r := &measured{cpu: cpu, t: time.Now(), last: cpu()}
	if r.id, r.remove, err = define(ctx); err != nil {
		return nil, err
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

// readFrame reads one frame (at most 1 MiB) into v.
func readFrame(r io.Reader, v any) error {
	data, err := protocol.ReadFrame(r, func() int64 { return 1 << 20 })
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func nonce() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b)
}
