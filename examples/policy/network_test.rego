package pydocker.test.network

import data.pydocker

run(sub, scopes) := {
	"tool": "execute-transient",
	"code": {"facts": {"imports": [], "dynamic": [], "calls": [], "references": []}, "bytes": 1, "lines": 1},
	"limits_requested": {},
	"principal": {"sub": sub, "scopes": scopes},
}

# Nothing blocked in the configuration: every class is open before the
# rule tightens it.
conf := {"blocked_modules": [], "allowed_modules": [], "blocked_calls": []}

caps(inp) := c if {
	c := pydocker.decision.capabilities with input as inp with data.pydocker.config as conf
}

test_without_scopes_no_sockets_no_processes if {
	caps(run("alice", ["python:execute"])) == {"processes": false, "sockets": [], "pty": true, "native_code": true}
}

test_net_scope_gives_unix_and_inet if {
	caps(run("alice", ["python:net"])) == {"processes": false, "sockets": ["inet", "unix"], "pty": true, "native_code": true}
}

test_processes_scope if {
	caps(run("alice", ["python:net", "python:processes"])) == {"processes": true, "sockets": ["inet", "unix"], "pty": true, "native_code": true}
}

test_operator_over_stdio_keeps_the_configuration if {
	caps(run("", [])) == {"processes": true, "sockets": ["inet", "inet6", "unix"], "pty": true, "native_code": true}
}

# A scope cannot give back what the configuration takes away.
test_scope_cannot_loosen_the_configuration if {
	c := pydocker.decision.capabilities with input as run("alice", ["python:net", "python:processes"])
		with data.pydocker.config as {"blocked_modules": ["socket", "subprocess"]}
	c == {"processes": false, "sockets": [], "pty": true, "native_code": true}
}
