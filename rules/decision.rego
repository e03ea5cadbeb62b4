# METADATA
# title: The decision
# description: |
#   Collects deny and warn from every package under data.pydocker.rules:
#   shipped rules and operator rules alike (an operator rule file declares
#   `package pydocker.rules.NAME` and adds to deny or warn). The engine
#   evaluates data.pydocker.decision once per request.
package pydocker

import data.pydocker.lib

violations contains v if {
	some v in data.pydocker.rules[_].deny
}

warnings contains v if {
	some v in data.pydocker.rules[_].warn
}

default allow := false

allow if count(violations) == 0

decision := {
	"allow": allow,
	"violations": violations,
	"warnings": warnings,
	"limits": data.pydocker.rules.limits.effective,
	"modules": {
		"allowed": lib.config_list("allowed_modules"),
		"blocked": lib.config_list("blocked_modules"),
	},
	"calls": {"blocked": lib.config_list("blocked_calls")},
}
