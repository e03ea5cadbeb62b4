package pydocker.test.dynamic

import data.pydocker.rules.dynamic

code(dynamic) := {"tool": "execute-transient", "code": {"facts": {"imports": [], "dynamic": dynamic, "calls": []}}}

dyn(kind, line) := {"kind": kind, "constant": false, "line": line, "col": 0}

const(kind, arg, line) := {"kind": kind, "arg": arg, "constant": true, "line": line, "col": 0}

dunder(name, line) := {"kind": "dunder", "name": name, "constant": false, "line": line, "col": 0}

risky := [
	dyn("exec", 1),
	dyn("eval", 2),
	dyn("compile", 3),
	dyn("__import__", 4),
	dyn("importlib.import_module", 5),
	dunder("__subclasses__", 6),
	dunder("__globals__", 7),
	dyn("getattr", 8),
	const("getattr", "__builtins__", 9),
	dyn("sys.modules", 10),
	dyn("pickle.loads", 11),
	dyn("marshal.loads", 12),
	dyn("frobnicate", 13),
]

benign := [
	const("__import__", "json", 21),
	const("importlib.import_module", "os", 22),
	dunder("__init__", 23),
	dunder("__name__", 24),
	const("getattr", "shape", 25),
	const("setattr", "x", 26),
]

lines(set) := {v.line | some v in set}

test_standard_warns_and_never_denies if {
	inp := code(array.concat(risky, benign))
	count(dynamic.deny) == 0 with input as inp with data.pydocker.config.profile as "standard"
	lines(dynamic.warn) == {x | some x in numbers.range(1, 13)} with input as inp with data.pydocker.config.profile as "standard"
}

test_default_profile_is_standard if {
	inp := code(risky)
	count(dynamic.deny) == 0 with input as inp with data.pydocker.config as {}
	count(dynamic.warn) == count(risky) with input as inp with data.pydocker.config as {}
}

test_strict_denies_risky_only if {
	inp := code(array.concat(risky, benign))
	lines(dynamic.deny) == {x | some x in numbers.range(1, 13)} with input as inp with data.pydocker.config.profile as "strict"
	count(dynamic.warn) == 0 with input as inp with data.pydocker.config.profile as "strict"
}

test_rule_names if {
	d := dynamic.deny with input as code(risky) with data.pydocker.config.profile as "strict"
	{v.rule | some v in d} == {
		"dynamic.exec", "dynamic.import", "dynamic.dunder", "dynamic.getattr",
		"dynamic.sys_modules", "dynamic.deserialize", "dynamic.unknown",
	}
}

test_messages if {
	d := dynamic.deny with input as code([dunder("__subclasses__", 6), const("getattr", "__globals__", 9)]) with data.pydocker.config.profile as "strict"
	d == {
		{"rule": "dynamic.dunder", "msg": "attribute __subclasses__ reaches interpreter internals", "line": 6, "col": 0},
		{"rule": "dynamic.dunder", "msg": `getattr(..., "__globals__") reaches interpreter internals`, "line": 9, "col": 0},
	}
}

named(kind, name, line) := {"kind": kind, "name": name, "constant": false, "line": line, "col": 0}

# Frames, namespaces, gc and attrgetter: denied by strict, warned about
# by standard.
test_frames_namespaces_gc_attrgetter if {
	inp := code([
		named("frame", "tb_frame", 1),
		named("frame", "sys._getframe", 2),
		named("namespace", "vars", 3),
		named("gc", "gc.get_objects", 4),
		named("attrgetter", "operator.attrgetter", 5),
	])
	d := dynamic.deny with input as inp with data.pydocker.config.profile as "strict"
	{[v.line, v.rule] | some v in d} == {[1, "dynamic.frame"], [2, "dynamic.frame"], [3, "dynamic.namespace"], [4, "dynamic.gc"], [5, "dynamic.attrgetter"]}
	{v.msg | some v in d; v.line <= 2} == {
		"attribute tb_frame reaches the interpreter's frames: other code's globals, locals and builtins",
		"sys._getframe() reaches the interpreter's frames: other code's globals, locals and builtins",
	}
	w := dynamic.warn with input as inp with data.pydocker.config.profile as "standard"
	count(w) == 5
	count(dynamic.deny) == 0 with input as inp with data.pydocker.config.profile as "standard"
}
