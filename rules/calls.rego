# METADATA
# title: Blocked calls
# description: |
#   blocked_calls are dotted names matched against the code's calls after
#   import-alias resolution (`import os as o; o.system()` is os.system),
#   with prefix semantics ("subprocess" blocks subprocess.run). A builtins.
#   prefix is ignored: "open" also blocks builtins.open(). References to a
#   blocked callable (facts.references) are blocked like calls, and so
#   are other spellings of the same function: through a C twin of the
#   module (posix.system for os.system, see modules.twins) and those of
#   same_functions (io.open is open). An entry may carry the builtins.
#   prefix too: "builtins.open" blocks open().
package pydocker.rules.calls

import data.pydocker.lib
import data.pydocker.rules.modules

blocked_calls := object.get(data.pydocker.config, "blocked_calls", [])

# The entries without a builtins. prefix, with a dot after each.
prefixes := lib.dotted_all([trim_prefix(e, "builtins.") | some e in blocked_calls])

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
} else := lib.list_regex("blocked_calls", sort(array.concat(blocked_calls, [n | some n, _ in call_twins])))

# Functions that are one under several names, besides modules.twins.
same_functions := [["open", "io.open", "_io.open"]]

# call_twins maps each other spelling of a blocked function to {"entry",
# "same"}: the blocked_calls entry, and the name it covers that the
# spelling is the same as ("posix.system" -> "os.system"). The engine
# computes it once per configuration (data.pydocker.config.
# blocked_call_twins); here when missing.
call_twins := t if {
	t := data.pydocker.config.blocked_call_twins
} else := {n: sort([r | some [n2, r] in call_twin_candidates; n2 == n])[0] | some [n, _] in call_twin_candidates}

# An entry under a module: the same name under each twin of the module.
call_twin_candidates contains [n, {"entry": e, "same": s}] if {
	some e in blocked_calls
	s := trim_prefix(e, "builtins.")
	some group in modules.twins
	some k in group
	startswith(lib.dotted(s), lib.dotted(k))
	some m in group
	m != k
	n := concat("", [m, substring(s, count(k), -1)])
	not strings.any_prefix_match(lib.dotted(n), prefixes)
}

# An entry that covers one name of same_functions: the other names.
call_twin_candidates contains [n, {"entry": e, "same": k}] if {
	some e in blocked_calls
	s := trim_prefix(e, "builtins.")
	some group in same_functions
	some k in group
	startswith(lib.dotted(k), lib.dotted(s))
	some n in group
	n != k
	not strings.any_prefix_match(lib.dotted(n), prefixes)
}

twin_prefixes := [lib.dotted(n) | some n, _ in call_twins]

# entry is the blocked_calls entry (as written) that covers a called name.
entry(name) := [e |
	some e in blocked_calls
	startswith(lib.dotted(trim_prefix(name, "builtins.")), lib.dotted(trim_prefix(e, "builtins.")))
][0]

deny contains v if {
	maybe_blocked
	some c in input.code.facts.calls
	v := lib.violation("calls.blocked", blocked_msg("call to", c.name, ""), c)
}

# A blocked callable used as a value (`f = os.system`, `map(os.system, xs)`,
# `getattr(os, "system")`) is blocked as well: it is called elsewhere.
deny contains v if {
	maybe_blocked
	some r in input.code.facts.references
	v := lib.violation("calls.blocked", blocked_msg("reference to", r.name, ": it would be called elsewhere"), r)
}

# blocked_msg is the message for a blocked name, undefined when it is not.
blocked_msg(what, name, why) := sprintf("%s %s is blocked (blocked_calls lists %q)%s", [what, name, entry(name), why])

blocked_msg(what, name, why) := sprintf("%s %s is blocked: %s is %s under another name, and blocked_calls lists %q%s", [what, name, n, t.same, t.entry, why]) if {
	not entry(name)
	n := trim_suffix(lib.matching(lib.dotted(name), twin_prefixes)[0], ".")
	t := call_twins[n]
}
