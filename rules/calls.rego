# METADATA
# title: Blocked calls
# description: |
#   blocked_calls are dotted names matched against the code's calls after
#   import-alias resolution (`import os as o; o.system()` is os.system),
#   with prefix semantics ("subprocess" blocks subprocess.run). A builtins.
#   prefix is ignored: "open" also blocks builtins.open(). References to a
#   blocked callable (facts.references) are blocked like calls.
package pydocker.rules.calls

import data.pydocker.lib

prefixes := lib.dotted_all(object.get(data.pydocker.config, "blocked_calls", []))

# One line "NAME.\n" per call and reference; one regular expression
# answers for all of them (see lib.list_regex) before they are judged one
# by one.
called := lib.lines(array.concat(
	[c.name | some c in input.code.facts.calls],
	[r.name | some r in input.code.facts.references],
))

maybe_blocked if {
	blocked_regex != ""
	regex.match(blocked_regex, called)
}

# The regular expression of blocked_calls (see lib.list_regex),
# precomputed by the engine in data.pydocker.config.regex, built here when
# missing.
blocked_regex := r if {
	r := data.pydocker.config.regex.blocked_calls
} else := lib.list_regex("blocked_calls", object.get(data.pydocker.config, "blocked_calls", []))

# entry is the blocked_calls entry that covers a called name.
entry(name) := lib.matching(lib.dotted(trim_prefix(name, "builtins.")), prefixes)[0]

deny contains v if {
	maybe_blocked
	some c in input.code.facts.calls
	e := entry(c.name)
	v := lib.violation("calls.blocked", sprintf("call to %s is blocked (blocked_calls lists %q)", [c.name, e]), c)
}

# A blocked callable used as a value (`f = os.system`, `map(os.system, xs)`,
# `getattr(os, "system")`) is blocked as well: it is called elsewhere.
deny contains v if {
	maybe_blocked
	some r in input.code.facts.references
	e := entry(r.name)
	v := lib.violation("calls.blocked", sprintf("reference to %s is blocked (blocked_calls lists %q): it would be called elsewhere", [r.name, e]), r)
}
