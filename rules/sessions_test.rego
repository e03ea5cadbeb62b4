package pydocker.test.sessions

import data.pydocker.rules.sessions

conf := {"sessions": {"max_per_owner": 2}}

new_session(count) := {
	"tool": "execute-persistent",
	"principal": {"sub": "alice", "scopes": []},
	"session": {"id": "", "owner": "alice", "exists": false, "owner_count": count, "packages": 0},
}

test_below_max_per_owner_is_allowed if {
	count(sessions.deny) == 0 with input as new_session(1) with data.pydocker.config as conf
}

test_max_per_owner if {
	d := sessions.deny with input as new_session(2) with data.pydocker.config as conf
	d == {{
		"rule": "sessions.max_per_owner",
		"msg": `"alice" already holds 2 sessions, the maximum (sessions.max_per_owner is 2); end one with cleanup-session first`,
		"line": 0, "col": 0,
	}}
}

test_zero_means_no_cap if {
	count(sessions.deny) == 0 with input as new_session(99) with data.pydocker.config as {"sessions": {"max_per_owner": 0}}
}

test_existing_session_is_not_counted if {
	inp := json.patch(new_session(5), [{"op": "replace", "path": "/session/exists", "value": true}])
	count(sessions.deny) == 0 with input as inp with data.pydocker.config as conf
}

# A call naming a session that does not exist creates nothing: the executor
# answers "unknown session", which is what the caller needs to hear.
test_unknown_session_id_is_not_a_creation if {
	inp := json.patch(new_session(5), [{"op": "replace", "path": "/session/id", "value": "0123abcd"}])
	count(sessions.deny) == 0 with input as inp with data.pydocker.config as conf
}

test_foreign_session_is_denied if {
	inp := {
		"tool": "execute-persistent",
		"principal": {"sub": "mallory"},
		"session": {"id": "abc", "owner": "alice", "exists": true},
	}
	d := sessions.deny with input as inp with data.pydocker.config as conf
	d == {{"rule": "sessions.owner", "msg": "session abc belongs to another principal", "line": 0, "col": 0}}
}
