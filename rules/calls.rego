# METADATA
# title: Blocked calls
# description: |
#   blocked_calls are dotted names matched against the code's calls after
#   import-alias resolution (`import os as o; o.system()` is os.system),
#   with prefix semantics ("subprocess" blocks subprocess.run). A builtins.
#   prefix is ignored: "open" also blocks builtins.open().
package pydocker.rules.calls

import data.pydocker.lib

deny contains v if {
	some c in input.code.facts.calls
	name := trim_prefix(c.name, "builtins.")
	entry := lib.covering(name, data.pydocker.config.blocked_calls)
	v := lib.violation(
		"calls.blocked",
		sprintf("call to %s is blocked (blocked_calls lists %q)", [c.name, entry]),
		c,
	)
}
