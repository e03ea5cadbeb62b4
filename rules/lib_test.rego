package pydocker.test.lib

import data.pydocker.lib

test_dotted_prefix_semantics if {
	lib.dotted("os") == "os."
	lib.dotted_all(["os", "os.path"]) == ["os.", "os.path."]
	lib.matching("os.path.", ["os.", "os.path.", "osx."]) == ["os", "os.path"]
	lib.matching("os.", ["os.path."]) == []
	lib.matching("osx.", ["os."]) == []
}

test_normalize_package if {
	lib.normalize_package("Scikit_Learn") == "scikit-learn"
	lib.normalize_package("zope.interface") == "zope-interface"
	lib.normalize_package("A-_.B") == "a-b"
}

test_valid_package if {
	lib.valid_package("numpy")
	lib.valid_package("zope.interface")
	not lib.valid_package("-numpy")
	not lib.valid_package("numpy==1")
	not lib.valid_package("")
}

test_version_order if {
	order := [
		"1.0.dev1", "1.0a1.dev1", "1.0a1", "1.0b2", "1.0rc1", "1.0",
		"1.0.post1.dev1", "1.0.post1", "1.0.1", "1.1", "1.10", "2!0.1",
	]
	every i in numbers.range(0, count(order) - 2) {
		lib.version_key(order[i]) < lib.version_key(order[i + 1])
	}
}

test_version_equal_forms if {
	lib.version_key("1.0") == lib.version_key("1.0.0")
	lib.version_key("1.0") == lib.version_key("v1.0")
	lib.version_key("1.0-1") == lib.version_key("1.0.post1")
	lib.version_key("1.0RC1") == lib.version_key("1.0c1")
	lib.version_key("1.0+local.1") == lib.version_key("1.0")
	lib.version_key("0") == lib.version_key("0.0")
}

test_invalid_version if {
	not lib.valid_version("one")
	not lib.valid_version("1..2")
	lib.valid_version("2.0.0rc1")
}

test_specifier_validity if {
	lib.valid_specifier("")
	lib.valid_specifier("==1.26.4")
	lib.valid_specifier(">=1.26, <2")
	lib.valid_specifier("==1.2.*")
	lib.valid_specifier("!=1.2.*")
	lib.valid_specifier("===weird")
	lib.valid_specifier("~=1.4.2")
	not lib.valid_specifier(">=1.2.*")
	not lib.valid_specifier(">>1")
	not lib.valid_specifier("==one")
	not lib.valid_specifier("1.0")
}

test_pinned_version if {
	lib.pinned_version("==1.26.4") == "1.26.4"
	lib.pinned_version("===1.0") == "1.0"
	not lib.pinned_version("==1.26.*")
	not lib.pinned_version(">=1.26")
	not lib.pinned_version("==1,==1")
	not lib.pinned_version("")
}

cases := [
	["1.26.4", ">=1.26,<2", true],
	["2.0", ">=1.26,<2", false],
	["1.25", ">=1.26,<2", false],
	["1.26", "==1.26.0", true],
	["1.26.1", "==1.26.0", false],
	["1.26.1", "==1.26.*", true],
	["1.27", "==1.26.*", false],
	["1.26.1", "!=1.26.*", false],
	["1.27", "!=1.26.*", true],
	["1.26.1", "!=1.26.0", true],
	["1.26.0", "!=1.26", false],
	["1.0", "<=1.0", true],
	["1.0.1", "<=1.0", false],
	["1.0.1", ">1.0", true],
	["1.0", ">1.0", false],
	["1.4.5", "~=1.4.2", true],
	["1.5.0", "~=1.4.2", false],
	["1.4.1", "~=1.4.2", false],
	["2.2", "~=2.1", true],
	["3.0", "~=2.1", false],
	["1.0", "~=1", false],
	["abc", "===abc", true],
	["1.0", "===1.0.0", false],
	["1!1.0", "==1.*", false],
	["1.0", "", true],
	["2.0.0rc1", "<2", false],
	["2.0.dev1", "<2", false],
	["2.0.0rc1", "<2.0rc2", true],
	["1.9", "<2", true],
	["2.0.post1", ">2", false],
	["2.0.post1", ">2.0.post0", true],
	["2.0.1", ">2", true],
	["2.0-1", ">2", false],
]

test_satisfies_all if {
	every c in cases {
		satisfies_all(c[0], c[1]) == c[2]
	}
}

satisfies_all(v, spec) if lib.satisfies_all(v, spec)

satisfies_all(v, spec) := false if not lib.satisfies_all(v, spec)

test_satisfies_rejects_bad_specifier if {
	not lib.satisfies_all("1.0", ">>1")
}

test_violation_shape if {
	lib.violation("r", "m", {"line": 3, "col": 4, "other": 1}) == {"rule": "r", "msg": "m", "line": 3, "col": 4}
	lib.violation("r", "m", {}) == {"rule": "r", "msg": "m", "line": 0, "col": 0}
}

test_lines if {
	lib.lines(["os", "os.path"]) == "os.\nos.path.\n"
	lib.lines([]) == ""
}
