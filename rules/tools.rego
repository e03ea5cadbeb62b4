# METADATA
# title: Tools
# description: |
#   Only the server's tools are decided, and each with the part of the
#   input it needs: code for the execute tools, a package for
#   install-package.
package pydocker.rules.tools

import data.pydocker.lib

known := {
	"execute-transient", "execute-persistent", "install-package", "cleanup-session",
	"list-sessions", "read-file", "write-file", "list-files",
}

code_tools := {"execute-transient", "execute-persistent"}

# tool is "" when input.tool is missing: a rule must not go undefined on
# a missing field and so fail to deny.
tool := object.get(input, "tool", "")

deny contains v if {
	not known[tool]
	v := lib.violation("tools.unknown", sprintf("tool %q is not known to the policy", [tool]), {})
}

deny contains v if {
	not input.code
	code_tools[input.tool]
	v := lib.violation("tools.code_missing", sprintf("%s needs the code's facts in input.code", [input.tool]), {})
}

deny contains v if {
	input.tool == "install-package"
	not input.package
	v := lib.violation("tools.package_missing", "install-package needs input.package", {})
}
