# METADATA
# title: Example operator rule — file access and heavy runs need a scope
# description: |
#   An operator rule beside the shipped ones: put this directory in
#   policy.paths. Every package under data.pydocker.rules adds to the
#   decision. It judges what the configuration alone cannot: the principal.
#   - Code may call open() (and io.open, os.open, codecs.open) only for a
#     principal with scope "python:files"; others use the read-file and
#     write-file tools, which stay inside the workspace.
#   - Asking for more than 256 MiB of memory needs scope "python:heavy".
package pydocker.rules.files

import data.pydocker.lib

file_calls := {"open", "builtins.open", "io.open", "os.open", "codecs.open"}

heavy_memory := 268435456

has_scope(s) if s in object.get(input, ["principal", "scopes"], [])

deny contains v if {
	not has_scope("python:files")
	some c in input.code.facts.calls
	file_calls[c.name]
	v := lib.violation(
		"files.open",
		sprintf("%s() needs scope python:files; use the read-file and write-file tools for files in the workspace", [c.name]),
		c,
	)
}

deny contains v if {
	not has_scope("python:heavy")
	asked := input.limits_requested.memory_bytes
	asked > heavy_memory
	v := lib.violation(
		"files.heavy",
		sprintf("memory_bytes %d is above %d, which needs scope python:heavy", [asked, heavy_memory]),
		{},
	)
}
