package pydocker.test.modules

import data.pydocker.rules.modules

code(imports, dynamic) := {"tool": "execute-transient", "code": {"facts": {"imports": imports, "dynamic": dynamic, "calls": []}}}

imp(module, line) := {"module": module, "level": 0, "from": false, "line": line, "col": 0}

from_imp(module, names, line) := {
	"module": module, "level": 0, "from": true, "line": line, "col": 0,
	"names": [{"name": n} | some n in names],
}

cfg(allowed, blocked) := {
	"allowed_modules": allowed,
	"blocked_modules": blocked,
}

# python-docker-mcp's default lists, with numpy and pandas added.
compat := cfg(
	[
		"math", "datetime", "random", "json", "re", "collections", "statistics",
		"itertools", "functools", "operator", "string", "typing", "dataclasses",
		"enum", "abc", "array", "bisect", "heapq", "decimal", "fractions", "numbers",
		"numpy", "pandas",
	],
	[
		"os", "sys", "subprocess", "multiprocessing", "threading", "socket",
		"asyncio", "shutil", "pathlib", "tempfile", "pty", "platform",
	],
)

rules_of(set) := {v.rule | some v in set}

test_no_lists_allow_everything if {
	inp := code([imp("numpy", 1), imp("os", 2), from_imp("subprocess", ["run"], 3)], [])
	count(modules.deny) == 0 with input as inp with data.pydocker.config as cfg([], [])
}

test_blocked_prefix_semantics if {
	inp := code([imp("os.path", 1), imp("osx", 2), from_imp("os", ["path"], 3)], [])
	d := modules.deny with input as inp with data.pydocker.config as cfg([], ["os"])
	{v.line | some v in d} == {1, 3}
	rules_of(d) == {"modules.blocked"}
}

test_blocked_submodule_entry if {
	inp := code([imp("os", 1), imp("os.path", 2), from_imp("os", ["path", "sep"], 3), from_imp("os", ["sep"], 4)], [])
	d := modules.deny with input as inp with data.pydocker.config as cfg([], ["os.path"])
	{v.line | some v in d} == {2, 3}
}

test_blocked_star_import if {
	inp := code([from_imp("os", ["*"], 1), from_imp("json", ["*"], 2)], [])
	d := modules.deny with input as inp with data.pydocker.config as cfg([], ["os.path"])
	{v.line | some v in d} == {1}
}

test_relative_imports_are_not_judged if {
	rel := {"module": "os", "level": 1, "from": true, "names": [{"name": "x"}], "line": 1, "col": 0}
	bare := {"module": "", "level": 2, "from": true, "names": [{"name": "y"}], "line": 2, "col": 0}
	d := modules.deny with input as code([rel, bare], []) with data.pydocker.config as cfg(["numpy"], ["os"])
	count(d) == 0
}

test_allowlist_prefix_semantics if {
	inp := code(
		[
			imp("numpy", 1), imp("numpy.linalg", 2), from_imp("numpy", ["random"], 3),
			imp("numpyx", 4), imp("requests", 5),
		],
		[],
	)
	d := modules.deny with input as inp with data.pydocker.config as cfg(["numpy"], [])
	{v.line | some v in d} == {4, 5}
	rules_of(d) == {"modules.not_allowed"}
}

test_allowlist_submodule_entry if {
	inp := code([from_imp("os", ["path"], 1), from_imp("os", ["path", "system"], 2), imp("os", 3), imp("os.path", 4)], [])
	d := modules.deny with input as inp with data.pydocker.config as cfg(["os.path"], [])
	{v.line | some v in d} == {2, 3}
	w := modules.warn with input as inp with data.pydocker.config as cfg(["os.path"], [])
	{v.line | some v in w} == {4}
	rules_of(w) == {"modules.binds_parent"}
}

test_aliased_submodule_import_does_not_warn if {
	aliased := object.union(imp("os.path", 1), {"alias": "p"})
	w := modules.warn with input as code([aliased], []) with data.pydocker.config as cfg(["os.path"], [])
	count(w) == 0
}

test_future_is_exempt_from_allowlist if {
	d := modules.deny with input as code([from_imp("__future__", ["annotations"], 1)], []) with data.pydocker.config as cfg(["math"], [])
	count(d) == 0
	d2 := modules.deny with input as code([from_imp("__future__", ["annotations"], 1), imp("requests", 2)], []) with data.pydocker.config as cfg(["math"], [])
	{v.line | some v in d2} == {2}
}

test_blocked_wins_with_one_violation if {
	d := modules.deny with input as code([imp("os", 1)], []) with data.pydocker.config as cfg(["os"], ["os"])
	count(d) == 1
	rules_of(d) == {"modules.blocked"}
}

test_compat_lists_let_data_science_through if {
	inp := code(
		[
			imp("numpy", 1), imp("pandas", 2), from_imp("collections", ["Counter"], 3),
			imp("collections.abc", 4), from_imp("typing", ["List"], 5), imp("math", 6),
		],
		[],
	)
	count(modules.deny) == 0 with input as inp with data.pydocker.config as compat
}

