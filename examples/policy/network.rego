# METADATA
# title: Example operator rule — sockets and processes per principal
# description: |
#   Capability classes (rules/capabilities.rego) come from the
#   configuration; a rule can take them away per call, never add to them.
#   Put this directory in policy.paths.
#   - Sockets need scope "python:net"; even then only unix and inet (no
#     inet6).
#   - Starting processes needs scope "python:processes".
#   - Principals without a subject (stdio without auth) keep what the
#     configuration allows: the operator runs those.
package pydocker.rules.network

has_scope(s) if s in object.get(input, ["principal", "scopes"], [])

authenticated if object.get(input, ["principal", "sub"], "") != ""

capability_denied contains "sockets" if {
	authenticated
	not has_scope("python:net")
}

capability_denied contains "sockets.inet6" if authenticated

capability_denied contains "processes" if {
	authenticated
	not has_scope("python:processes")
}
