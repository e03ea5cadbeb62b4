package config

import (
	"reflect"
)

// Reload says when a change to a key takes effect in a running server.
type Reload uint8

const (
	// Live keys apply at the next reload (file change or SIGHUP) to every
	// call that begins after it; calls under way keep what they began with.
	Live Reload = iota + 1
	// Restart keys keep their running value until the server restarts: a
	// reload that changes one logs the key and applies the other changes.
	Restart
)

// Reloads classifies every key. A key missing here counts as Restart (and
// fails TestEveryKeyClassified): what a new key needs to apply live is
// decided where it is read, and recorded here.
var Reloads = map[string]Reload{
	// Where sandboxes run and the clients of it.
	"backend":                      Restart,
	"kubernetes.kubeconfig":        Restart,
	"kubernetes.namespace":         Restart,
	"kubernetes.runtime_class":     Restart,
	"kubernetes.runtime_classes":   Restart,
	"kubernetes.node_selector":     Restart,
	"kubernetes.image_pull_policy": Restart,
	"kubernetes.node_name":         Restart,
	"kubernetes.start_timeout":     Restart,
	"kubernetes.cpu_request":       Restart,
	// The sandbox's image and hardening: every sandbox alive has the same.
	"docker.image":            Restart,
	"docker.working_dir":      Restart,
	"docker.network_disabled": Restart,
	"docker.read_only":        Restart,
	"docker.runtime":          Restart,
	"docker.runtimes":         Restart,
	"docker.user":             Restart,
	// The sandbox's limits: new calls and new sandboxes (the warm pool is
	// replaced); sessions keep the limits they started with.
	"docker.memory_limit":   Live,
	"docker.cpu_limit":      Live,
	"docker.timeout":        Live,
	"docker.pids_limit":     Live,
	"docker.tmp_size":       Live,
	"docker.workspace_size": Live,
	// The image recipe: the image is built or checked at start.
	"image.release":  Restart,
	"image.mirror":   Restart,
	"image.packages": Restart,
	// install-package: read by each install and by the policy.
	"package.installer":       Live,
	"package.index_url":       Live,
	"package.find_links":      Live,
	"package.trusted_hosts":   Live,
	"package.allowed":         Live,
	"package.blocked":         Live,
	"package.require_pinned":  Live,
	"package.allowed_indexes": Live,
	"package.max_per_session": Live,
	"package.allow_sdist":     Live,
	"package.timeout":         Live,
	// The policy: a new engine is built and swapped in.
	"allowed_modules":                     Live,
	"blocked_modules":                     Live,
	"blocked_calls":                       Live,
	"policy.profile":                      Live,
	"policy.paths":                        Live,
	"policy.decision_log":                 Live,
	"policy.decision_log_code":            Live,
	"policy.capabilities.processes":       Live,
	"policy.capabilities.sockets":         Live,
	"policy.capabilities.pty":             Live,
	"policy.capabilities.native_code":     Live,
	"policy.capabilities.socket_families": Live,
	// The warm pool: resized, or replaced by one of the new settings.
	"pool.enabled":                  Live,
	"pool.size":                     Live,
	"pool.max_size":                 Live,
	"pool.max_age":                  Live,
	"pool.max_concurrent_creations": Live,
	"pool.preload":                  Live,
	"pool.reuse":                    Live,
	"pool.reuse_max_calls":          Live,
	"pool.reuse_max_age":            Live,
	"pool.max_per_principal":        Live,
	"pool.reuse_max_idle":           Live,
	// Sessions: checked at each new session and by the reaper.
	"sessions.idle_ttl":      Live,
	"sessions.max_lifetime":  Live,
	"sessions.max_per_owner": Live,
	"sessions.max_total":     Live,
	// Read when a task is created (ttl) and when its call is judged.
	"tasks.max_duration":      Live,
	"tasks.max_per_principal": Live,
	"tasks.ttl":               Live,
	"languages.bash.enabled":  Live,
	// Sizes of what flows through the server.
	"limits.max_output_bytes":      Live,
	"limits.max_state_bytes":       Live,
	"limits.max_image_bytes":       Live,
	"limits.max_code_bytes":        Live,
	"limits.max_file_bytes":        Live,
	"limits.max_expression_tokens": Live, // a new policy engine
	"outputs.max_stream_bytes":     Live,
	"outputs.max_total_bytes":      Live,
	"outputs.ttl":                  Live,
	// Quotas: decided by the policy at each call or request.
	"quotas.sandboxes":          Live,
	"quotas.transport_sessions": Live,
	"quotas.output_bytes":       Live,
	"quotas.inflight_bytes":     Live,
	"quotas.analyses":           Live,
	// The transport, its listeners and authentication.
	"server.transport":        Restart,
	"server.addr":             Restart,
	"server.path":             Restart,
	"server.max_body_bytes":   Restart,
	"server.metrics_addr":     Restart,
	"server.session_key_file": Restart,
	"server.public_url":       Restart,
	"auth.mode":               Restart,
	"auth.jwks_uri":           Restart,
	"auth.issuer":             Restart,
	"auth.audience":           Restart,
	"auth.algorithm":          Restart,
	"auth.public_key_path":    Restart,
	"auth.leeway":             Restart,
	"auth.scopes.execute":     Restart,
	"auth.scopes.install":     Restart,
	"auth.scopes.sessions":    Restart,
	"log.level":               Live,
	"log.format":              Restart,
}

func (r Reload) String() string {
	switch r {
	case Live:
		return "reload"
	case Restart:
		return "restart"
	}
	return "unclassified"
}

// ReloadOf is how a change to key takes effect: Reloads[key], or Restart
// for a key not classified.
func ReloadOf(key string) Reload {
	if r, ok := Reloads[key]; ok {
		return r
	}
	return Restart
}

// Changed lists the keys whose values differ between a and b, in
// declaration order.
func Changed(a, b Config) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for _, k := range keyOrder {
		f := fieldsByKey[k]
		if !reflect.DeepEqual(va.FieldByIndex(f.index).Interface(), vb.FieldByIndex(f.index).Interface()) {
			out = append(out, k)
		}
	}
	return out
}

// Split compares next, a newly loaded configuration, with the running one.
// live are the changed keys a reload applies; restart the changed keys that
// need a restart. merged is next with every restart key's running value:
// the configuration a reload puts in force.
func Split(running, next Config) (merged Config, live, restart []string) {
	merged = next
	m, r := reflect.ValueOf(&merged).Elem(), reflect.ValueOf(running)
	for _, k := range Changed(running, next) {
		if ReloadOf(k) == Live {
			live = append(live, k)
			continue
		}
		restart = append(restart, k)
		f := fieldsByKey[k]
		m.FieldByIndex(f.index).Set(r.FieldByIndex(f.index))
	}
	return merged, live, restart
}
