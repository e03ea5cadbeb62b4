package docker

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// A network namespace of its own costs Docker a third of a sandbox's start
// on the development machine: libnetwork's namespace and its prestart hook,
// which runs the daemon's own binary once more per container. So sandboxes
// lease one instead: a holder container (no network, running nothing but
// a shell that waits on its stdin) owns each namespace, a sandbox joins an idle holder's, and when
// the sandbox's container is gone (Docker confirmed its removal, so every
// process and socket of it is) the holder is idle again for the next one.
// A holder reads its stdin, which this backend holds attached: like a
// sandbox's runner it exits when its server goes away.
// One sandbox at a time per namespace: what a namespace without network
// keeps once its processes are gone (no sockets, no names; sysctls and
// routes need capabilities no sandbox has) carries nothing to the next.
// A holder whose sandbox's removal failed, or whose join failed, is
// removed, never reused.

// holderCommand is a holder's process: it waits until its stdin ends (a
// variable so that a test can make holders fail to start).
var holderCommand = []string{"sh", "-c", "read _"}

// HolderCommand sets the holders' command and returns a function that
// restores it: for tests that make holders fail to start.
func HolderCommand(argv []string) (restore func()) {
	saved := holderCommand
	holderCommand = argv
	return func() { holderCommand = saved }
}

// holderTimeout bounds starting a holder from Warm.
const holderTimeout = 60 * time.Second

// netHolders are the backend's holders.
type netHolders struct {
	mu     sync.Mutex
	idle   []string
	all    map[string]io.Closer // holder id -> its stdin's attach stream
	closed bool                 // Close ran: holders coming back are removed
	// topping says a holder is being started for the idle floor.
	topping atomic.Bool
}

// Prepare leases an idle holder's network namespace to spec (starting a
// holder when none is idle) with needs.SharedNetwork, and mounts the tree
// volume with needs.Tree. Leasing only saves work: when no holder can be
// had, the sandbox gets a namespace of its own.
func (b *Backend) Prepare(ctx context.Context, spec *backend.Spec, needs backend.Needs) (backend.Prepared, error) {
	var p backend.Prepared
	if needs.Tree {
		p.Tree = b.tree.vol.Load().mountIn(spec)
	}
	if !needs.SharedNetwork || !spec.NetworkDisabled {
		return p, nil
	}
	id, err := b.leaseNetwork(ctx, needs.Helper)
	if err != nil {
		if ctx.Err() != nil {
			return backend.Prepared{}, err
		}
		b.log.Warn("no network namespace to lease; the sandbox gets its own", "err", err)
		return p, nil
	}
	spec.JoinNetwork = id
	keep := max(needs.KeepIdle, 1)
	p.Release = func(removed bool) { b.returnNetwork(id, removed, keep) }
	return p, nil
}

// Warm starts one holder when fewer than floor are idle (none while one is
// starting).
func (b *Backend) Warm(ctx context.Context, needs backend.Needs, floor int) bool {
	if !needs.SharedNetwork || !needs.Helper.NetworkDisabled || b.Idle() >= floor || !b.netns.topping.CompareAndSwap(false, true) {
		return false
	}
	defer b.netns.topping.Store(false)
	ctx, cancel := context.WithTimeout(ctx, holderTimeout)
	defer cancel()
	id, err := b.newHolder(ctx, needs.Helper)
	if err != nil {
		return false // the next lease starts one and reports what fails
	}
	b.returnNetwork(id, true, max(needs.KeepIdle, floor))
	return true
}

// leaseNetwork returns an idle holder's id, starting a holder when none is
// idle.
func (b *Backend) leaseNetwork(ctx context.Context, helper backend.Spec) (string, error) {
	h := &b.netns
	h.mu.Lock()
	if n := len(h.idle); n > 0 {
		id := h.idle[n-1]
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		return id, nil
	}
	h.mu.Unlock()
	return b.newHolder(ctx, helper)
}

