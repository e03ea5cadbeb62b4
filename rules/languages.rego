# METADATA
# title: Languages
# description: |
#   The execute tools run Python unless input.language says otherwise. Bash
#   is denied unless the operator enables it (languages.bash.enabled); any
#   other language is denied. Bash code is not analysed: the module and
#   call rules see no facts, and the sandbox's capabilities still apply
#   (bash needs the processes capability).
package pydocker.rules.languages

import data.pydocker.lib

known := {"python", "bash"}

# language is "python" when input.language is missing.
language := object.get(input, "language", "python")

deny contains v if {
	not known[language]
	v := lib.violation("languages.unknown", sprintf("language %q is not supported: use python or bash", [language]), {})
}

deny contains v if {
	language == "bash"
	not data.pydocker.config.languages.bash.enabled
	v := lib.violation("languages.disabled", "bash is not enabled on this server (the operator sets languages.bash.enabled: true to allow it)", {})
}
