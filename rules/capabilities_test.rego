package pydocker.test.capabilities

import data.pydocker.rules.capabilities

all_open := {"processes": true, "sockets": ["inet", "inet6", "unix"], "pty": true, "native_code": true}

configured(conf) := c if {
	c := capabilities.configured with data.pydocker.config as conf
}

test_no_lists_everything_open if {
	configured({}) == all_open
	configured({"blocked_modules": [], "allowed_modules": [], "blocked_calls": []}) == all_open
}

test_blocked_modules_map_to_classes if {
	configured({"blocked_modules": ["subprocess"]}) == json.patch(all_open, [{"op": "replace", "path": "/processes", "value": false}])
	configured({"blocked_modules": ["_posixsubprocess"]}).processes == false
	configured({"blocked_modules": ["multiprocessing"]}).processes == false
	configured({"blocked_modules": ["socket"]}).sockets == []
	configured({"blocked_modules": ["_socket"]}).sockets == []
	configured({"blocked_modules": ["ctypes"]}).native_code == false
	configured({"blocked_modules": ["pty"]}) == {"processes": false, "sockets": all_open.sockets, "pty": false, "native_code": true}
	configured({"blocked_modules": ["os"]}) == {"processes": false, "sockets": all_open.sockets, "pty": false, "native_code": true}
}

# An entry covers the class's modules by prefix: "concurrent" covers
# concurrent.futures.process (ProcessPoolExecutor); "os.path" covers no
# process module.
test_blocked_module_prefixes if {
	configured({"blocked_modules": ["concurrent"]}).processes == false
	configured({"blocked_modules": ["concurrent.futures"]}).processes == false
	configured({"blocked_modules": ["concurrent.futures.thread"]}).processes == true
	configured({"blocked_modules": ["os.path"]}) == all_open
	configured({"blocked_modules": ["osx", "sockets"]}) == all_open
}

test_blocked_calls_map_to_classes if {
	configured({"blocked_calls": ["os.system"]}).processes == false
	configured({"blocked_calls": ["os.spawnvp"]}).processes == false # by pattern
	configured({"blocked_calls": ["os.execvpe"]}).processes == false
	configured({"blocked_calls": ["os"]}).processes == false # covers os.system
	configured({"blocked_calls": ["subprocess.run"]}).processes == false
	configured({"blocked_calls": ["asyncio.create_subprocess_exec"]}).processes == false
	configured({"blocked_calls": ["concurrent.futures.ProcessPoolExecutor"]}).processes == false
	configured({"blocked_calls": ["socket.socket"]}).sockets == []
	configured({"blocked_calls": ["os.openpty"]}) == json.patch(all_open, [{"op": "replace", "path": "/pty", "value": false}])
	configured({"blocked_calls": ["ctypes.CDLL"]}).native_code == false
	configured({"blocked_calls": ["os.getcwd", "eval", "open", "socket.gethostname"]}) == all_open
}

# With an allowlist, a class stays only when an allowed entry covers one
# of its modules.
test_allowlist if {
	configured({"allowed_modules": ["numpy", "pandas", "math"]}) == {"processes": false, "sockets": [], "pty": false, "native_code": false}
	configured({"allowed_modules": ["numpy", "os"]}) == {"processes": true, "sockets": [], "pty": true, "native_code": false}
	configured({"allowed_modules": ["os.path"]}).processes == false
	configured({"allowed_modules": ["asyncio"]}) == {"processes": true, "sockets": all_open.sockets, "pty": false, "native_code": false}
	configured({"allowed_modules": ["ctypes"]}).native_code == true
}

# The operator's word wins over the lists, both ways.
test_explicit_wins if {
	conf := {"blocked_modules": ["subprocess", "socket"], "capabilities": {"processes": true, "sockets": null, "pty": false, "native_code": null}}
	configured(conf) == {"processes": true, "sockets": [], "pty": false, "native_code": true}
	configured({"capabilities": {"sockets": false}}).sockets == []
	configured({"allowed_modules": ["math"], "capabilities": {"sockets": true, "socket_families": ["unix"]}}).sockets == ["unix"]
}

test_socket_families_sorted if {
	configured({"capabilities": {"socket_families": ["inet6", "unix"]}}).sockets == ["inet6", "unix"]
	configured({"capabilities": {"socket_families": []}}).sockets == []
}

test_why_denied_names_the_entry if {
	w := capabilities.why_denied with data.pydocker.config as {"blocked_modules": ["os"], "blocked_calls": ["socket.socket"]}
	w.processes == `blocked_modules lists "os"`
	w.sockets == `blocked_calls lists "socket.socket"`
	not w.native_code
}

test_precomputed if {
	c := {"processes": false, "sockets": [], "pty": false, "native_code": false}
	configured({"capabilities": {"configured": c}}) == c
}

test_unknown_capability_name_denies if {
	d := capabilities.deny with data.pydocker.rules.op.capability_denied as {"socket", "pty"} with data.pydocker.config as {}
	d == {{"rule": "capabilities.unknown", "msg": "capability_denied names \"socket\", which is not a capability: want one of native_code, processes, pty, sockets, sockets.inet, sockets.inet6, sockets.unix", "line": 0, "col": 0}}
}

test_known_names_do_not_deny if {
	count(capabilities.deny) == 0 with data.pydocker.rules.op.capability_denied as capabilities.names with data.pydocker.config as {}
}

test_capability_denied_not_a_set_denies if {
	d := capabilities.deny with data.pydocker.rules.op.capability_denied as "sockets" with data.pydocker.config as {"capability_packages": ["op"]}
	d == {{"rule": "capabilities.unknown", "msg": "data.pydocker.rules.op.capability_denied is a string: want a set of capability names", "line": 0, "col": 0}}
	count(capabilities.deny) == 0 with data.pydocker.rules.op.capability_denied as ["sockets"] with data.pydocker.config as {"capability_packages": ["op"]}
}
