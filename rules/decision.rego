# METADATA
# title: The decision
# description: |
#   Collects deny and warn from every package under data.pydocker.rules:
#   shipped rules and operator rules alike (an operator rule file declares
#   `package pydocker.rules.NAME` and adds to deny or warn). The engine
#   evaluates data.pydocker.decision once per request.
package pydocker

import data.pydocker.lib

violations contains v if {
	some v in data.pydocker.rules[_].deny
}

# The runtime the call's sandbox runs under (executor/README.md, "gVisor"):
# an operator rules package may define `runtime` (e.g. runtime := "runsc"
# if the principal is not trusted); without one, the configured default
# (docker.runtime or kubernetes.runtime_class). Packages that disagree, or
# a runtime the configuration does not list, deny the call: the sandbox
# never silently runs under another runtime than a rule asked for. The
# engine lists the packages that define runtime in
# data.pydocker.config.runtime_packages; without that list every package
# is visited.
runtimes_asked contains r if {
	not data.pydocker.config.runtime_packages
	r := data.pydocker.rules[_].runtime
}

runtimes_asked contains r if {
	some p in data.pydocker.config.runtime_packages
	r := data.pydocker.rules[p].runtime
}

default runtime := ""

runtime := r if {
	count(runtimes_asked) == 1
	some r in runtimes_asked
	data.pydocker.config.runtimes.allowed[r]
} else := data.pydocker.config.runtimes.default

violations contains v if {
	count(runtimes_asked) > 1
	v := lib.violation(
		"runtime.conflict",
		sprintf("the policy's rules ask for different runtimes %v; make them agree", [sort(runtimes_asked)]),
		{},
	)
}

violations contains v if {
	some r in runtimes_asked
	not data.pydocker.config.runtimes.allowed[r]
	v := lib.violation(
		"runtime.invalid",
		sprintf("the policy asks for runtime %q, which is not configured (%s); add it there or change the rule", [r, data.pydocker.config.runtimes.keys]),
		{},
	)
}

# Whether a transient call may run in a sandbox kept for its principal
# (pool.reuse; executor/README.md, "Reused sandboxes"): "principal" when
# the configuration says so and no rules package says `reuse := "never"`
# for this input (e.g. for a tool or a principal); "never" otherwise.
# Rules can only turn reuse off. The engine lists the packages that
# define reuse in data.pydocker.config.reuse_packages.
reuse_asked contains r if {
	not data.pydocker.config.reuse_packages
	r := data.pydocker.rules[_].reuse
}

reuse_asked contains r if {
	some p in data.pydocker.config.reuse_packages
	r := data.pydocker.rules[p].reuse
}

default reuse := "never"

reuse := "principal" if {
	data.pydocker.config.reuse == "principal"
	not reuse_asked.never
	count(reuse_asked - {"principal", "never"}) == 0
}

violations contains v if {
	some r in reuse_asked
	not r in {"principal", "never"}
	v := lib.violation(
		"reuse.invalid",
		sprintf("the policy's reuse is %v: want \"never\" (or \"principal\", which keeps pool.reuse)", [r]),
		{},
	)
}

warnings contains v if {
	some v in data.pydocker.rules[_].warn
}

default allow := false

allow if count(violations) == 0

# Capability classes operator rules take away for this call (see
# rules/capabilities.rego): they can tighten the configured ceiling, never
# loosen it. The engine lists the packages that define capability_denied
# in data.pydocker.config.capability_packages, so that the others are not
# visited on every decision; without that list every package is.
capability_denied contains n if {
	not data.pydocker.config.capability_packages
	some n in data.pydocker.rules[_].capability_denied
}

capability_denied contains n if {
	some p in data.pydocker.config.capability_packages
	some n in data.pydocker.rules[p].capability_denied
}

# The configured ceiling, precomputed by the engine.
configured := c if {
	c := data.pydocker.config.capabilities.configured
} else := data.pydocker.rules.capabilities.configured

capabilities := configured if {
	count(capability_denied) == 0
} else := {
	"processes": granted("processes"),
	"sockets": [f |
		not capability_denied.sockets
		some f in configured.sockets
		not capability_denied[concat(".", ["sockets", f])]
	],
	"pty": granted("pty"),
	"native_code": granted("native_code"),
}

default granted(_) := false

granted(class) if {
	configured[class] == true
	not capability_denied[class]
}

# The principal's quotas (cmd/python-docker-mcp/README.md, "Quotas"): each configured quota,
# data.pydocker.config.quotas[NAME] = {max, key}, lowered by any rules
# package's quota_max[NAME] for this input (e.g. quota_max.sandboxes := 1
# if input.principal.sub == "guest"); never raised: the engine keeps the
# configured bound where a rule asks for more. The engine lists the
# packages that define quota_max in data.pydocker.config.quota_packages.
quotas[name] := {"max": min({c.max} | quota_lowered(name)), "key": c.key} if {
	some name, c in data.pydocker.config.quotas
}

quota_lowered(name) := {m |
	some p in data.pydocker.config.quota_packages
	m := data.pydocker.rules[p].quota_max[name]
} if {
	data.pydocker.config.quota_packages
} else := {m | m := data.pydocker.rules[_].quota_max[name]}

# The engine adds to this the effective limits (each requested limit, or
# the configured maximum) and the module and call lists for the sandbox
# runner, all from the configuration: Rego cannot raise them.
decision := {
	"allow": allow,
	"violations": violations,
	"warnings": warnings,
	"capabilities": capabilities,
	"quotas": quotas,
	"runtime": runtime,
	"reuse": reuse,
}
