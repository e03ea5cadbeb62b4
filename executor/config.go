package executor

import "github.com/python-docker-mcp/python-docker-mcp/config"

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
}

// ConfigFrom is the executor's part of c.
func ConfigFrom(c config.Config) Config {
	return Config{
		Docker: c.Docker, Limits: c.Limits, Outputs: c.Outputs, Package: c.Package,
		Pool: c.Pool, Sessions: c.Sessions,
		AllowedModules: c.AllowedModules, BlockedModules: c.BlockedModules,
	}
}
