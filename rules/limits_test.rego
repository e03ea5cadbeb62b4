package pydocker.test.limits

import data.pydocker.rules.limits

conf := {
	"limits": {
		"timeout_seconds": {"max": 30, "key": "docker.timeout", "text": "30s"},
		"memory_bytes": {"max": 536870912, "key": "docker.memory_limit", "text": "512m"},
		"cpus": {"max": 1, "key": "docker.cpu_limit", "text": "1"},
		"pids": {"max": 128, "key": "docker.pids_limit", "text": "128"},
	},
	"max_code_bytes": 100,
	"max_expression_tokens": 10000,
}

test_nothing_requested_is_fine if {
	count(limits.deny) == 0 with input as {"tool": "execute-transient", "limits_requested": {}} with data.pydocker.config as conf
	count(limits.deny) == 0 with input as {"tool": "list-sessions"} with data.pydocker.config as conf
}

test_tighter_request_is_fine if {
	inp := {"limits_requested": {"timeout_seconds": 5.5, "memory_bytes": 1048576, "cpus": 0.5, "pids": 16}}
	count(limits.deny) == 0 with input as inp with data.pydocker.config as conf
}

test_request_at_maximum_is_fine if {
	inp := {"limits_requested": {"timeout_seconds": 30, "memory_bytes": 536870912, "cpus": 1, "pids": 128}}
	count(limits.deny) == 0 with input as inp with data.pydocker.config as conf
}

test_request_above_maximum_is_denied_naming_it if {
	inp := {"limits_requested": {"memory_bytes": 1073741824, "timeout_seconds": 60}}
	d := limits.deny with input as inp with data.pydocker.config as conf
	d == {
		{"rule": "limits.max", "msg": "requested memory_bytes 1073741824 is above the maximum 512m (docker.memory_limit); ask for at most 536870912", "line": 0, "col": 0},
		{"rule": "limits.max", "msg": "requested timeout_seconds 60 is above the maximum 30s (docker.timeout); ask for at most 30", "line": 0, "col": 0},
	}
}

test_negative_and_unknown_requests_are_denied if {
	inp := {"limits_requested": {"pids": -1, "gpus": 1}}
	d := limits.deny with input as inp with data.pydocker.config as conf
	{v.rule | some v in d} == {"limits.invalid", "limits.unknown"}
}

test_code_size if {
	d := limits.deny with input as {"code": {"bytes": 101}} with data.pydocker.config as conf
	d == {{"rule": "limits.code_size", "msg": "code is 101 bytes; the maximum is 100 (limits.max_code_bytes)", "line": 0, "col": 0}}
	count(limits.deny) == 0 with input as {"code": {"bytes": 100}} with data.pydocker.config as conf
	count(limits.deny) == 0 with input as {"code": {"bytes": 101}} with data.pydocker.config as object.union(conf, {"max_code_bytes": 0})
}

test_expression_size if {
	e := {"tokens": 700001, "line": 3, "col": 4}
	d := limits.deny with input as {"code": {"bytes": 10, "expression": e}} with data.pydocker.config as conf
	d == {{"rule": "limits.expression_size", "msg": "line 3: an expression of 700001 tokens is over the maximum of 10000 tokens (limits.max_expression_tokens); split it into smaller statements, or raise limits.max_expression_tokens", "line": 3, "col": 4}}
	count(limits.deny) == 0 with input as {"code": {"bytes": 10, "expression": {"tokens": 10000, "line": 1, "col": 0}}} with data.pydocker.config as conf
	count(limits.deny) == 0 with input as {"code": {"bytes": 10}} with data.pydocker.config as conf
}
