# METADATA
# title: Helpers shared by the shipped rules
# description: |
#   Functions for module prefixes, PEP 503 package names and PEP 440
#   versions. Operator rules may import data.pydocker.lib too.
package pydocker.lib

# violation builds the object every deny and warn rule produces.
violation(rule, msg, at) := {
	"rule": rule,
	"msg": msg,
	"line": object.get(at, "line", 0),
	"col": object.get(at, "col", 0),
}

# list_regex builds, for the config list `key`, the multi-line regular
# expression matched against text with one "NAME.\n" line per module or
# call; "" for an empty list. Names are dotted identifiers, so "." is the
# only character to escape. policy/data.go builds the same strings.
#   blocked_modules: a line under an entry, or a line that is a parent of
#     an entry: (?m)^(?:os|sys)\.|^(?:a|a\.b)\.$
#   allowed_modules: every line under an entry (or __future__), to delete:
#     (?m)^(?:numpy|__future__)\.[^\n]*\n
#   blocked_calls: a line under an entry (its builtins. prefix left out),
#     builtins. optional:
#     (?m)^(?:builtins\.)?(?:os\.system)\.
list_regex(_, names) := "" if count(names) == 0

list_regex(key, names) := sprintf(`(?m)^(?:%s)\.%s`, [alternatives(names), parents_regex(names)]) if {
	key == "blocked_modules"
	count(names) > 0
}

list_regex(key, names) := sprintf(`(?m)^(?:%s|__future__)\.[^\n]*\n`, [alternatives(names)]) if {
	key == "allowed_modules"
	count(names) > 0
}

list_regex(key, names) := sprintf(`(?m)^(?:builtins\.)?(?:%s)\.`, [alternatives([trim_prefix(n, "builtins.") | some n in names])]) if {
	key == "blocked_calls"
	count(names) > 0
}

alternatives(names) := concat("|", [replace(n, ".", `\.`) | some n in names])

# The proper parents of dotted entries: "a.b.c" gives a and a.b.
parents(names) := sort({p |
	some n in names
	parts := split(n, ".")
	some i, _ in parts
	i > 0
	p := concat(".", array.slice(parts, 0, i))
})

parents_regex(names) := sprintf(`|^(?:%s)\.$`, [alternatives(parents(names))]) if count(parents(names)) > 0

parents_regex(names) := "" if count(parents(names)) == 0

# lines is the text with one line "NAME.\n" per name ("" for none), which
# the list regular expressions are matched against.
lines(names) := sprintf("%s.\n", [concat(".\n", names)]) if count(names) > 0

lines(names) := "" if count(names) == 0

# dotted is name with a trailing dot, so that prefix tests stop at dots:
# "os." is a prefix of "os.path." and of "os.", not of "osx.".
dotted(name) := concat("", [name, "."])

# dotted_all maps dotted over a list of names.
dotted_all(names) := [dotted(n) | some n in names]

# matching lists the names (without the dot) of those dotted prefixes
# that cover dotted name d, in the order of prefixes.
matching(d, prefixes) := [trim_suffix(p, ".") | some p in prefixes; startswith(d, p)]

# normalize_package is the PEP 503 normal form of a package name.
normalize_package(name) := lower(regex.replace(name, `[-_.]+`, "-"))

