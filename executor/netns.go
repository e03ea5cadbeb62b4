package executor

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
)

// KindNetwork labels the container whose network namespace (loopback
// only) transient sandboxes join on Docker.
const KindNetwork = "network"

// A network namespace of its own costs Docker a third of a sandbox's start
// on the development machine: libnetwork's namespace and its prestart hook,
// which runs the daemon's own binary once more per container. So sandboxes
// lease one instead: a holder container (no network, running nothing but
// a shell that waits on its stdin) owns each namespace, a sandbox joins an idle holder's, and when
// the sandbox's container is gone (Docker confirmed its removal, so every
// process and socket of it is) the holder is idle again for the next one.
// A holder reads its stdin, which this executor holds attached: like a
// sandbox's runner it exits when its server goes away.
// One sandbox at a time per namespace: what a namespace without network
// keeps once its processes are gone (no sockets, no names; sysctls and
// routes need capabilities no sandbox has) carries nothing to the next.
// A holder whose sandbox's removal failed, or whose join failed, is
// removed, never reused.

// holderCommand is a holder's process: it waits until its stdin ends (a
// variable so that a test can make holders fail to start).
var holderCommand = []string{"sh", "-c", "read _"}

// netHolders are the executor's holders.
type netHolders struct {
	mu   sync.Mutex
	idle []string
	all  map[string]io.Closer // holder id -> its stdin's attach stream
	// topping says a holder is being started for the idle floor.
	topping atomic.Bool
}

// maxIdleHolders bounds the idle holders kept (each is a shell waiting on
// its stdin, under 1 MiB); more are removed as they come back.
func (e *Executor) maxIdleHolders() int {
	return max(e.config().Pool.MaxSize+e.config().Pool.MaxConcurrentCreations, 4)
}

// leasesNetwork reports whether a sandbox of meta leases a namespace: any
// sandbox the executor starts on Docker with the network disabled.
func (e *Executor) leasesNetwork(meta sandboxMeta) bool {
	return e.docker != nil && e.config().Docker.NetworkDisabled && (meta.Kind == KindTransient || meta.Kind == KindPersistent)
}

// leaseNetwork returns an idle holder's id, starting a holder when none is
// idle.
func (e *Executor) leaseNetwork(ctx context.Context) (string, error) {
	h := &e.netns
	h.mu.Lock()
	if n := len(h.idle); n > 0 {
		id := h.idle[n-1]
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		return id, nil
	}
	h.mu.Unlock()
	return e.newHolder(ctx)
}

// newHolder starts a holder, leased to the caller.
func (e *Executor) newHolder(ctx context.Context) (string, error) {
	h := &e.netns
	spec := e.helperSpec(KindNetwork)
	spec.Command = holderCommand
	spec.Env = []string{"PATH=/usr/bin:/bin"}
	// A holder runs no user code, only `read`: it runs under the daemon's
	// default runtime whatever docker.runtime says (under runsc, with a
	// helper's 16 MiB and 4 pids, it did not start), and sandboxes of any runtime
	// join it (gVisor with --network=none keeps its own loopback-only
	// network stack inside the sandbox and uses none of the namespace's).
	spec.Runtime = ""
	cfg, host := docker.ContainerConfig(spec)
	cfg.AttachStdout, cfg.AttachStderr = false, false
	created, err := e.docker.ContainerCreate(context.WithoutCancel(ctx), client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		return "", e.dockerErr("create sandbox", err)
	}
	id := created.ID
	h.mu.Lock()
	if h.all == nil {
		h.all = map[string]io.Closer{}
	}
	h.all[id] = io.NopCloser(nil)
	h.mu.Unlock()
	att, err := e.docker.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		e.dropNetwork(id)
		return "", e.startErr("attach a sandbox's network namespace", ctx, err)
	}
	h.mu.Lock()
	h.all[id] = closerFunc(func() error { att.HijackedResponse.Close(); return nil })
	h.mu.Unlock()
	if _, err := e.docker.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		e.dropNetwork(id)
		return "", e.startErr("start a sandbox's network namespace", ctx, err)
	}
	return id, nil
}

// holderFloor is how many idle holders the executor keeps ready while it
// has nothing else to start: enough for the creations the pools run at
// once plus calls that start cold, so a burst does not start holders on
// its calls' path.
func (e *Executor) holderFloor() int {
	return min(2*e.config().Pool.MaxConcurrentCreations+2, e.maxIdleHolders())
}

// topUpNetworks starts one holder in the background when fewer than
// holderFloor are idle (none while one is starting). The transient pool
// calls it when it has nothing to create.
func (e *Executor) topUpNetworks() {
	if !e.leasesNetwork(sandboxMeta{Kind: KindTransient}) || e.idleNetworks() >= e.holderFloor() || !e.netns.topping.CompareAndSwap(false, true) {
		return
	}
	if !e.bgAdd() {
		e.netns.topping.Store(false)
		return
	}
	go func() {
		defer e.bg.Done()
		defer e.netns.topping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
		defer cancel()
		id, err := e.newHolder(ctx)
		if err != nil {
			return // the next lease starts one and reports what fails
		}
		e.returnNetwork(id, true)
		e.pool().signal() // the next one, if still below the floor
	}()
}

// startErr is a Docker error of op, or ctx's end when that came first.
func (e *Executor) startErr(op string, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return e.dockerErr(op, err)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// returnNetwork makes a holder idle again once its sandbox is removed
// (removed false: the sandbox may live on, so the holder goes).
func (e *Executor) returnNetwork(id string, removed bool) {
	if id == "" {
		return
	}
	h := &e.netns
	h.mu.Lock()
	_, mine := h.all[id]
	keep := removed && mine && len(h.idle) < e.maxIdleHolders()
	if keep {
		select {
		case <-e.stop:
			keep = false // closing: Close removes what is idle
		default:
			h.idle = append(h.idle, id)
		}
	}
	h.mu.Unlock()
	if !keep {
		e.dropNetwork(id)
	}
}

// dropNetwork removes a holder ("" = none).
func (e *Executor) dropNetwork(id string) {
	if id == "" {
		return
	}
	h := &e.netns
	h.mu.Lock()
	conn, mine := h.all[id]
	delete(h.all, id)
	h.idle = slices.DeleteFunc(h.idle, func(x string) bool { return x == id })
	h.mu.Unlock()
	if mine {
		e.removeContainer(id)
		conn.Close()
	}
}

// pruneNetworks removes the idle holders that are not running.
func (e *Executor) pruneNetworks(ctx context.Context) {
	e.netns.mu.Lock()
	idle := slices.Clone(e.netns.idle)
	e.netns.mu.Unlock()
	for _, id := range idle {
		if !e.holderRunning(ctx, id) {
			if ctx.Err() != nil {
				return
			}
			e.dropNetwork(id)
		}
	}
}

// holderRunning says Docker reports holder id running (false when it
// cannot tell).
func (e *Executor) holderRunning(ctx context.Context, id string) bool {
	res, err := e.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	return err == nil && res.Container.State != nil && res.Container.State.Running
}

// closeNetworks removes every holder (Close, once every sandbox is gone).
func (e *Executor) closeNetworks() {
	h := &e.netns
	h.mu.Lock()
	ids := make([]string, 0, len(h.all))
	for id := range h.all {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		e.dropNetwork(id)
	}
}

// idleNetworks is the number of idle holders (tests, bench).
func (e *Executor) idleNetworks() int {
	e.netns.mu.Lock()
	defer e.netns.mu.Unlock()
	return len(e.netns.idle)
}
