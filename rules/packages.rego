# METADATA
# title: Package installs
# description: |
#   install-package requests are judged by name (PEP 503 normalised),
#   version and index. data.pydocker.config.package holds:
#   allowed (normalised name -> {"requirement", "specifier"}; an allowlist
#   when non-empty, the specifier constrains the version), blocked
#   (normalised name -> true), require_pinned, allowed_indexes
#   (URL without trailing slash -> true; the configured index_url is always
#   in it) and max_per_session (0 = no cap).
#   After the installer resolved the request's dependencies, the request is
#   judged again with package.resolved, every package the install would
#   add ({name, version, required_by}); each dependency then passes the same
#   allowed, blocked and version rules, and a denial names the dependency
#   and the packages that need it.
package pydocker.rules.packages

import data.pydocker.lib

pkg := input.package

# A missing name is "": invalid, so the request is denied.
pkg_name := object.get(pkg, "name", "")

name := lib.normalize_package(pkg_name)

spec := object.get(pkg, "specifier", "")

cfg := data.pydocker.config.package

# The requirement as requested, for messages.
requested := sprintf("%s%s", [pkg_name, spec])

deny contains v if {
	input.package
	not lib.valid_package(pkg_name)
	v := lib.violation("packages.name", sprintf("%q is not a valid package name (PEP 508: letters, digits, ., - and _)", [pkg_name]), {})
}

deny contains v if {
	input.package
	not lib.valid_specifier(spec)
	v := lib.violation("packages.specifier", sprintf("%q is not a valid version specifier (PEP 440, e.g. ==1.26.4 or >=1.26,<2)", [spec]), {})
}

deny contains v if {
	input.package
	cfg.blocked[name]
	v := lib.violation("packages.blocked", sprintf("package %s is blocked (package.blocked lists %q)", [pkg_name, name]), {})
}

deny contains v if {
	input.package
	count(cfg.allowed) > 0
	not cfg.blocked[name]
	not cfg.allowed[name]
	v := lib.violation("packages.not_allowed", sprintf("package %s is not in package.allowed", [pkg_name]), {})
}

# An allowed entry with a version constraint needs an exact version that
# meets it: an open range would let the installer pick one that does not.
deny contains v if {
	input.package
	entry := cfg.allowed[name]
	entry.specifier != ""
	lib.valid_specifier(spec)
	not lib.pinned_version(spec)
	v := lib.violation("packages.version", sprintf("package %s is allowed only as %s (package.allowed): request an exact version that meets it, e.g. %s==VERSION", [pkg_name, entry.requirement, pkg_name]), {})
}

deny contains v if {
	input.package
	entry := cfg.allowed[name]
	version := lib.pinned_version(spec)
	not lib.satisfies_all(version, entry.specifier)
	v := lib.violation("packages.version", sprintf("%s does not meet %s (package.allowed)", [requested, entry.requirement]), {})
}

deny contains v if {
	input.package
	cfg.require_pinned
	lib.valid_specifier(spec)
	not lib.pinned_version(spec)
	v := lib.violation("packages.unpinned", sprintf("%s is not pinned and package.require_pinned is set: request an exact version, e.g. %s==VERSION", [requested, pkg_name]), {})
}

deny contains v if {
	input.package
	index := object.get(pkg, "index", "")
	index != ""
	not cfg.allowed_indexes[trim_right(index, "/")]
	v := lib.violation("packages.index", sprintf("index %s is not in package.allowed_indexes", [index]), {})
}

deny contains v if {
	input.package
	max := cfg.max_per_session
	max > 0
	input.session.packages >= max
	v := lib.violation("packages.max_per_session", sprintf("session %s already has %d installs, the maximum (package.max_per_session is %d)", [input.session.id, input.session.packages, max]), {})
}

# The dependencies the installer resolved: every package the install would
# add but the requested one (judged above by its request).
dependencies contains dep if {
	some dep in object.get(pkg, "resolved", [])
	lib.normalize_package(dep.name) != name
}

# needed_by names the packages that require dep, for messages.
needed_by(dep) := concat(", ", dep.required_by) if count(object.get(dep, "required_by", [])) > 0

needed_by(dep) := pkg_name if count(object.get(dep, "required_by", [])) == 0

# dependency names dep for messages: "dependency pdmc 2.0 (required by pdmb)".
dependency(dep) := sprintf("dependency %s %s (required by %s)", [dep.name, dep.version, needed_by(dep)])

deny contains v if {
	some dep in dependencies
	dep_name := lib.normalize_package(dep.name)
	cfg.blocked[dep_name]
	v := lib.violation("packages.blocked", sprintf("%s is blocked (package.blocked lists %q): %s was not installed", [dependency(dep), dep_name, requested]), {})
}

deny contains v if {
	count(cfg.allowed) > 0
	some dep in dependencies
	dep_name := lib.normalize_package(dep.name)
	not cfg.blocked[dep_name]
	not cfg.allowed[dep_name]
	v := lib.violation("packages.not_allowed", sprintf("%s is not in package.allowed: %s was not installed", [dependency(dep), requested]), {})
}

deny contains v if {
	some dep in dependencies
	entry := cfg.allowed[lib.normalize_package(dep.name)]
	not lib.satisfies_all(dep.version, entry.specifier)
	v := lib.violation("packages.version", sprintf("%s does not meet %s (package.allowed): %s was not installed", [dependency(dep), entry.requirement, requested]), {})
}
