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

# The engine adds to this the effective limits (each requested limit, or
# the configured maximum) and the module and call lists for the sandbox
# runner, all from the configuration: Rego cannot raise them.
decision := {
	"allow": allow,
	"violations": violations,
	"warnings": warnings,
}
