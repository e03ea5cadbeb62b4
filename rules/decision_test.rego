package pydocker.test.decision

import data.pydocker

conf := {
	"profile": "standard",
	"allowed_modules": [],
	"blocked_modules": ["os"],
	"blocked_calls": ["os.system"],
	# The packages that define capability_denied (the engine lists them):
	# none, so operator rules loaded beside these tests do not count.
	"capability_packages": [],
	# Likewise for quota_max and runtime.
	"quota_packages": [],
	"runtime_packages": [],
	"reuse_packages": [],
	"reuse": "principal",
	"runtimes": {"default": "", "allowed": {"": true, "runsc": true}, "keys": "docker.runtime, docker.runtimes"},
	"quotas": {
		"sandboxes": {"max": 8, "key": "quotas.sandboxes"},
		"sessions": {"max": 5, "key": "sessions.max_per_owner"},
	},
	"limits": {
		"timeout_seconds": {"max": 30, "key": "docker.timeout", "text": "30s"},
		"memory_bytes": {"max": 536870912, "key": "docker.memory_limit", "text": "512m"},
		"cpus": {"max": 1, "key": "docker.cpu_limit", "text": "1"},
		"pids": {"max": 128, "key": "docker.pids_limit", "text": "128"},
	},
}

code(imports, calls) := {
	"tool": "execute-transient",
	"code": {"facts": {"imports": imports, "dynamic": [], "calls": calls}, "bytes": 10, "lines": 1},
	"limits_requested": {"cpus": 0.5},
	"principal": {"sub": "alice", "scopes": []},
}

test_allow if {
	d := pydocker.decision with input as code([{"module": "numpy", "level": 0, "from": false, "line": 1, "col": 0}], []) with data.pydocker.config as conf
	d == {"allow": true, "violations": set(), "warnings": set(), "capabilities": {
		# os is blocked: no processes, no pty (os.fork, os.openpty)
		"processes": false, "sockets": ["inet", "inet6", "unix"], "pty": false, "native_code": true,
	}, "quotas": {
		"sandboxes": {"max": 8, "key": "quotas.sandboxes"},
		"sessions": {"max": 5, "key": "sessions.max_per_owner"},
	}, "runtime": "", "reuse": "principal"}
}

