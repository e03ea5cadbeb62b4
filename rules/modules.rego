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
#   A module and its C twin are one: with socket blocked, `import _socket`
#   is blocked too (and the other way round); see `twins`.
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

# C twins: a Python module first, then the C modules that hold the same
# functions (os.system is posix.system). Blocking one blocks the others,
# in the static rules and, through the decision's modules.blocked, in the
# sandbox's import guard.
twins := [
	["os", "posix", "nt"],
	["os.path", "posixpath"],
	["socket", "_socket"],
	["subprocess", "_posixsubprocess"],
	["ctypes", "_ctypes"],
	["cffi", "_cffi_backend"],
	["multiprocessing", "_multiprocessing", "_posixshmem"],
	["ssl", "_ssl"],
	["pickle", "_pickle"],
	["threading", "_thread"],
	["asyncio", "_asyncio"],
	["io", "_io"],
	["signal", "_signal"],
	["selectors", "select"],
	["importlib", "_imp", "_frozen_importlib", "_frozen_importlib_external"],
	["json", "_json"],
	["sqlite3", "_sqlite3"],
	["xml.etree.ElementTree", "_elementtree"],
	["xml.parsers.expat", "pyexpat"],
	["hashlib", "_hashlib"],
	["random", "_random"],
	["functools", "_functools"],
	["operator", "_operator"],
	["collections", "_collections"],
	["datetime", "_datetime"],
	["decimal", "_decimal"],
	["struct", "_struct"],
	["csv", "_csv"],
	["locale", "_locale"],
	["queue", "_queue"],
	["weakref", "_weakref"],
	["warnings", "_warnings"],
	["codecs", "_codecs"],
	["tracemalloc", "_tracemalloc"],
	["curses", "_curses", "_curses_panel"],
	["dbm", "_dbm", "_gdbm"],
	["bz2", "_bz2"],
	["lzma", "_lzma"],
	["zoneinfo", "_zoneinfo"],
	["uuid", "_uuid"],
	["contextvars", "_contextvars"],
	["heapq", "_heapq"],
	["bisect", "_bisect"],
]

# blocked_twins maps each module blocked because a twin of it is
# blocked to {"twin", "entry", "how"}: the blocked twin, the
# blocked_modules entry that covers it, and how the two relate. The engine
# computes it once per configuration (data.pydocker.config.blocked_twins);
# here when missing.
blocked_twins := t if {
	t := data.pydocker.config.blocked_twins
} else := {m: sort([r | some [m2, r] in twin_candidates; m2 == m])[0] | some [m, _] in twin_candidates}

# One module may be the twin of several blocked ones (nt of os and of
# posix): blocked_twins keeps the first record.
twin_candidates contains [m, {"twin": k, "entry": e, "how": how(group, m)}] if {
	some group in twins
	some k in group
	some e in object.get(data.pydocker.config, "blocked_modules", [])
	startswith(lib.dotted(k), lib.dotted(e))
	some m in group
	m != k
	not strings.any_prefix_match(lib.dotted(m), blocked_prefixes)
}

how(group, m) := "the Python module of" if m == group[0]

how(group, m) := "a C twin of" if m != group[0]

twin_prefixes := [lib.dotted(m) | some m, _ in blocked_twins]

# twin_of is the blocked_twins record of the twin that covers module.
twin_of(module) := blocked_twins[trim_suffix(lib.matching(lib.dotted(module), twin_prefixes)[0], ".")] if {
	not strings.any_prefix_match(lib.dotted(module), blocked_prefixes)
}

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
} else := lib.list_regex("blocked_modules", sort(array.concat(
	object.get(data.pydocker.config, "blocked_modules", []),
	[m | some m, _ in blocked_twins],
)))

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
	v := lib.violation("modules.blocked", blocked_msg(statement(imp), imp.module, names(imp)), imp)
}

deny contains v if {
	maybe_blocked
	some d in dynamic_imports
	v := lib.violation("modules.blocked", blocked_msg(sprintf("%s(%q)", [d.kind, d.arg]), d.arg, []), d)
}

# blocked_msg is the message for a blocked import, undefined when the
# module is not blocked.
blocked_msg(what, module, names) := sprintf("%s: module %s is blocked (blocked_modules lists %q)", [what, module, blocked_entry(module, names)])

blocked_msg(what, module, names) := sprintf(
	"%s: module %s is blocked: it is %s %s, and blocked_modules lists %q",
	[what, module, t.how, t.twin, t.entry],
) if {
	not blocked_entry(module, names)
	t := twin_of(module)
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
	not twin_of(imp.module)
	v := lib.violation("modules.not_allowed", not_allowed_msg(statement(imp), imp.module), imp)
}

deny contains v if {
	maybe_unlisted
	some d in dynamic_imports
	not allowed(d.arg, [])
	not blocked_entry(d.arg, [])
	not twin_of(d.arg)
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
