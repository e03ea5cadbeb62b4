package pydocker.test.packages

import data.pydocker.rules.packages

base := {
	"allowed": {},
	"blocked": {},
	"require_pinned": false,
	"allowed_indexes": {"https://pypi.example/simple": true},
	"max_per_session": 0,
}

conf(overrides) := {"package": object.union(base, overrides)}

install(name, spec) := {
	"tool": "install-package",
	"package": {"name": name, "specifier": spec, "index": ""},
	"session": {"id": "s1", "owner": "", "exists": true, "owner_count": 1, "packages": 0},
}

rules_of(set) := {v.rule | some v in set}

test_no_lists_allow_any_valid_request if {
	count(packages.deny) == 0 with input as install("requests", "") with data.pydocker.config as conf({})
	count(packages.deny) == 0 with input as install("requests", ">=2") with data.pydocker.config as conf({})
}

test_only_with_a_package if {
	count(packages.deny) == 0 with input as {"tool": "execute-transient"} with data.pydocker.config as conf({"require_pinned": true})
}

test_invalid_name_and_specifier if {
	rules_of(packages.deny) == {"packages.name"} with input as install("-bad", "") with data.pydocker.config as conf({})
	rules_of(packages.deny) == {"packages.name"} with input as {"package": {}} with data.pydocker.config as conf({})
	rules_of(packages.deny) == {"packages.specifier"} with input as install("numpy", ">>1") with data.pydocker.config as conf({})
}

test_blocked_pep503_normalised if {
	c := conf({"blocked": {"scikit-learn": true}})
	every n in ["scikit-learn", "Scikit_Learn", "scikit.learn", "SCIKIT--learn"] {
		rules_of(packages.deny) == {"packages.blocked"} with input as install(n, "") with data.pydocker.config as c
	}
	count(packages.deny) == 0 with input as install("scikit-image", "") with data.pydocker.config as c
}

test_allowlist if {
	c := conf({"allowed": {"requests": {"requirement": "requests", "specifier": ""}}})
	count(packages.deny) == 0 with input as install("Requests", "") with data.pydocker.config as c
	d := packages.deny with input as install("urllib4", "") with data.pydocker.config as c
	d == {{"rule": "packages.not_allowed", "msg": "package urllib4 is not in package.allowed", "line": 0, "col": 0}}
}

test_blocked_and_not_allowed_is_one_violation if {
	c := conf({"allowed": {"requests": {"requirement": "requests", "specifier": ""}}, "blocked": {"evil": true}})
	rules_of(packages.deny) == {"packages.blocked"} with input as install("evil", "") with data.pydocker.config as c
}

constrained := conf({"allowed": {"numpy": {"requirement": "numpy>=1.26,<2", "specifier": ">=1.26,<2"}}})

test_version_constraint if {
	count(packages.deny) == 0 with input as install("numpy", "==1.26.4") with data.pydocker.config as constrained
	d := packages.deny with input as install("numpy", "==2.1.0") with data.pydocker.config as constrained
	d == {{"rule": "packages.version", "msg": "numpy==2.1.0 does not meet numpy>=1.26,<2 (package.allowed)", "line": 0, "col": 0}}
}

test_version_constraint_needs_exact_version if {
	every spec in ["", ">=1.26", "==1.26.*"] {
		rules_of(packages.deny) == {"packages.version"} with input as install("numpy", spec) with data.pydocker.config as constrained
	}
}

test_require_pinned if {
	c := conf({"require_pinned": true})
	count(packages.deny) == 0 with input as install("requests", "==2.31.0") with data.pydocker.config as c
	count(packages.deny) == 0 with input as install("requests", "===2.31.0") with data.pydocker.config as c
	every spec in ["", ">=2", "==2.*", "==2.31.0,!=2.31.1"] {
		rules_of(packages.deny) == {"packages.unpinned"} with input as install("requests", spec) with data.pydocker.config as c
	}
}

test_index_allowlist if {
	ok := json.patch(install("requests", ""), [{"op": "replace", "path": "/package/index", "value": "https://pypi.example/simple/"}])
	count(packages.deny) == 0 with input as ok with data.pydocker.config as conf({})
	bad := json.patch(install("requests", ""), [{"op": "replace", "path": "/package/index", "value": "https://evil.example/simple"}])
	d := packages.deny with input as bad with data.pydocker.config as conf({})
	d == {{"rule": "packages.index", "msg": "index https://evil.example/simple is not in package.allowed_indexes", "line": 0, "col": 0}}
}

