package pydocker.test.tools

import data.pydocker.rules.tools

test_known_tools if {
	every t in tools.known {
		count(tools.deny) == 0 with input as {"tool": t, "code": {}, "package": {}}
	}
}

test_unknown_tool if {
	d := tools.deny with input as {"tool": "rm-rf"}
	d == {{"rule": "tools.unknown", "msg": `tool "rm-rf" is not known to the policy`, "line": 0, "col": 0}}
	{v.rule | some v in tools.deny} == {"tools.unknown"} with input as {}
}

test_execute_needs_code if {
	{v.rule | some v in tools.deny} == {"tools.code_missing"} with input as {"tool": "execute-persistent"}
}

test_install_needs_package if {
	{v.rule | some v in tools.deny} == {"tools.package_missing"} with input as {"tool": "install-package"}
}
