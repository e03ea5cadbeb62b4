package executor

import (
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/owner"
)

// Labels that say which server process owns a sandbox or volume, so the
// startup reaper of one server never removes another live server's
// containers, also when servers run in containers (replicas) where
// hostnames may repeat and pids collide (every server may be pid 1).
const (
	// LabelPIDNS is the owning process's pid namespace (the target of
	// /proc/self/ns/pid, e.g. "pid:[4026532194]"): backend.LabelPID means something
	// only to a process in the same namespace.
	LabelPIDNS = "python-docker-mcp.pidns"
	// LabelServer is the id of the container the owning server runs in
	// ("" or absent when it runs on the host): that server is alive as long
	// as its container runs.
	LabelServer = "python-docker-mcp.server"
)

// stamp writes where this server runs into a sandbox's or volume's
// metadata.
func (m *sandboxMeta) stamp(id owner.Identity) {
	m.PIDNS, m.Server = id.PIDNS, id.Container
}

// owned is m as this executor's: its instance, process, host and the
// server's identity (what the reapers of other servers judge), created
// now unless m says when.
func (e *Executor) owned(m sandboxMeta) sandboxMeta {
	m.Instance, m.PID, m.Host = e.instance, e.pid, e.host
	m.stamp(e.self)
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	return m
}

// ownerOf is what a sandbox's or volume's labels say about the server
// that made it.
func ownerOf(l map[string]string) owner.Server {
	return owner.Server{Instance: l[backend.LabelInstance], PID: l[backend.LabelPID], Host: l[backend.LabelHost],
		Identity: owner.Identity{PIDNS: l[LabelPIDNS], Container: l[LabelServer]}}
}

// instanceOpen says whether an executor of this process with this
// instance id is open (see liveInstances).
func instanceOpen(instance string) bool {
	_, ok := liveInstances.Load(instance)
	return ok
}