test_compat_lists_deny_os_and_unlisted if {
	inp := code([imp("os", 1), imp("matplotlib.pyplot", 2), from_imp("subprocess", ["run"], 3)], [])
	d := modules.deny with input as inp with data.pydocker.config as compat
	{[v.line, v.rule] | some v in d} == {[1, "modules.blocked"], [2, "modules.not_allowed"], [3, "modules.blocked"]}
	some v in d
	v.line == 2
	contains(v.msg, `add "matplotlib"`)
}

test_constant_dynamic_import_judged_like_import if {
	dyn := [
		{"kind": "__import__", "arg": "os", "constant": true, "line": 1, "col": 4},
		{"kind": "importlib.import_module", "arg": "subprocess", "constant": true, "line": 2, "col": 0},
		{"kind": "importlib.import_module", "arg": ".sibling", "constant": true, "line": 3, "col": 0},
		{"kind": "__import__", "constant": false, "line": 4, "col": 0},
		{"kind": "importlib.import_module", "arg": "json", "constant": true, "line": 5, "col": 0},
	]
	d := modules.deny with input as code([], dyn) with data.pydocker.config as cfg([], ["os", "subprocess"])
	{v.line | some v in d} == {1, 2}
	some v in d
	v.line == 1
	v.col == 4
	startswith(v.msg, `__import__("os")`)
}

test_message_names_statement_and_entry if {
	d := modules.deny with input as code([from_imp("os", ["system", "path"], 7)], []) with data.pydocker.config as cfg([], ["os"])
	d == {{
		"rule": "modules.blocked",
		"msg": `from os import system, path: module os is blocked (blocked_modules lists "os")`,
		"line": 7, "col": 0,
	}}
}

test_dynamic_import_not_in_allowlist if {
	dyn := [{"kind": "importlib.import_module", "arg": "requests", "constant": true, "line": 3, "col": 1}]
	d := modules.deny with input as code([], dyn) with data.pydocker.config as cfg(["numpy"], [])
	d == {{
		"rule": "modules.not_allowed",
		"msg": `importlib.import_module("requests"): module requests is not in allowed_modules (add "requests" to allow it and its submodules)`,
		"line": 3, "col": 1,
	}}
}

# The engine passes the regular expressions precomputed; they are used.
test_precomputed_regex if {
	conf := {
		"allowed_modules": ["numpy", "os"],
		"blocked_modules": ["os"],
		"regex": {
			"allowed_modules": `(?m)^(?:numpy|os|__future__)\.[^\n]*\n`,
			"blocked_modules": `(?m)^(?:os)\.`,
		},
	}
	d := modules.deny with input as code([imp("os.path", 1), imp("numpy", 2), imp("scipy", 3)], []) with data.pydocker.config as conf
	{[v.line, v.rule] | some v in d} == {[1, "modules.blocked"], [3, "modules.not_allowed"]}
}

# A module and its C twin are one: blocking socket blocks _socket, blocking
# os blocks posix and posixpath, and blocking the C module blocks the
# Python one.
test_twins_are_blocked_as_one if {
	inp := code(
		[imp("_socket", 1), from_imp("posix", ["system"], 2), imp("posixpath", 3), imp("_posixsubprocess", 4), imp("numpy", 5)],
		[{"kind": "__import__", "arg": "_socket", "constant": true, "line": 6, "col": 0}],
	)
	d := modules.deny with input as inp with data.pydocker.config as cfg([], ["os", "socket"])
	{v.line | some v in d} == {1, 2, 3, 6}
	rules_of(d) == {"modules.blocked"}
	some v in d
	v.line == 1
	v.msg == `import _socket: module _socket is blocked: it is a C twin of socket, and blocked_modules lists "socket"`
}

test_python_module_of_a_blocked_twin if {
	d := modules.deny with input as code([imp("ctypes.util", 1)], []) with data.pydocker.config as cfg([], ["_ctypes"])
	d == {{"rule": "modules.blocked", "msg": `import ctypes.util: module ctypes.util is blocked: it is the Python module of _ctypes, and blocked_modules lists "_ctypes"`, "line": 1, "col": 0}}
}

# A twin blocked is not also reported as missing from the allowlist.
test_twin_with_allowlist if {
	d := modules.deny with input as code([imp("_socket", 1)], []) with data.pydocker.config as cfg(["math"], ["socket"])
	rules_of(d) == {"modules.blocked"}
	count(d) == 1
}

test_twins_precomputed if {
	conf := {
		"allowed_modules": [], "blocked_modules": ["socket"],
		"blocked_twins": {"_socket": {"twin": "socket", "entry": "socket", "how": "a C twin of"}},
		"regex": {"blocked_modules": `(?m)^(?:_socket|socket)\.`},
	}
	d := modules.deny with input as code([imp("_socket", 1), imp("posix", 2)], []) with data.pydocker.config as conf
	{v.line | some v in d} == {1}
}

test_blocked_twins_table if {
	t := modules.blocked_twins with data.pydocker.config as cfg([], ["os", "posixpath"])
	t == {
		"posix": {"twin": "os", "entry": "os", "how": "a C twin of"},
		"nt": {"twin": "os", "entry": "os", "how": "a C twin of"},
	}
}

test_twin_of_two_blocked_modules if {
	t := modules.blocked_twins with data.pydocker.config as cfg([], ["posix", "nt"])
	t == {"os": {"twin": "nt", "entry": "nt", "how": "the Python module of"}}
}