// newHolder starts a holder, leased to the caller.
func (b *Backend) newHolder(ctx context.Context, spec backend.Spec) (string, error) {
	h := &b.netns
	spec.Labels = helperLabels(spec.Labels, backend.KindNetwork)
	spec.Command = holderCommand
	spec.Args = nil
	spec.Env = []string{"PATH=/usr/bin:/bin"}
	spec.Volumes = nil
	spec.JoinNetwork = ""
	// A holder runs no user code, only `read`: it runs under the daemon's
	// default runtime whatever docker.runtime says (under runsc, with a
	// helper's 16 MiB and 4 pids, it did not start), and sandboxes of any
	// runtime join it (gVisor with --network=none keeps its own
	// loopback-only network stack inside the sandbox and uses none of the
	// namespace's).
	spec.Runtime = ""
	cfg, host := ContainerConfig(spec)
	cfg.AttachStdout, cfg.AttachStderr = false, false
	created, err := b.api.ContainerCreate(context.WithoutCancel(ctx), client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		return "", Err("create sandbox", spec.Image, err)
	}
	id := created.ID
	h.mu.Lock()
	if h.all == nil {
		h.all = map[string]io.Closer{}
	}
	h.all[id] = io.NopCloser(nil)
	h.mu.Unlock()
	att, err := b.api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		b.dropNetwork(id)
		return "", startErr("attach a sandbox's network namespace", ctx, err)
	}
	h.mu.Lock()
	h.all[id] = closerFunc(func() error { att.HijackedResponse.Close(); return nil })
	h.mu.Unlock()
	if _, err := b.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		b.dropNetwork(id)
		return "", startErr("start a sandbox's network namespace", ctx, err)
	}
	return id, nil
}

// helperLabels is labels with the kind label set to kind and no session.
func helperLabels(labels map[string]string, kind string) map[string]string {
	l := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		l[k] = v
	}
	l[backend.LabelKind] = kind
	delete(l, "python-docker-mcp.session")
	return l
}

// startErr is a Docker error of op, or ctx's end when that came first.
func startErr(op string, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return Err(op, "", err)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// returnNetwork makes a holder idle again once its sandbox is removed
// (removed false: the sandbox may live on, so the holder goes, and when it
// no longer runs, so do the idle ones that no longer run). At most keep
// holders stay idle.
func (b *Backend) returnNetwork(id string, removed bool, keep int) {
	h := &b.netns
	h.mu.Lock()
	_, mine := h.all[id]
	idle := removed && mine && !h.closed && len(h.idle) < keep
	if idle {
		h.idle = append(h.idle, id)
	}
	h.mu.Unlock()
	if idle {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running := removed || b.holderRunning(ctx, id)
	b.dropNetwork(id)
	if !running {
		b.pruneNetworks(ctx) // holders removed or killed from outside
	}
}

// dropNetwork removes a holder ("" = none).
func (b *Backend) dropNetwork(id string) {
	if id == "" {
		return
	}
	h := &b.netns
	h.mu.Lock()
	conn, mine := h.all[id]
	delete(h.all, id)
	h.idle = slices.DeleteFunc(h.idle, func(x string) bool { return x == id })
	h.mu.Unlock()
	if mine {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Remove(ctx, id); err != nil {
			b.log.Warn("remove a network namespace holder", "container", shortID(id), "err", err)
		}
		conn.Close()
	}
}

// pruneNetworks removes the idle holders that are not running.
func (b *Backend) pruneNetworks(ctx context.Context) {
	b.netns.mu.Lock()
	idle := slices.Clone(b.netns.idle)
	b.netns.mu.Unlock()
	for _, id := range idle {
		if !b.holderRunning(ctx, id) {
			if ctx.Err() != nil {
				return
			}
			b.dropNetwork(id)
		}
	}
}

// holderRunning says Docker reports holder id running (false when it
// cannot tell).
func (b *Backend) holderRunning(ctx context.Context, id string) bool {
	res, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	return err == nil && res.Container.State != nil && res.Container.State.Running
}

// closeNetworks removes every holder (Close, once every sandbox is gone).
func (b *Backend) closeNetworks() {
	h := &b.netns
	h.mu.Lock()
	h.closed = true
	ids := make([]string, 0, len(h.all))
	for id := range h.all {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		b.dropNetwork(id)
	}
}

// Idle is the number of idle holders (tests, bench).
func (b *Backend) Idle() int {
	b.netns.mu.Lock()
	defer b.netns.mu.Unlock()
	return len(b.netns.idle)
}

// Holders is the number of holders, idle or leased (tests).
func (b *Backend) Holders() int {
	b.netns.mu.Lock()
	defer b.netns.mu.Unlock()
	return len(b.netns.all)
}
