# METADATA
# title: Blocked calls
# description: |
#   blocked_calls are dotted names matched against the code's calls after
#   import-alias resolution (`import os as o; o.system()` is os.system),
#   with prefix semantics ("subprocess" blocks subprocess.run). A builtins.
#   prefix is ignored: "open" also blocks builtins.open().
package pydocker.rules.calls

import data.pydocker.lib

prefixes := lib.prefixes("blocked_calls")

# The called names with a dot after each, builtins. removed.
called := [dotted(c) | some c in input.code.facts.calls]

dotted(c) := lib.dotted(trim_prefix(c.name, "builtins."))

deny contains v if {
	count(prefixes) > 0
	strings.any_prefix_match(called, prefixes)
	some c in input.code.facts.calls
	name := dotted(c)
	strings.any_prefix_match(name, prefixes)
	entry := lib.matching(name, prefixes)[0]
	v := lib.violation(
		"calls.blocked",
		sprintf("call to %s is blocked (blocked_calls lists %q)", [c.name, entry]),
		c,
	)
}