test_max_per_session if {
	c := conf({"max_per_session": 2})
	inp := json.patch(install("requests", ""), [{"op": "replace", "path": "/session/packages", "value": 2}])
	rules_of(packages.deny) == {"packages.max_per_session"} with input as inp with data.pydocker.config as c
	count(packages.deny) == 0 with input as install("requests", "") with data.pydocker.config as c
}

# resolved is an install-package request for pdma with the dependencies the
# installer resolved: pdma -> pdmb -> pdmc.
resolved(deps) := json.patch(install("pdma", "==1.0"), [{"op": "add", "path": "/package/resolved", "value": deps}])

chain := [
	{"name": "pdma", "version": "1.0", "required_by": []},
	{"name": "pdmb", "version": "1.0", "required_by": ["pdma"]},
	{"name": "Pdm_C", "version": "2.0", "required_by": ["pdmb"]},
]

test_resolved_dependencies_allowed if {
	count(packages.deny) == 0 with input as resolved(chain) with data.pydocker.config as conf({})
	c := conf({"allowed": {
		"pdma": {"requirement": "pdma", "specifier": ""},
		"pdmb": {"requirement": "pdmb", "specifier": ""},
		"pdm-c": {"requirement": "pdm-c>=2", "specifier": ">=2"},
	}})
	count(packages.deny) == 0 with input as resolved(chain) with data.pydocker.config as c
}

test_blocked_dependency_names_it_and_its_requirer if {
	d := packages.deny with input as resolved(chain) with data.pydocker.config as conf({"blocked": {"pdm-c": true}})
	d == {{"rule": "packages.blocked", "msg": "dependency Pdm_C 2.0 (required by pdmb) is blocked (package.blocked lists \"pdm-c\"): pdma==1.0 was not installed", "line": 0, "col": 0}}
}

test_dependency_not_allowed if {
	c := conf({"allowed": {"pdma": {"requirement": "pdma", "specifier": ""}, "pdmb": {"requirement": "pdmb", "specifier": ""}}})
	d := packages.deny with input as resolved(chain) with data.pydocker.config as c
	d == {{"rule": "packages.not_allowed", "msg": "dependency Pdm_C 2.0 (required by pdmb) is not in package.allowed: pdma==1.0 was not installed", "line": 0, "col": 0}}
}

test_dependency_version_outside_allowed_constraint if {
	c := conf({"allowed": {
		"pdma": {"requirement": "pdma", "specifier": ""},
		"pdmb": {"requirement": "pdmb", "specifier": ""},
		"pdm-c": {"requirement": "pdm-c<2", "specifier": "<2"},
	}})
	d := packages.deny with input as resolved(chain) with data.pydocker.config as c
	d == {{"rule": "packages.version", "msg": "dependency Pdm_C 2.0 (required by pdmb) does not meet pdm-c<2 (package.allowed): pdma==1.0 was not installed", "line": 0, "col": 0}}
}

test_dependency_needed_by_several if {
	deps := [
		{"name": "pdmb", "version": "1.0", "required_by": ["pdma"]},
		{"name": "evil", "version": "0.1", "required_by": ["pdma", "pdmb"]},
		{"name": "orphan", "version": "3"},
	]
	d := packages.deny with input as resolved(deps) with data.pydocker.config as conf({"blocked": {"evil": true, "orphan": true}})
	{v.msg | some v in d} == {
		"dependency evil 0.1 (required by pdma, pdmb) is blocked (package.blocked lists \"evil\"): pdma==1.0 was not installed",
		"dependency orphan 3 (required by pdma) is blocked (package.blocked lists \"orphan\"): pdma==1.0 was not installed",
	}
}

# The requested package is judged by its request, once: its resolved entry
# adds no second violation.
test_requested_package_judged_once if {
	d := packages.deny with input as resolved(chain) with data.pydocker.config as conf({"blocked": {"pdma": true}})
	rules_of(d) == {"packages.blocked"}
	count(d) == 1
}
