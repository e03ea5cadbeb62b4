package pydocker.test.calls

import data.pydocker.rules.calls

code(calls) := {"tool": "execute-transient", "code": {"facts": {"imports": [], "dynamic": [], "calls": calls, "references": []}}}

call(name, line) := {"name": name, "line": line, "col": 2}

test_alias_resolved_names_match if {
	# analyze resolves `import os as o; o.system()` and
	# `from os import system as s; s()` to os.system.
	inp := code([call("os.system", 2), call("os.getcwd", 3), call("print", 4)])
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["os.system"]
	d == {{"rule": "calls.blocked", "msg": `call to os.system is blocked (blocked_calls lists "os.system")`, "line": 2, "col": 2}}
}

test_prefix_semantics if {
	inp := code([call("subprocess.run", 1), call("subprocess.Popen", 2), call("subprocessx.run", 3)])
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["subprocess"]
	{v.line | some v in d} == {1, 2}
}

test_builtins_prefix_is_ignored if {
	inp := code([call("open", 1), call("builtins.open", 2), call("io.open", 3), call("codecs.open", 4)])
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["open"]
	{v.line | some v in d} == {1, 2, 3} # io.open is open
}

test_no_list_no_violation if {
	count(calls.deny) == 0 with input as code([call("os.system", 1)]) with data.pydocker.config.blocked_calls as []
}

# The engine passes the regular expressions precomputed; they are used.
test_precomputed_regex if {
	conf := {"blocked_calls": ["os.system"], "regex": {"blocked_calls": `(?m)^(?:builtins\.)?(?:os\.system)\.`}}
	d := calls.deny with input as code([call("os.system", 1), call("os.getcwd", 2)]) with data.pydocker.config as conf
	{v.line | some v in d} == {1}
}

test_references_are_blocked_too if {
	inp := {"code": {"facts": {"calls": [], "references": [call("os.system", 4), call("os.getcwd", 5)]}}}
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["os.system"]
	d == {{"rule": "calls.blocked", "msg": `reference to os.system is blocked (blocked_calls lists "os.system"): it would be called elsewhere`, "line": 4, "col": 2}}
}

# A blocked call spelled through a C twin of its module is blocked too.
test_twin_spellings_are_blocked if {
	inp := {"code": {"facts": {"calls": [call("posix.system", 1), call("_posixsubprocess.fork_exec", 2), call("posix.getcwd", 3)], "references": [call("_socket.socket", 4)]}}}
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["os.system", "socket.socket", "subprocess"]
	{v.line | some v in d} == {1, 2, 4}
	some v in d
	v.line == 1
	v.msg == `call to posix.system is blocked: posix.system is os.system under another name, and blocked_calls lists "os.system"`
}

test_call_twins_table if {
	t := calls.call_twins with data.pydocker.config.blocked_calls as ["os.system", "posix.system", "json.loads"]
	t == {
		"nt.system": {"entry": "os.system", "same": "os.system"}, # not also from posix.system
		"_json.loads": {"entry": "json.loads", "same": "json.loads"},
	}
}

# "builtins.open" and "open" block the same calls, and io.open is open.
test_builtins_open_entry if {
	inp := code([call("open", 1), call("builtins.open", 2), call("io.open", 3), call("_io.open", 4), call("io.BytesIO", 5)])
	d := calls.deny with input as inp with data.pydocker.config.blocked_calls as ["builtins.open"]
	{v.line | some v in d} == {1, 2, 3, 4}
	some v in d
	v.line == 1
	v.msg == `call to open is blocked (blocked_calls lists "builtins.open")`
	some w in d
	w.line == 3
	w.msg == `call to io.open is blocked: io.open is open under another name, and blocked_calls lists "builtins.open"`
}

test_io_entry_blocks_open if {
	d := calls.deny with input as code([call("open", 1), call("print", 2)]) with data.pydocker.config.blocked_calls as ["io"]
	d == {{"rule": "calls.blocked", "msg": `call to open is blocked: open is io.open under another name, and blocked_calls lists "io"`, "line": 1, "col": 2}}
}
