# METADATA
# title: MCP tasks
# description: |
#   tasks.max_per_principal caps how many tasks (calls run with
#   params.task) one principal has running at once. A task's time limit
#   is judged in limits.rego (tasks.max_duration).
package pydocker.rules.tasks

import data.pydocker.lib

deny contains v if {
	max := data.pydocker.config.tasks.max_per_principal
	max > 0
	input.task.owner_count >= max
	v := lib.violation(
		"tasks.max_per_principal",
		sprintf("%q already has %d tasks running, the maximum (tasks.max_per_principal is %d); wait for one to end or cancel one with tasks/cancel", [input.principal.sub, input.task.owner_count, max]),
		{},
	)
}
