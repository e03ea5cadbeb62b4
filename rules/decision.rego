# METADATA
# title: The decision
# description: |
#   Collects deny and warn from every package under data.pydocker.rules:
#   shipped rules and operator rules alike (an operator rule file declares
#   `package pydocker.rules.NAME` and adds to deny or warn). The engine
#   evaluates data.pydocker.decision once per request.
package pydocker

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
	"limits": object.get(data.pydocker.rules, ["limits", "effective"], {}),
	"modules": {
		"allowed": config_set("allowed_modules"),
		"blocked": config_set("blocked_modules"),
	},
	"calls": {"blocked": config_set("blocked_calls")},
}

default config_set(_) := set()

config_set(name) := object.keys(data.pydocker.config[name])
