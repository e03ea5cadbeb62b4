# METADATA
# title: Blocked calls
# description: |
#   blocked_calls are dotted names matched against the code's calls after
#   import-alias resolution (`import os as o; o.system()` is os.system),
#   with prefix semantics ("subprocess" blocks subprocess.run). A builtins.
#   prefix is ignored: "open" also blocks builtins.open().
package pydocker.rules.calls

import data.pydocker.lib

prefixes := lib.dotted_all(object.get(data.pydocker.config, "blocked_calls", []))

# One line "NAME.\n" per call; one regular expression answers for all of
# them (see lib.list_regex) before calls are judged one by one.
called := sprintf("%s.\n", [concat(".\n", [c.name | some c in input.code.facts.calls])])

deny contains v if {
	lib.config_regex("blocked_calls") != ""
	regex.match(lib.config_regex("blocked_calls"), called)
	some c in input.code.facts.calls
	name := lib.dotted(trim_prefix(c.name, "builtins."))
	strings.any_prefix_match(name, prefixes)
	entry := lib.matching(name, prefixes)[0]
	v := lib.violation(
		"calls.blocked",
		sprintf("call to %s is blocked (blocked_calls lists %q)", [c.name, entry]),
		c,
	)
}
