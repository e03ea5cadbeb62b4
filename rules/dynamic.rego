# METADATA
# title: Dynamic features by profile
# description: |
#   Features that can import, run or reach code the static import list
#   cannot see. Profile "standard" warns about them; profile "strict" denies
#   them. In both, a dynamic import with a constant module name is judged
#   like an import statement (see modules.rego) and is not reported here.
#   Kinds this file does not know are reported too (fail closed).
package pydocker.rules.dynamic

import data.pydocker.lib

default profile := "standard"

profile := data.pydocker.config.profile

import_kinds := {"__import__", "importlib.import_module", "importlib.__import__"}

code_kinds := {"exec", "eval", "compile"}

getattr_kinds := {"getattr", "setattr", "delattr"}

# Attributes that lead from any object to interpreter internals: builtins,
# globals of other modules, the class hierarchy, code objects, loaders.
escape_attrs := {
	"__subclasses__", "__globals__", "__builtins__", "__loader__", "__spec__",
	"__code__", "__closure__", "__bases__", "__base__", "__mro__",
	"__getattribute__", "__reduce__", "__reduce_ex__", "__import__",
	"__dict__", "__self__", "__traceback__",
}

deserialize_kinds := {
	"pickle.loads", "pickle.load", "pickle.Unpickler",
	"_pickle.loads", "_pickle.load", "_pickle.Unpickler",
	"marshal.loads", "marshal.load", "shelve.open",
}

known_kinds := (((import_kinds | code_kinds) | getattr_kinds) | deserialize_kinds) | {"dunder", "sys.modules", "frame", "namespace", "gc", "attrgetter"}

risks contains lib.violation("dynamic.import", sprintf("%s() with a non-constant module name: the import cannot be checked before the run", [d.kind]), d) if {
	some d in input.code.facts.dynamic
	import_kinds[d.kind]
	not d.constant
}

risks contains lib.violation("dynamic.exec", sprintf("%s() runs code that cannot be checked before the run", [d.kind]), d) if {
	some d in input.code.facts.dynamic
	code_kinds[d.kind]
}

risks contains lib.violation("dynamic.dunder", sprintf("attribute %s reaches interpreter internals", [d.name]), d) if {
	some d in input.code.facts.dynamic
	d.kind == "dunder"
	escape_attrs[d.name]
}

risks contains lib.violation("dynamic.getattr", sprintf("%s() with a non-constant attribute name", [d.kind]), d) if {
	some d in input.code.facts.dynamic
	getattr_kinds[d.kind]
	not d.constant
}

risks contains lib.violation("dynamic.dunder", sprintf("%s(..., %q) reaches interpreter internals", [d.kind, d.arg]), d) if {
	some d in input.code.facts.dynamic
	getattr_kinds[d.kind]
	d.constant
	escape_attrs[d.arg]
}

risks contains lib.violation("dynamic.sys_modules", "sys.modules reaches every loaded module, imported or not", d) if {
	some d in input.code.facts.dynamic
	d.kind == "sys.modules"
}

# Frames hold other code's globals, locals and builtins: from a traceback
# or a generator, code walks up to the sandbox runner's own frames.
risks contains lib.violation("dynamic.frame", sprintf("%s reaches the interpreter's frames: other code's globals, locals and builtins", [frame_what(d)]), d) if {
	some d in input.code.facts.dynamic
	d.kind == "frame"
}

frame_what(d) := sprintf("attribute %s", [d.name]) if not contains(d.name, ".")

frame_what(d) := sprintf("%s()", [d.name]) if contains(d.name, ".")

risks contains lib.violation("dynamic.namespace", sprintf("%s() hands out a module's namespace: every function in it, however the code spells it", [d.name]), d) if {
	some d in input.code.facts.dynamic
	d.kind == "namespace"
}

risks contains lib.violation("dynamic.gc", sprintf("%s() reaches every object of the interpreter", [d.name]), d) if {
	some d in input.code.facts.dynamic
	d.kind == "gc"
}

risks contains lib.violation("dynamic.attrgetter", sprintf("%s() reads attributes named by strings at run time, which the static rules cannot follow", [d.name]), d) if {
	some d in input.code.facts.dynamic
	d.kind == "attrgetter"
}

risks contains lib.violation("dynamic.deserialize", sprintf("%s can run arbitrary code while loading data", [d.kind]), d) if {
	some d in input.code.facts.dynamic
	deserialize_kinds[d.kind]
}

risks contains lib.violation("dynamic.unknown", sprintf("dynamic feature %s is not known to the policy", [d.kind]), d) if {
	some d in input.code.facts.dynamic
	not known_kinds[d.kind]
}

deny contains v if {
	count(input.code.facts.dynamic) > 0
	profile == "strict"
	some v in risks
}

warn contains v if {
	count(input.code.facts.dynamic) > 0
	profile != "strict"
	some v in risks
}
