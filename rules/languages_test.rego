package pydocker.test.languages

import data.pydocker.rules.languages

test_python_by_default if {
	count(languages.deny) == 0 with input as {"tool": "execute-transient"}
	count(languages.deny) == 0 with input as {"tool": "execute-transient", "language": "python"}
}

test_bash_denied_unless_enabled if {
	d := languages.deny with input as {"language": "bash"}
		with data.pydocker.config.languages as {"bash": {"enabled": false}}
	{v.rule | some v in d} == {"languages.disabled"}
	{v.rule | some v in languages.deny} == {"languages.disabled"} with input as {"language": "bash"}
		with data.pydocker.config as {}
	count(languages.deny) == 0 with input as {"language": "bash"}
		with data.pydocker.config.languages as {"bash": {"enabled": true}}
}

test_unknown_language if {
	d := languages.deny with input as {"language": "node"}
	d == {{"rule": "languages.unknown", "msg": `language "node" is not supported: use python or bash`, "line": 0, "col": 0}}
}
