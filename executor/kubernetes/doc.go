// Package kubernetes is the Kubernetes sandbox backend: one Pod per sandbox,
// created with the hardening of Pod (a pure function from a backend.Spec),
// the runner's stdin/stdout/stderr carried over the Pod's attach stream
// (remotecommand: WebSocket, falling back to SPDY on API servers without
// it), state read from the container status, removal by deletion with a
// one-second grace. It implements backend.Backend.
//
// # Configuration
//
// The server's config will select it with these keys (not wired yet; the
// names are fixed here so the wiring and the docs agree):
//
//	backend: kubernetes            # docker (default) | kubernetes
//	kubernetes:
//	  kubeconfig: ""               # path; empty = in-cluster (the Pod's service account)
//	  namespace: python-docker-mcp-sandboxes  # where sandbox Pods are created; the server needs
//	                               # pods create/get/list/watch/delete and pods/attach there
//	  runtime_class: ""            # e.g. gvisor: runtimeClassName of every sandbox Pod
//	  node_selector: {}            # e.g. {sandbox: "true"}: nodeSelector of every sandbox Pod
//	  image_pull_policy: IfNotPresent  # Always | IfNotPresent | Never
//
// They map to Config's fields (Kubeconfig, Namespace, RuntimeClass,
// NodeSelector, ImagePullPolicy); NodeName, StartTimeout and Attach are for
// tests and special clusters.
//
// # Contract details
//
// A Pod's program starts before anyone can attach to it, so every sandbox
// container starts in a tiny /bin/sh gate that waits for one line on stdin;
// Create sends it once attached, and the gate execs the Spec's command. No
// output is lost, and the Spec's program is the container's main process.
//
// Kubernetes has no per-Pod pids limit: set the kubelet's podPidsLimit on
// sandbox nodes (the Spec's value is recorded in AnnotationPids). A Pod's
// network cannot be switched off from its spec: NetworkPolicy (the object
// this package builds, also in examples/kubernetes) denies all traffic of
// sandbox Pods whose Spec disabled the network, on clusters whose network
// plugin enforces NetworkPolicy.
package kubernetes
