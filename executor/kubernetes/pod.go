package kubernetes

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Labels the backend puts on every sandbox Pod, besides the Spec's own.
// List selects on LabelComponent, so it only ever sees sandboxes; the
// NetworkPolicy selects on LabelNetwork.
const (
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelNetwork is "none" on a Pod whose Spec disabled the network.
	LabelNetwork = "python-docker-mcp.network"

	partOf    = "python-docker-mcp"
	component = "sandbox"
)

// AnnotationPids records the Spec's pids limit on the Pod. Kubernetes has
// no per-Pod pids limit: the node's kubelet enforces podPidsLimit for every
// Pod, so operators set that to at least this value.
const AnnotationPids = "python-docker-mcp.pids-limit"

// ContainerName is the name of the sandbox's only container.
const ContainerName = "sandbox"

// startGate is the shell line every sandbox container starts with. A Pod's
// program starts before anyone can attach to it, and output written before
// the attach is not delivered to it; so the container first waits for one
// line on stdin, which Create sends once attached, acknowledges it with one
// byte (gateAck) on stderr, which Create consumes, and then execs the Spec's
// command (which becomes the container's main process). The ack is the only
// proof that the stream reaches the container: the API server may accept a
// WebSocket, and take stdin, before its own connection to the kubelet
// fails. If stdin ends before the line the container exits with 125 and
// runs nothing. The image needs /bin/sh.
const startGate = `IFS= read -r _ || exit 125; printf '\006' >&2; exec "$0" "$@"`

// gateAck is the byte the start gate writes to stderr once its line came.
const gateAck = 0x06

