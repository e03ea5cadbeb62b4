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

# Absolute import statements. (A list, not a set: no hashing per import.)
imports := [imp |
	some imp in input.code.facts.imports
	imp.level == 0
	imp.module != ""
]

# Dynamic imports with a constant, absolute module name.
dynamic_imports := [d |
	some d in input.code.facts.dynamic
	dynamic_import_kinds[d.kind]
	d.constant
	not startswith(d.arg, ".")
]

# Fast path. Most code has nothing to report, so the rules first look at
# all judged modules at once: `judged` holds one line "MODULE.\n" per
# import, and one regular expression per list answers for all of them
# (see lib.list_regex). Import by import judging (below) runs only when
# that finds something.
# Relative imports are in it too (a line "MODULE." or "."): they can only
# send the check to the slow path, which leaves them out.
judged := lib.lines(array.concat(
	[imp.module | some imp in input.code.facts.imports],
	[d.arg | some d in dynamic_imports],
))

# Some module is under a blocked entry, or is a parent of one
# (`from os import path` with "os.path" blocked).
maybe_blocked if {
	blocked_regex != ""
	regex.match(blocked_regex, judged)
}

# Some module is not under an allowed entry (__future__ counts as allowed).
maybe_unlisted if {
	count(data.pydocker.config.allowed_modules) > 0
	regex.replace(judged, allowed_regex, "") != ""
}

# The regular expressions of the lists (see lib.list_regex), precomputed
# by the engine in data.pydocker.config.regex, built here when missing.
blocked_regex := r if {
	r := data.pydocker.config.regex.blocked_modules
} else := lib.list_regex("blocked_modules", object.get(data.pydocker.config, "blocked_modules", []))

allowed_regex := r if {
	r := data.pydocker.config.regex.allowed_modules
} else := lib.list_regex("allowed_modules", object.get(data.pydocker.config, "allowed_modules", []))

# The lists with a dot after each name, for the import by import tests.
blocked_prefixes := lib.dotted_all(object.get(data.pydocker.config, "blocked_modules", []))

allowed_prefixes := lib.dotted_all(object.get(data.pydocker.config, "allowed_modules", []))

# names of a from-import ([] for a plain import: no "names" field).
names(imp) := [n.name | some n in imp.names]

statement(imp) := sprintf("from %s import %s", [imp.module, concat(", ", names(imp))]) if imp.from

statement(imp) := sprintf("import %s", [imp.module]) if not imp.from

# blocked_entry is the blocked_modules entry that covers the import of
# module (with the imported names of a from-import, which may be
# submodules: an entry "os.path" covers `from os import path`).
blocked_entry(module, _) := lib.matching(lib.dotted(module), blocked_prefixes)[0] if {
	strings.any_prefix_match(lib.dotted(module), blocked_prefixes)
}

blocked_entry(module, names) := hits[0] if {
	not strings.any_prefix_match(lib.dotted(module), blocked_prefixes)
	strings.any_prefix_match(blocked_prefixes, lib.dotted(module))
	hits := array.concat(
		[h |
			some n in names
			n != "*"
			some h in lib.matching(lib.dotted(concat(".", [module, n])), blocked_prefixes)
		],
		# `from M import *` binds M's public submodules too.
		[trim_suffix(p, ".") | "*" in names; some p in blocked_prefixes; startswith(p, lib.dotted(module))],
	)
}

deny contains v if {
	maybe_blocked
	some imp in imports
	entry := blocked_entry(imp.module, names(imp))
	v := lib.violation(
		"modules.blocked",
		sprintf("%s: module %s is blocked (blocked_modules lists %q)", [statement(imp), imp.module, entry]),
		imp,
	)
}

deny contains v if {
	maybe_blocked
	some d in dynamic_imports
	entry := blocked_entry(d.arg, [])
	v := lib.violation(
		"modules.blocked",
		sprintf("%s(%q): module %s is blocked (blocked_modules lists %q)", [d.kind, d.arg, d.arg, entry]),
		d,
	)
}

# __future__ imports are compiler directives, not code.
exempt := {"__future__"}

allowed(module, _) if strings.any_prefix_match(lib.dotted(module), allowed_prefixes)

allowed(module, _) if exempt[module]

# `from os import path` is allowed by an entry "os.path".
allowed(module, names) if {
	count(names) > 0
	not "*" in names
	every n in names {
		strings.any_prefix_match(lib.dotted(concat(".", [module, n])), allowed_prefixes)
	}
}

not_allowed_msg(what, module) := sprintf(
	"%s: module %s is not in allowed_modules (add %q to allow it and its submodules)",
	[what, module, split(module, ".")[0]],
)

deny contains v if {
	maybe_unlisted
	some imp in imports
	not allowed(imp.module, names(imp))
	not blocked_entry(imp.module, names(imp))
	v := lib.violation("modules.not_allowed", not_allowed_msg(statement(imp), imp.module), imp)
}

deny contains v if {
	maybe_unlisted
	some d in dynamic_imports
	not allowed(d.arg, [])
	not blocked_entry(d.arg, [])
	v := lib.violation("modules.not_allowed", not_allowed_msg(sprintf("%s(%q)", [d.kind, d.arg]), d.arg), d)
}

# With an allowlist of a submodule ("os.path"), `import os.path` is allowed
# but binds the name os: the whole package.
warn contains v if {
	# Only an allowlist with a submodule entry can allow `import a.b`
	# without allowing a.
	contains(concat(",", object.get(data.pydocker.config, "allowed_modules", [])), ".")
	some imp in imports
	not imp.from
	object.get(imp, "alias", "") == ""
	contains(imp.module, ".")
	top := split(imp.module, ".")[0]
	not strings.any_prefix_match(lib.dotted(top), allowed_prefixes)
	allowed(imp.module, [])
	v := lib.violation(
		"modules.binds_parent",
		sprintf("%s binds the name %s, all of package %s, which allowed_modules does not list; write `import %s as NAME` or `from %s import ...`", [statement(imp), top, top, imp.module, imp.module]),
		imp,
	)
}
