# METADATA
# title: Example operator rule — untrusted principals run under gVisor
# description: |
#   The decision's runtime (rules/decision.rego) is the configured default
#   unless a rule chooses another. Here every authenticated principal
#   without scope "python:trusted" gets gVisor: runsc on Docker
#   (docker.runtimes: [runsc]) or the RuntimeClass gvisor on Kubernetes
#   (kubernetes.runtime_classes: [gvisor]). With neither configured, the
#   rule still asks for runsc and such calls are denied (runtime.invalid):
#   they never run under a weaker runtime than the rule asked for.
#   Principals without a subject (stdio without auth) keep the default:
#   the operator runs those. Put this directory in policy.paths.
package pydocker.rules.gvisor

gvisor := "gvisor" if {
	data.pydocker.config.runtimes.allowed.gvisor
	not data.pydocker.config.runtimes.allowed.runsc
} else := "runsc"

runtime := gvisor if {
	object.get(input, ["principal", "sub"], "") != ""
	not "python:trusted" in object.get(input, ["principal", "scopes"], [])
}
