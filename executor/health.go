package executor

import (
	"context"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Instance is this executor's instance id: 16 hex digits, random per
// process, carried by its sandboxes' python-docker-mcp.instance label and,
// on Kubernetes, by its Lease (pdm-server-<instance>) and the holder of the
// session records it holds.
func (e *Executor) Instance() string { return e.instance }

// Ping says whether what runs the sandboxes answers now: the backend's own
// check (backend.Pinger: the Docker daemon, the Kubernetes API server);
// nil on a backend without one (a test's fake). An error wraps
// ErrDockerUnavailable (backend.ErrUnavailable). /healthz calls it.
func (e *Executor) Ping(ctx context.Context) error {
	if p, ok := e.be.(backend.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