// Pod is the whole hardening of a sandbox in Kubernetes terms: a pure
// function from the Spec, the backend's Config and the Pod's name to the
// Pod to create. The Spec must be valid (Spec.Validate).
//
// How each Spec field maps:
//
//   - User: runAsNonRoot, runAsUser, runAsGroup and fsGroup (Pod and container).
//   - ReadOnlyRoot: readOnlyRootFilesystem.
//   - always: allowPrivilegeEscalation false, privileged false, capabilities
//     drop ALL, seccompProfile RuntimeDefault, automountServiceAccountToken
//     false, enableServiceLinks false, no host network/PID/IPC, no shared
//     process namespace, restartPolicy Never, stdin without TTY.
//   - Detachable: stdinOnce false (else true: the program's stdin ends
//     with the first attach stream).
//   - MemoryBytes: the memory limit and request (equal: a node never
//     promises memory it does not have). There is no swap for Pods unless
//     the node enables it.
//   - CPUs: the CPU limit; the request is Config.CPURequest when that is
//     positive and below the limit (Burstable QoS: a node packs more
//     sandboxes, idle ones reserve little), else equal to the limit.
//   - Pids: only recorded (AnnotationPids); the node's podPidsLimit applies.
//   - TmpBytes, WorkspaceBytes: emptyDir volumes with medium Memory and that
//     sizeLimit at /tmp and WorkingDir (tmpfs; unlike Docker's, /tmp is not
//     noexec, which Pods cannot express).
//   - NetworkDisabled: LabelNetwork=none, which NetworkPolicy denies all
//     ingress and egress. It takes a network plugin that enforces
//     NetworkPolicy; a Pod spec alone cannot turn its network off.
//   - Runtime: runtimeClassName (Config.RuntimeClass when the Spec's is empty).
//   - Labels: Pod labels, plus LabelPartOf, LabelComponent, LabelManagedBy.
//   - Annotations: Pod annotations.
func Pod(spec backend.Spec, cfg Config, name string) (*corev1.Pod, error) {
	uid, gid, err := spec.UIDGID()
	if err != nil {
		return nil, err
	}
	if spec.JoinNetwork != "" {
		return nil, fmt.Errorf("%w: JoinNetwork %q: joining another sandbox's network namespace is Docker-only; every Pod has its own", backend.ErrInvalidSpec, spec.JoinNetwork)
	}
	if len(spec.Volumes) > 0 {
		return nil, fmt.Errorf("%w: Volumes %q: named package volumes are Docker-only; the Kubernetes backend runs sandboxes without installed packages (use the docker backend for install-package)", backend.ErrInvalidSpec, spec.Volumes[0].Name)
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[LabelPartOf] = partOf
	labels[LabelComponent] = component
	labels[LabelManagedBy] = partOf
	if spec.NetworkDisabled {
		labels[LabelNetwork] = "none"
	}
	annotations := map[string]string{}
	for k, v := range spec.Annotations {
		annotations[k] = v
	}
	if spec.Pids > 0 {
		annotations[AnnotationPids] = fmt.Sprint(spec.Pids)
	}

	resources := corev1.ResourceList{}
	if spec.MemoryBytes > 0 {
		resources[corev1.ResourceMemory] = *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI)
	}
	requests := resources.DeepCopy()
	if spec.CPUs > 0 {
		milli := int64(math.Ceil(spec.CPUs * 1000))
		resources[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		req := milli
		if r := int64(math.Ceil(cfg.CPURequest * 1000)); r > 0 && r < milli {
			req = r
		}
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(req, resource.DecimalSI)
	}

	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, e := range spec.Env {
		k, v, _ := strings.Cut(e, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}

	runtimeClass := spec.Runtime
	if runtimeClass == "" {
		runtimeClass = cfg.RuntimeClass
	}
	var runtimeClassName *string
	if runtimeClass != "" {
		runtimeClassName = &runtimeClass
	}
	pullPolicy := cfg.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	var nodeSelector map[string]string
	if len(cfg.NodeSelector) > 0 {
		nodeSelector = map[string]string{}
		for k, v := range cfg.NodeSelector {
			nodeSelector[k] = v
		}
	}

	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	grace := int64(1)
	args := append(append([]string{}, spec.Command...), spec.Args...)

	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   cfg.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			ShareProcessNamespace:         ptr(false),
			Hostname:                      "sandbox",
			TerminationGracePeriodSeconds: &grace,
			RuntimeClassName:              runtimeClassName,
			NodeSelector:                  nodeSelector,
			NodeName:                      cfg.NodeName,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				FSGroup:        &gid,
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           spec.Image,
				ImagePullPolicy: pullPolicy,
				Command:         []string{"/bin/sh", "-c", startGate},
				Args:            args,
				WorkingDir:      spec.WorkingDir,
				Env:             env,
				Stdin:           true,
				StdinOnce:       !spec.Detachable,
				TTY:             false,
				Resources:       corev1.ResourceRequirements{Limits: resources, Requests: requests},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr(true),
					RunAsUser:                &uid,
					RunAsGroup:               &gid,
					ReadOnlyRootFilesystem:   ptr(spec.ReadOnlyRoot),
					AllowPrivilegeEscalation: ptr(false),
					Privileged:               ptr(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "workspace", MountPath: spec.WorkingDir},
				},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				memoryVolume("tmp", spec.TmpBytes),
				memoryVolume("workspace", spec.WorkspaceBytes),
			},
		},
	}, nil
}

func memoryVolume(name string, size int64) corev1.Volume {
	ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	if size > 0 {
		ed.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}}
}

// NetworkPolicy denies all ingress and all egress of the sandbox Pods in
// namespace that have no network (LabelNetwork=none). It only takes effect
// with a network plugin that enforces NetworkPolicy. It is a pure function;
// examples/kubernetes ships the same object as YAML.
func NetworkPolicy(namespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "python-docker-mcp-sandbox-deny-all",
			Namespace: namespace,
			Labels:    map[string]string{LabelPartOf: partOf, LabelManagedBy: partOf},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				LabelPartOf:    partOf,
				LabelComponent: component,
				LabelNetwork:   "none",
			}},
			// Both types listed with no rules: nothing in, nothing out
			// (DNS included).
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

func ptr[T any](v T) *T { return &v }
