package pydocker.test.tasks

import data.pydocker.rules.limits
import data.pydocker.rules.tasks

conf := {
	"tasks": {"max_per_principal": 2, "max_duration_seconds": 3600, "max_duration_text": "1h0m0s"},
	"limits": {"timeout_seconds": {"max": 30, "key": "docker.timeout", "text": "30s"}},
}

task(count, timeout) := {
	"tool": "execute-transient",
	"principal": {"sub": "alice", "scopes": []},
	"task": {"owner_count": count},
	"limits_requested": {"timeout_seconds": timeout},
}

test_below_max_per_principal_is_allowed if {
	count(tasks.deny) == 0 with input as task(1, 10) with data.pydocker.config as conf
}

test_max_per_principal if {
	d := tasks.deny with input as task(2, 10) with data.pydocker.config as conf
	d == {{
		"rule": "tasks.max_per_principal",
		"msg": `"alice" already has 2 tasks running, the maximum (tasks.max_per_principal is 2); wait for one to end or cancel one with tasks/cancel`,
		"line": 0, "col": 0,
	}}
}

test_a_call_that_is_no_task_is_not_counted if {
	count(tasks.deny) == 0 with input as {"tool": "execute-transient", "limits_requested": {}} with data.pydocker.config as conf
}

test_a_task_may_run_past_docker_timeout if {
	count(limits.deny) == 0 with input as task(0, 90) with data.pydocker.config as conf
	count(limits.deny) == 0 with input as task(0, 3600) with data.pydocker.config as conf
}

test_a_task_within_max_duration_only if {
	d := limits.deny with input as task(0, 3601) with data.pydocker.config as conf
	d == {{
		"rule": "tasks.max_duration",
		"msg": "requested timeout_seconds 3601 is above the maximum for a task 1h0m0s (tasks.max_duration); ask for at most 3600",
		"line": 0, "col": 0,
	}}
}

test_a_call_that_is_no_task_keeps_docker_timeout if {
	inp := json.remove(task(0, 90), ["task"])
	d := limits.deny with input as inp with data.pydocker.config as conf
	[v | some v in d][0].rule == "limits.max"
}
