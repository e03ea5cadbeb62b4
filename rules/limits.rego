# METADATA
# title: Resource limits
# description: |
#   A request may tighten the operator's limits, never raise them: a
#   requested limit above the configured maximum is denied, naming the
#   maximum. The engine gives the sandbox each requested value, or the
#   configured maximum where none was requested.
#   data.pydocker.config.limits maps each key of limits_requested
#   (timeout_seconds, memory_bytes, cpus, pids) to {max, key, text}: the
#   maximum, the config key it comes from and the maximum as written there.
#   A call run as an MCP task (input.task) may ask for a time limit up to
#   data.pydocker.config.tasks.max_duration_seconds (tasks.max_duration).
package pydocker.rules.limits

import data.pydocker.lib

deny contains v if {
	some name, asked in input.limits_requested
	l := data.pydocker.config.limits[name]
	not task_timeout(name)
	asked > l.max
	v := lib.violation(
		"limits.max",
		sprintf("requested %s %v is above the maximum %s (%s); ask for at most %v", [name, asked, l.text, l.key, l.max]),
		{},
	)
}

# A task's time limit (input.task is set) may go up to tasks.max_duration,
# when that is above docker.timeout.
task_timeout(name) if {
	name == "timeout_seconds"
	input.task
	data.pydocker.config.tasks.max_duration_seconds > data.pydocker.config.limits.timeout_seconds.max
}

deny contains v if {
	asked := input.limits_requested.timeout_seconds
	task_timeout("timeout_seconds")
	t := data.pydocker.config.tasks
	asked > t.max_duration_seconds
	v := lib.violation(
		"tasks.max_duration",
		sprintf("requested timeout_seconds %v is above the maximum for a task %s (tasks.max_duration); ask for at most %v", [asked, t.max_duration_text, t.max_duration_seconds]),
		{},
	)
}

deny contains v if {
	some name, asked in input.limits_requested
	asked < 0
	v := lib.violation("limits.invalid", sprintf("requested %s %v is negative", [name, asked]), {})
}

deny contains v if {
	some name, _ in input.limits_requested
	not data.pydocker.config.limits[name]
	v := lib.violation("limits.unknown", sprintf("limits_requested.%s is not a limit: want timeout_seconds, memory_bytes, cpus or pids", [name]), {})
}

deny contains v if {
	max := data.pydocker.config.max_code_bytes
	max > 0
	input.code.bytes > max
	v := lib.violation(
		"limits.code_size",
		sprintf("code is %d bytes; the maximum is %d (limits.max_code_bytes)", [input.code.bytes, max]),
		{},
	)
}

# The static step stops at an expression over the maximum before parsing
# it (what the parser would spend grows with every link of a chain such as
# x**x**… or - - - 1) and reports its size; the code has no facts then.
deny contains v if {
	e := input.code.expression
	max := data.pydocker.config.max_expression_tokens
	e.tokens > max
	v := lib.violation(
		"limits.expression_size",
		sprintf("line %d: an expression of %d tokens is over the maximum of %d tokens (limits.max_expression_tokens); split it into smaller statements, or raise limits.max_expression_tokens", [e.line, e.tokens, max]),
		e,
	)
}
