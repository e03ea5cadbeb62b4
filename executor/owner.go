package executor

import (
	"context"
	"os"
	"strconv"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Labels that say which server process owns a sandbox or volume, so the
// startup reaper of one server never removes another live server's
// containers, also when servers run in containers (replicas) where
// hostnames may repeat and pids collide (every server may be pid 1).
const (
	// LabelPIDNS is the owning process's pid namespace (the target of
	// /proc/self/ns/pid, e.g. "pid:[4026532194]"): LabelPID means something
	// only to a process in the same namespace.
	LabelPIDNS = "python-docker-mcp.pidns"
	// LabelServer is the id of the container the owning server runs in
	// ("" or absent when it runs on the host): that server is alive as long
	// as its container runs.
	LabelServer = "python-docker-mcp.server"
)

// identity is where this server process runs.
type identity struct {
	pidns     string // "" when unknown
	container string // own container id; "" on the host or when unknown
}

// stamp writes the identity into a sandbox's or volume's metadata.
func (id identity) stamp(m *sandboxMeta) {
	m.PIDNS, m.Server = id.pidns, id.container
}

// selfIdentity finds this process's pid namespace and, on a backend that
// shares a runtime with it (backend.Host: Docker), the container it runs
// in.
func selfIdentity(ctx context.Context, b backend.Backend) identity {
	var id identity
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		id.pidns = ns
	}
	if h, ok := b.(backend.Host); ok {
		id.container = h.Self(ctx)
	}
	return id
}

// ownerCheck decides, for one reaper pass, whether a labelled sandbox or
// volume belongs to a server that is gone. It caches container lookups.
type ownerCheck struct {
	e       *Executor
	ctx     context.Context
	running map[string]bool
}

func (e *Executor) newOwnerCheck(ctx context.Context) *ownerCheck {
	return &ownerCheck{e: e, ctx: ctx, running: map[string]bool{}}
}

// alive says whether the server that labelled l may still be running; when
// in doubt it says yes (a leftover stays; a live server's sandbox is never
// removed).
func (o *ownerCheck) alive(l map[string]string) bool {
	e := o.e
	if _, ok := liveInstances.Load(l[LabelInstance]); ok {
		return true
	}
	if e.liveness != nil && l[LabelInstance] != "" {
		// Servers on this backend are replicas that cannot see each
		// other's processes: the backend's record decides.
		return o.instanceAlive(l[LabelInstance])
	}
	pidAlive := func() bool {
		pid, err := strconv.Atoi(l[LabelPID])
		return err == nil && pid != e.pid && processAlive(pid)
	}
	if srv := l[LabelServer]; srv != "" {
		if srv == e.self.container {
			// This very container: in the same pid namespace the pid
			// check applies; in another one it was an earlier run of this
			// container (restarted), which is gone.
			return l[LabelPIDNS] == e.self.pidns && pidAlive()
		}
		return o.containerRunning(srv)
	}
	if h := l[LabelHost]; h != "" && h != e.host {
		return true // another machine's server shares this daemon
	}
	if ns := l[LabelPIDNS]; ns != "" && ns != e.self.pidns {
		return true // a server in another pid namespace: its pid means nothing here
	}
	if l[LabelPIDNS] == "" && e.self.container != "" {
		return true // written by a server without these labels; its pid is not ours to check
	}
	return pidAlive()
}

// containerRunning says whether the daemon runs a container with this id;
// true when the daemon cannot say.
func (o *ownerCheck) containerRunning(id string) bool {
	if v, ok := o.running[id]; ok {
		return v
	}
	h, ok := o.e.be.(backend.Host)
	if !ok {
		return true // cannot say
	}
	v, err := h.Running(o.ctx, id)
	if err != nil {
		v = true
	}
	o.running[id] = v
	return v
}

// instanceAlive asks the backend's liveness records whether the server with
// this instance id lives; true when the backend cannot say.
func (o *ownerCheck) instanceAlive(instance string) bool {
	key := "instance " + instance
	if v, ok := o.running[key]; ok {
		return v
	}
	v, err := o.e.liveness.Alive(o.ctx, instance)
	if err != nil {
		o.e.log.Warn("cannot tell whether a server is alive; its sandboxes stay", "instance", instance, "error", err)
		v = true
	}
	o.running[key] = v
	return v
}
