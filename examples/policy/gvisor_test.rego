package pydocker.test.gvisor

import data.pydocker

run(sub, scopes) := {
	"tool": "execute-transient",
	"code": {"facts": {"imports": [], "dynamic": [], "calls": [], "references": []}, "bytes": 1, "lines": 1},
	"limits_requested": {},
	"principal": {"sub": sub, "scopes": scopes},
}

docker := {
	"blocked_modules": [], "allowed_modules": [], "blocked_calls": [],
	"runtime_packages": ["gvisor"],
	"runtimes": {"default": "", "allowed": {"": true, "runsc": true}, "keys": "docker.runtime, docker.runtimes"},
}

kubernetes := json.patch(docker, [{"op": "replace", "path": "/runtimes/allowed", "value": {"": true, "gvisor": true}}])

without := json.patch(docker, [{"op": "replace", "path": "/runtimes/allowed", "value": {"": true}}])

decide(inp, conf) := d if {
	d := pydocker.decision with input as inp with data.pydocker.config as conf
}

test_untrusted_runs_under_runsc if {
	d := decide(run("alice", ["python:execute"]), docker)
	d.allow
	d.runtime == "runsc"
}

test_trusted_keeps_the_default if {
	d := decide(run("alice", ["python:trusted"]), docker)
	d.allow
	d.runtime == ""
}

test_operator_keeps_the_default if {
	decide(run("", []), docker).runtime == ""
}

test_kubernetes_runtime_class if {
	decide(run("alice", []), kubernetes).runtime == "gvisor"
}

# gVisor not configured: the untrusted call is denied, never run under runc.
test_not_configured_denies if {
	d := decide(run("alice", []), without)
	not d.allow
	{v.rule | some v in d.violations} == {"runtime.invalid"}
}
