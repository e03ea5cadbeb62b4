// Package owner tells whether the server that made a labelled sandbox or
// volume may still be running, so that a server's reaper removes the
// leftovers of servers that are gone and never a live server's: servers
// on one host or in one pid namespace, servers running in containers of
// the daemon they use (replicas, where hostnames may repeat and pids
// collide: every server may be pid 1), and replicas that see each other
// only through the backend's liveness records (Kubernetes). It reads no
// labels: the executor says what a sandbox's labels name (Server).
package owner

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"syscall"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Identity is where a server process runs.
type Identity struct {
	// PIDNS is the process's pid namespace (the target of
	// /proc/self/ns/pid, e.g. "pid:[4026532194]"); "" when unknown. A pid
	// means something only to a process in the same namespace.
	PIDNS string
	// Container is the id of the container the process runs in; "" on
	// the host or when unknown. That server is alive as long as its
	// container runs.
	Container string
}

// Self finds this process's pid namespace and, on a backend that shares
// a runtime with it (backend.Host: Docker), the container it runs in.
func Self(ctx context.Context, b backend.Backend) Identity {
	var id Identity
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		id.PIDNS = ns
	}
	if h, ok := b.(backend.Host); ok {
		id.Container = h.Self(ctx)
	}
	return id
}

// Server is what a sandbox's or volume's labels say about the server that
// made it; "" where they say nothing.
type Server struct {
	// Instance is the server's executor instance id.
	Instance string
	// PID is the server's process id, as the label holds it.
	PID string
	// Host is the server's hostname.
	Host string
	Identity
}

// Check decides, for one reaper pass, whether the servers that made
// labelled sandboxes and volumes are gone; it caches the runtime's and the
// liveness records' answers. The fields are the checking server's. Not
// safe for concurrent use.
type Check struct {
	// Self, PID and Host are where the checking server runs.
	Self Identity
	PID  int
	Host string
	// Open says whether an executor of this process with this instance id
	// is open: its sandboxes are never leftovers.
	Open func(instance string) bool
	// Liveness is the backend's record of live servers (Kubernetes), nil
	// on backends without one. With it, it alone decides for a server
	// with an instance id.
	Liveness backend.Liveness
	// Runtime says whether a container runs (backend.Host: Docker); nil
	// when the backend cannot say.
	Runtime backend.Host
	Log     *slog.Logger

	known map[string]bool
}

// Alive says whether s may still be running; when in doubt it says yes (a
// leftover stays; a live server's sandbox is never removed).
func (c *Check) Alive(ctx context.Context, s Server) bool {
	if c.Open != nil && c.Open(s.Instance) {
		return true
	}
	if c.Liveness != nil && s.Instance != "" {
		// Servers on this backend are replicas that cannot see each
		// other's processes: the backend's record decides.
		return c.instanceAlive(ctx, s.Instance)
	}
	pidAlive := func() bool {
		pid, err := strconv.Atoi(s.PID)
		return err == nil && pid != c.PID && processAlive(pid)
	}
	if srv := s.Container; srv != "" {
		if srv == c.Self.Container {
			// This very container: in the same pid namespace the pid
			// check applies; in another one it was an earlier run of this
			// container (restarted), which is gone.
			return s.PIDNS == c.Self.PIDNS && pidAlive()
		}
		return c.containerRunning(ctx, srv)
	}
	if s.Host != "" && s.Host != c.Host {
		return true // another machine's server shares this daemon
	}
	if s.PIDNS != "" && s.PIDNS != c.Self.PIDNS {
		return true // a server in another pid namespace: its pid means nothing here
	}
	if s.PIDNS == "" && c.Self.Container != "" {
		return true // written by a server without these labels; its pid is not ours to check
	}
	return pidAlive()
}

// containerRunning says whether the runtime runs a container with this
// id; true when it cannot say.
func (c *Check) containerRunning(ctx context.Context, id string) bool {
	if v, ok := c.known[id]; ok {
		return v
	}
	if c.Runtime == nil {
		return true // cannot say
	}
	v, err := c.Runtime.Running(ctx, id)
	if err != nil {
		v = true
	}
	c.remember(id, v)
	return v
}

// instanceAlive asks the backend's liveness records whether the server
// with this instance id lives; true when the backend cannot say.
func (c *Check) instanceAlive(ctx context.Context, instance string) bool {
	key := "instance " + instance
	if v, ok := c.known[key]; ok {
		return v
	}
	v, err := c.Liveness.Alive(ctx, instance)
	if err != nil {
		if c.Log != nil {
			c.Log.Warn("cannot tell whether a server is alive; its sandboxes stay", "instance", instance, "error", err)
		}
		v = true
	}
	c.remember(key, v)
	return v
}

func (c *Check) remember(key string, v bool) {
	if c.known == nil {
		c.known = map[string]bool{}
	}
	c.known[key] = v
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
