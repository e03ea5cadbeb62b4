package pydocker.test.files

import data.pydocker
import data.pydocker.rules.files

run(calls, scopes) := {
	"tool": "execute-transient",
	"code": {"facts": {"imports": [], "dynamic": [], "calls": calls}, "bytes": 1, "lines": 1},
	"limits_requested": {},
	"principal": {"sub": "alice", "scopes": scopes},
}

opens := [
	{"name": "open", "line": 1, "col": 0},
	{"name": "io.open", "line": 2, "col": 4},
	{"name": "print", "line": 3, "col": 0},
]

test_open_without_scope_is_denied if {
	d := files.deny with input as run(opens, [])
	{[v.rule, v.line, v.col] | some v in d} == {["files.open", 1, 0], ["files.open", 2, 4]}
}

test_open_with_scope_is_allowed if {
	count(files.deny) == 0 with input as run(opens, ["python:files"])
}

test_heavy_memory_needs_scope if {
	inp := json.patch(run([], []), [{"op": "add", "path": "/limits_requested/memory_bytes", "value": 536870912}])
	d := files.deny with input as inp
	d == {{"rule": "files.heavy", "msg": "memory_bytes 536870912 is above 268435456, which needs scope python:heavy", "line": 0, "col": 0}}
	withscope := json.patch(inp, [{"op": "replace", "path": "/principal/scopes", "value": ["python:heavy"]}])
	count(files.deny) == 0 with input as withscope
}

test_no_principal_means_no_scopes if {
	count(files.deny) == 2 with input as {"code": {"facts": {"calls": opens}}}
}

# The shipped decision collects this package's violations.
test_decision_includes_example_rule if {
	d := pydocker.decision with input as run(opens, []) with data.pydocker.config as {}
	not d.allow
	{v.rule | some v in d.violations} == {"files.open"}
}
