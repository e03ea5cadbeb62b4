# METADATA
# title: Module allowlist and blocklist
# description: |
#   allowed_modules (an allowlist when non-empty) and blocked_modules, both
#   with prefix semantics: "os" covers "os.path", "numpy" covers
#   "numpy.linalg". Relative imports are the user's own code and are never
#   judged. A dynamic import with a constant module name (__import__("os"),
#   importlib.import_module("os")) is judged like an import statement.
#   Only the user's code is judged: modules that libraries import for
#   themselves (numpy imports os) are not imports of the code.
#   One violation per offending import, at its line.
package pydocker.rules.modules

import data.pydocker.lib

dynamic_import_kinds := {"__import__", "importlib.import_module", "importlib.__import__"}

# targets are the absolute imports of the code, each with the statement as
# written ("what"), the module and, for a from-import, the imported names.
targets contains t if {
	some imp in input.code.facts.imports
	imp.level == 0
	imp.module != ""
	names := [n.name | some n in object.get(imp, "names", [])]
	t := {
		"module": imp.module,
		"names": names,
		"line": imp.line,
		"col": imp.col,
		"what": statement(imp, names),
		"binds_parent": binds_parent(imp),
	}
}

targets contains t if {
	some d in input.code.facts.dynamic
	dynamic_import_kinds[d.kind]
	d.constant
	not startswith(d.arg, ".")
	t := {
		"module": d.arg,
		"names": [],
		"line": d.line,
		"col": d.col,
		"what": sprintf("%s(%q)", [d.kind, d.arg]),
		"binds_parent": false,
	}
}

statement(imp, names) := sprintf("from %s import %s", [imp.module, concat(", ", names)]) if imp.from

statement(imp, _) := sprintf("import %s", [imp.module]) if not imp.from

# `import a.b` without `as` binds the name a: the whole package.
binds_parent(imp) if {
	not imp.from
	object.get(imp, "alias", "") == ""
	contains(imp.module, ".")
}

default binds_parent(_) := false

# covered are the dotted names an import reaches: the module and, for a
# from-import, module.name for each name (a name may be a submodule).
covered(t) := array.concat([t.module], [sprintf("%s.%s", [t.module, n]) | some n in t.names; n != "*"])

# blocked_entry is the first blocked_modules entry that covers the import.
blocked_entry(t) := hits[0] if {
	hits := array.concat(
		[h | some name in covered(t); h := lib.covering(name, data.pydocker.config.blocked_modules)],
		star_hits(t),
	)
}

# `from M import *` binds M's public submodules too: a blocked M.x counts.
star_hits(t) := [b |
	"*" in t.names
	some b, _ in data.pydocker.config.blocked_modules
	startswith(b, sprintf("%s.", [t.module]))
]

deny contains v if {
	some t in targets
	entry := blocked_entry(t)
	v := lib.violation(
		"modules.blocked",
		sprintf("%s: module %s is blocked (blocked_modules lists %q)", [t.what, t.module, entry]),
		t,
	)
}

allowlist_active if count(data.pydocker.config.allowed_modules) > 0

# __future__ imports are compiler directives, not code.
exempt := {"__future__"}

allowed(t) if lib.covering(t.module, data.pydocker.config.allowed_modules)

allowed(t) if exempt[t.module]

# `from os import path` is allowed by an entry "os.path".
allowed(t) if {
	count(t.names) > 0
	not "*" in t.names
	every n in t.names {
		lib.covering(sprintf("%s.%s", [t.module, n]), data.pydocker.config.allowed_modules)
	}
}

deny contains v if {
	allowlist_active
	some t in targets
	not allowed(t)
	not blocked_entry(t)
	top := split(t.module, ".")[0]
	v := lib.violation(
		"modules.not_allowed",
		sprintf("%s: module %s is not in allowed_modules (add %q to allow it and its submodules)", [t.what, t.module, top]),
		t,
	)
}

# With an allowlist of a submodule ("os.path"), `import os.path` is allowed
# but binds the name os, the whole package.
warn contains v if {
	allowlist_active
	some t in targets
	t.binds_parent
	allowed(t)
	top := split(t.module, ".")[0]
	not lib.covering(top, data.pydocker.config.allowed_modules)
	v := lib.violation(
		"modules.binds_parent",
		sprintf("%s binds the name %s, all of package %s, which allowed_modules does not list; write `import %s as NAME` or `from %s import ...`", [t.what, top, top, t.module, t.module]),
		t,
	)
}