# Operator rules tighten the configured capabilities, per class or per
# socket family; a class the configuration denies stays denied.
test_operator_rules_tighten_capabilities if {
	c := json.patch(conf, [{"op": "replace", "path": "/capability_packages", "value": ["op1", "op2"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op1.capability_denied as {"sockets.inet", "native_code"}
		with data.pydocker.rules.op2.capability_denied as {"sockets.inet6"}
	d.allow
	d.capabilities == {"processes": false, "sockets": ["unix"], "pty": false, "native_code": false}
}

test_operator_rules_deny_every_socket if {
	c := json.patch(conf, [{"op": "replace", "path": "/capability_packages", "value": ["op"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op.capability_denied as {"sockets"}
	d.capabilities.sockets == []
}

# The engine passes the ceiling precomputed; rules cannot raise it.
test_precomputed_ceiling_is_the_ceiling if {
	c := json.patch(conf, [{"op": "add", "path": "/capabilities", "value": {"configured": {"processes": false, "sockets": [], "pty": false, "native_code": false}}}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
	d.capabilities == {"processes": false, "sockets": [], "pty": false, "native_code": false}
}

test_deny_collects_every_rule_package if {
	inp := code([{"module": "os", "level": 0, "from": false, "line": 1, "col": 0}], [{"name": "os.system", "line": 2, "col": 0}])
	d := pydocker.decision with input as inp with data.pydocker.config as conf
	not d.allow
	{v.rule | some v in d.violations} == {"modules.blocked", "calls.blocked"}
}

test_without_config if {
	d := pydocker.decision with input as {"tool": "list-sessions"} with data.pydocker.config as {}
	d.allow
}

test_warnings_do_not_deny if {
	inp := json.patch(code([], []), [{"op": "add", "path": "/code/facts/dynamic", "value": [{"kind": "eval", "constant": false, "line": 3, "col": 1}]}])
	d := pydocker.decision with input as inp with data.pydocker.config as conf
	d.allow
	d.warnings == {{"rule": "dynamic.exec", "msg": "eval() runs code that cannot be checked before the run", "line": 3, "col": 1}}
}

# Without the engine's list, every package is read.
test_every_package_read_without_the_list if {
	c := json.patch(conf, [{"op": "remove", "path": "/capability_packages"}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op.capability_denied as {"native_code"}
	d.capabilities.native_code == false
}

# A package not in the list is not read.
test_packages_not_listed_are_not_read if {
	c := json.patch(conf, [{"op": "replace", "path": "/capability_packages", "value": ["op1"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op2.capability_denied as {"native_code"}
	d.capabilities.native_code == true
}

# Each configured quota reaches the decision with its config key; operator
# rules lower a principal's quota, the lowest wins, and one that asks for
# more than the configuration leaves the configured bound.
test_quotas_configured if {
	d := pydocker.decision with input as code([], []) with data.pydocker.config as conf
	d.quotas.sandboxes == {"max": 8, "key": "quotas.sandboxes"}
}

test_operator_rules_lower_quotas if {
	c := json.patch(conf, [{"op": "replace", "path": "/quota_packages", "value": ["op1", "op2"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op1.quota_max as {"sandboxes": 3, "sessions": 50}
		with data.pydocker.rules.op2.quota_max as {"sandboxes": 2}
	d.quotas == {
		"sandboxes": {"max": 2, "key": "quotas.sandboxes"},
		"sessions": {"max": 5, "key": "sessions.max_per_owner"},
	}
}

test_quota_packages_not_listed_are_not_read if {
	c := json.patch(conf, [{"op": "replace", "path": "/quota_packages", "value": ["op1"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op2.quota_max as {"sandboxes": 1}
	d.quotas.sandboxes.max == 8
}

test_quotas_every_package_read_without_the_list if {
	c := json.patch(conf, [{"op": "remove", "path": "/quota_packages"}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.op.quota_max as {"sandboxes": 1}
	d.quotas.sandboxes.max == 1
}

# A rules package chooses the runtime; without one the configured default
# applies.
test_runtime_chosen_by_a_rule if {
	c := json.patch(conf, [{"op": "replace", "path": "/runtime_packages", "value": ["sandboxing"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.sandboxing.runtime as "runsc"
	d.allow
	d.runtime == "runsc"
}

test_runtime_default if {
	c := json.patch(conf, [{"op": "replace", "path": "/runtimes/default", "value": "runsc"}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
	d.runtime == "runsc"
}

# Without the engine's list of packages, every package is visited.
test_runtime_without_package_list if {
	c := json.remove(conf, ["runtime_packages"])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.sandboxing.runtime as "runsc"
	d.runtime == "runsc"
}

test_runtime_conflict if {
	c := json.patch(conf, [{"op": "replace", "path": "/runtime_packages", "value": ["a", "b"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.a.runtime as "runsc"
		with data.pydocker.rules.b.runtime as ""
	not d.allow
	{v.rule | some v in d.violations} == {"runtime.conflict"}
	d.runtime == ""
}

test_runtime_invalid if {
	c := json.patch(conf, [{"op": "replace", "path": "/runtime_packages", "value": ["a"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.a.runtime as "kata"
	not d.allow
	[v.msg | some v in d.violations] == ["the policy asks for runtime \"kata\", which is not configured (docker.runtime, docker.runtimes); add it there or change the rule"]
	d.runtime == ""
}

# Reuse follows pool.reuse; a rules package can turn it off for a call,
# never on; an unknown word is a violation.
test_reuse_configured if {
	d := pydocker.decision with input as code([], []) with data.pydocker.config as conf
	d.reuse == "principal"
	c := json.patch(conf, [{"op": "replace", "path": "/reuse", "value": "never"}])
	e := pydocker.decision with input as code([], []) with data.pydocker.config as c
	e.reuse == "never"
}

test_reuse_turned_off_by_a_rule if {
	c := json.patch(conf, [{"op": "replace", "path": "/reuse_packages", "value": ["tenants"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.tenants.reuse as "never"
	d.reuse == "never"
	d.allow
}

test_reuse_cannot_be_turned_on_by_a_rule if {
	c := json.patch(conf, [
		{"op": "replace", "path": "/reuse_packages", "value": ["tenants"]},
		{"op": "replace", "path": "/reuse", "value": "never"},
	])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.tenants.reuse as "principal"
	d.reuse == "never"
}

test_reuse_without_package_list if {
	c := json.remove(conf, ["reuse_packages"])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.tenants.reuse as "never"
	d.reuse == "never"
}

test_reuse_invalid if {
	c := json.patch(conf, [{"op": "replace", "path": "/reuse_packages", "value": ["tenants"]}])
	d := pydocker.decision with input as code([], []) with data.pydocker.config as c
		with data.pydocker.rules.tenants.reuse as "nevr"
	not d.allow
	{v.rule | some v in d.violations} == {"reuse.invalid"}
	d.reuse == "never"
}
