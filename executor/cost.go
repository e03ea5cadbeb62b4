package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
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

// MeasureSandbox lives through one sandbox step by step with the Docker
// calls the executor makes for a sandbox (create, attach, start, the
// runner's ready frame, with preload the preload op importing modules, and
// forced removal) and returns each step's wall time and the CPU time that
// cpu reports across it. cpu gets the container's id ("" before it
// exists) and decides what to count (the Docker daemons, the container's
// cgroup). The container has the config's limits and this executor's
// labels and is removed whatever happens. For `python-docker-mcp bench`;
// safe for concurrent use, but measure one at a time for clean figures.
func (e *Executor) MeasureSandbox(ctx context.Context, modules []string, preload bool, cpu func(id string) time.Duration) (phases []Phase, err error) {
	if e.docker == nil {
		return nil, errors.New("measuring a sandbox's phases needs the docker backend")
	}
	lim, err := resolveLimits(e.cfg.Docker, Limits{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	meta := sandboxMeta{Kind: KindTransient, Instance: e.instance, PID: e.pid, Host: e.host, Created: time.Now()}
	spec := sandboxSpec(e.cfg.Docker, lim, meta)
	e.stdlib.vol.Load().mountIn(&spec)
	netns := ""
	if e.leasesNetwork(meta) {
		// As the executor's sandboxes do; a holder started here is made
		// before the measuring starts, as it serves many sandboxes.
		if netns, err = e.leaseNetwork(ctx); err != nil {
			return nil, err
		}
		spec.JoinNetwork = netns
	}
	cfg, host := docker.ContainerConfig(spec)
	id := ""
	last, t := cpu(""), time.Now()
	mark := func(name string) {
		now, c := time.Now(), cpu(id)
		phases = append(phases, Phase{Name: name, Wall: now.Sub(t), CPU: c - last})
		t, last = now, c
	}
	created, err := e.docker.ContainerCreate(context.WithoutCancel(ctx), client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		e.dropNetwork(netns)
		return nil, e.dockerErr("create sandbox", err)
	}
	sb := &sandbox{id: created.ID, netns: netns, meta: meta, quit: make(chan struct{})}
	if !e.track(sb) {
		e.removeContainer(sb.id)
		return nil, ErrClosed
	}
	id = sb.id
	removed := false
	defer func() {
		if !removed {
			e.destroy(sb)
		}
	}()
	mark("create")
	att, err := e.docker.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, e.dockerErr("attach sandbox", err)
	}
	defer att.HijackedResponse.Close()
	stop := context.AfterFunc(ctx, func() { att.HijackedResponse.Close() })
	defer stop()
	mark("attach")
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, att.HijackedResponse.Reader)
		pw.CloseWithError(errors.Join(err, io.EOF))
	}()
	if _, err := e.docker.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return nil, e.dockerErr("start sandbox", err)
	}
	mark("start")
	go e.sendRunner(att.HijackedResponse.Conn)
	var ready protocol.Ready
	if err := readCostFrame(pr, &ready); err != nil || ready.Op != "ready" {
		return nil, fmt.Errorf("start sandbox: no ready frame from the runner (%v, op %q)", err, ready.Op)
	}
	mark("ready")
	// As the pool does, the first fresh sandbox is asked for the runner's
	// compiled code, which the sandboxes after it load. Without a preload
	// the ask is a round trip of its own, left out of the phases (the
	// caller's warm-up sandbox takes it).
	ask := e.runner.ask()
	if preload || ask {
		req := map[string]any{"op": "preload", "id": 1, "nonce": randomHex(16), "modules": orEmpty(modules), "runner_code": ask}
		if !preload {
			req["modules"] = []string{}
		}
		if err := writeFrame(att.HijackedResponse.Conn, req); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		var resp protocol.Reply
		if err := readCostFrame(pr, &resp); err != nil || resp.Status != "ok" || len(resp.Failed) > 0 {
			return nil, fmt.Errorf("preload %v: status %q, failed %v, %v", modules, resp.Status, resp.Failed, err)
		}
		if ask {
			e.runner.keep(resp.RunnerCode)
			if resp.Stdlib != "" {
				e.makeStdlibVolume(ctx, resp.Stdlib) // before the next sandbox, as a pool's sandboxes soon have it
			}
		}
		if preload {
			mark("preload")
		} else {
			t, last = time.Now(), cpu(id)
		}
	}
	removed = true
	e.destroy(sb)
	mark("remove")
	return phases, nil
}

// readCostFrame reads one frame (at most 1 MiB) into v.
func readCostFrame(r io.Reader, v any) error {
	data, err := readFrame(r, func() int64 { return 1 << 20 })
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
