package executor

import (
	"fmt"
	"slices"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Config is what the executor reads of the server's configuration: the
// sandbox settings and maxima (docker), the server's limits and output
// caps, package installs, the pool, sessions, and the module lists the
// import guard falls back to for a request without a decision's rules.
// ConfigFrom takes it from a loaded config.Config.
type Config struct {
	Docker   config.Docker
	Limits   config.Limits
	Outputs  config.Outputs
	Package  config.Package
	Pool     config.Pool
	Sessions config.Sessions
	// AllowedModules and BlockedModules are config's allowed_modules and
	// blocked_modules.
	AllowedModules []string
	BlockedModules []string
	// Runtimes are the runtimes a Request may name, the backend's default
	// first (config.SandboxRuntimes); nil: docker.runtime and
	// docker.runtimes.
	Runtimes []string
}

// ConfigFrom is the executor's part of c.
func ConfigFrom(c config.Config) Config {
	cfg := Config{
		Docker: c.Docker, Limits: c.Limits, Outputs: c.Outputs, Package: c.Package,
		Pool: c.Pool, Sessions: c.Sessions,
		AllowedModules: c.AllowedModules, BlockedModules: c.BlockedModules,
	}
	cfg.Runtimes, _ = c.SandboxRuntimes()
	return cfg
}

// runtime resolves the runtime a request names: "" or the backend's
// default is docker.runtime (on Kubernetes "", which the Pod maps to
// kubernetes.runtime_class); another configured one is itself; anything
// else is an ErrInvalidRequest naming the choices.
func (c *Config) runtime(name string) (string, error) {
	runtimes := c.Runtimes
	if runtimes == nil {
		runtimes = append([]string{c.Docker.Runtime}, c.Docker.Runtimes...)
	}
	switch {
	case name == "" || name == runtimes[0]:
		return c.Docker.Runtime, nil
	case slices.Contains(runtimes, name):
		return name, nil
	}
	return "", fmt.Errorf("%w: runtime %q is not configured: want one of %q (docker.runtime, docker.runtimes, or on Kubernetes kubernetes.runtime_class, kubernetes.runtime_classes)", ErrInvalidRequest, name, runtimes)
}