# valid_package is true for a PEP 508 distribution name.
valid_package(name) if regex.match(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`, name)

# PEP 440 version, lower-cased. Groups: 1 epoch, 2 release, 3 pre label,
# 4 pre number, 5 implicit post, 6 post label, 7 post number, 8 dev label,
# 9 dev number. The local part (+...) is ignored.
pep440 := `^v?(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d*))?(?:[-_.]?(dev)[-_.]?(\d*))?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$`

version_parts(v) := regex.find_all_string_submatch_n(pep440, lower(trim_space(v)), 1)[0]

valid_version(v) if version_parts(v)

# release is the list of release numbers: "1.26.4" gives [1, 26, 4].
release(v) := [to_number(p) | some p in split(version_parts(v)[2], ".")]

num(s) := 0 if s == ""

num(s) := to_number(s) if s != ""

pre_rank := {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}

# pre_key orders 1.0.dev1 < 1.0a1 < 1.0b1 < 1.0rc1 < 1.0.
pre_key(m) := [pre_rank[m[3]], num(m[4])] if m[3] != ""

pre_key(m) := [-1, 0] if {
	m[3] == ""
	m[8] == "dev"
	m[5] == ""
	m[6] == ""
}

pre_key(m) := [3, 0] if {
	m[3] == ""
	not dev_only(m)
}

dev_only(m) if {
	m[8] == "dev"
	m[5] == ""
	m[6] == ""
}

post_key(m) := [1, num(m[5])] if m[5] != ""

post_key(m) := [1, num(m[7])] if m[6] != ""

post_key(m) := [0, 0] if {
	m[5] == ""
	m[6] == ""
}

dev_key(m) := [0, num(m[9])] if m[8] == "dev"

dev_key(m) := [1, 0] if m[8] == ""

# version_key is a value whose Rego order is PEP 440 order: compare two
# versions with <, ==, > on their keys. Trailing zeros of the release do
# not count (1.0 == 1.0.0).
version_key(v) := [num(m[1]), strip_zeros(release(v)), pre_key(m), post_key(m), dev_key(m)] if {
	m := version_parts(v)
}

strip_zeros(r) := array.slice(r, 0, max(nonzero) + 1) if {
	nonzero := [i | some i, x in r; x != 0]
	count(nonzero) > 0
}

strip_zeros(r) := [] if {
	every x in r {
		x == 0
	}
}

# clause parses one specifier clause such as ">=1.26" or "==1.2.*".
clause(s) := {"op": m[1], "version": m[2]} if {
	m := regex.find_all_string_submatch_n(`^(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;<>=!~]+)$`, trim_space(s), 1)[0]
}

# clauses parses a comma-separated specifier; "" gives [].
clauses(spec) := [clause(s) | some s in split(spec, ",")] if trim_space(spec) != ""

clauses(spec) := [] if trim_space(spec) == ""

# valid_specifier is true when every clause of spec parses and names a
# valid version (a trailing .* only after == and !=).
valid_specifier(spec) if {
	trim_space(spec) == ""
}

valid_specifier(spec) if {
	trim_space(spec) != ""
	parts := split(spec, ",")
	every s in parts {
		valid_clause(clause(s))
	}
}

valid_clause(c) if {
	c.op == "==="
}

valid_clause(c) if {
	c.op != "==="
	not endswith(c.version, ".*")
	valid_version(c.version)
}

valid_clause(c) if {
	c.op in {"==", "!="}
	endswith(c.version, ".*")
	valid_version(trim_suffix(c.version, ".*"))
}

# pinned_version is the exact version of a specifier "==V" or "===V".
pinned_version(spec) := c.version if {
	cs := clauses(spec)
	count(cs) == 1
	c := cs[0]
	c.op in {"==", "==="}
	not endswith(c.version, ".*")
}

# satisfies is true when version v meets clause c (PEP 440 comparison;
# whether pre-releases are wanted at all is the installer's business).
satisfies(v, c) if {
	c.op == "==="
	v == c.version
}

satisfies(v, c) if {
	c.op == "=="
	not endswith(c.version, ".*")
	version_key(v) == version_key(c.version)
}

satisfies(v, c) if {
	c.op == "=="
	endswith(c.version, ".*")
	prefix_match(v, trim_suffix(c.version, ".*"))
}

satisfies(v, c) if {
	c.op == "!="
	not endswith(c.version, ".*")
	version_key(v) != version_key(c.version)
}

satisfies(v, c) if {
	c.op == "!="
	endswith(c.version, ".*")
	not prefix_match(v, trim_suffix(c.version, ".*"))
}

satisfies(v, c) if {
	c.op == ">="
	version_key(v) >= version_key(c.version)
}

satisfies(v, c) if {
	c.op == "<="
	version_key(v) <= version_key(c.version)
}

# >V excludes post-releases of V unless V is one.
satisfies(v, c) if {
	c.op == ">"
	version_key(v) > version_key(c.version)
	not post_of(v, c.version)
}

# <V excludes pre-releases of V unless V is one: <2 does not allow 2.0rc1.
satisfies(v, c) if {
	c.op == "<"
	version_key(v) < version_key(c.version)
	not pre_of(v, c.version)
}

same_release(a, b) if {
	ma := version_parts(a)
	mb := version_parts(b)
	num(ma[1]) == num(mb[1])
	strip_zeros(release(a)) == strip_zeros(release(b))
}

is_pre(v) if version_parts(v)[3] != ""

is_pre(v) if version_parts(v)[8] == "dev"

is_post(v) if version_parts(v)[5] != ""

is_post(v) if version_parts(v)[6] != ""

pre_of(v, bound) if {
	is_pre(v)
	not is_pre(bound)
	same_release(v, bound)
}

post_of(v, bound) if {
	is_post(v)
	not is_post(bound)
	same_release(v, bound)
}

# ~=1.4.2 means >=1.4.2 and ==1.4.*
satisfies(v, c) if {
	c.op == "~="
	version_key(v) >= version_key(c.version)
	r := release(c.version)
	count(r) >= 2
	prefix_match(v, concat(".", [format_int(x, 10) | some x in array.slice(r, 0, count(r) - 1)]))
}

# prefix_match is true when v's epoch equals prefix's and v's release
# starts with prefix's release (missing components count as 0).
prefix_match(v, prefix) if {
	num(version_parts(v)[1]) == num(version_parts(prefix)[1])
	want := release(prefix)
	have := array.concat(release(v), [0 | some _ in want])
	array.slice(have, 0, count(want)) == want
}

# satisfies_all is true when v meets every clause of spec.
satisfies_all(v, spec) if {
	valid_specifier(spec)
	every c in clauses(spec) {
		satisfies(v, c)
	}
}
