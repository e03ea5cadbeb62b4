# METADATA
# title: Persistent sessions
# description: |
#   sessions.max_per_owner caps how many persistent sessions one principal
#   holds; a session belongs to the principal that created it.
package pydocker.rules.sessions

import data.pydocker.lib

deny contains v if {
	input.tool == "execute-persistent"
	input.session.id == "" # only a call that creates a session counts
	not input.session.exists
	max := data.pydocker.config.sessions.max_per_owner
	max > 0
	input.session.owner_count >= max
	v := lib.violation(
		"sessions.max_per_owner",
		sprintf("%q already holds %d sessions, the maximum (sessions.max_per_owner is %d); end one with cleanup-session first", [input.principal.sub, input.session.owner_count, max]),
		{},
	)
}

deny contains v if {
	input.session.exists
	owner := input.session.owner
	owner != ""
	owner != input.principal.sub
	v := lib.violation(
		"sessions.owner",
		sprintf("session %s belongs to another principal", [input.session.id]),
		{},
	)
}
