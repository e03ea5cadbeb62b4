package kubernetes

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

func testSpec() backend.Spec {
	return backend.Spec{
		Image:      "python-docker-mcp-sandbox:latest",
		Command:    []string{"python3", "-I", "-c", "print(1)"},
		Args:       []string{"extra"},
		User:       "1000:1001",
		WorkingDir: "/workspace",
		Env:        []string{"LANG=C.UTF-8", "EMPTY=", "A=b=c"},
		Labels: map[string]string{
			"python-docker-mcp.kind":     "persistent",
			"python-docker-mcp.session":  "0123456789abcdef",
			"python-docker-mcp.instance": "i1",
		},
		Annotations: map[string]string{
			"python-docker-mcp.owner":   "alice@example.com",
			"python-docker-mcp.created": "2026-11-23T20:00:00Z",
		},
		MemoryBytes:     256 << 20,
		CPUs:            0.5,
		Pids:            128,
		TmpBytes:        64 << 20,
		WorkspaceBytes:  128 << 20,
		ReadOnlyRoot:    true,
		NetworkDisabled: true,
	}
}

func TestPodHardening(t *testing.T) {
	uid, gid := int64(1000), int64(1001)
	grace := int64(1)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	res := corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("256Mi"),
		corev1.ResourceCPU:    resource.MustParse("500m"),
	}
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "pdm-sandbox-x",
			Namespace: "sandboxes",
			Labels: map[string]string{
				"python-docker-mcp.kind":       "persistent",
				"python-docker-mcp.session":    "0123456789abcdef",
				"python-docker-mcp.instance":   "i1",
				"python-docker-mcp.network":    "none",
				"app.kubernetes.io/part-of":    "python-docker-mcp",
				"app.kubernetes.io/component":  "sandbox",
				"app.kubernetes.io/managed-by": "python-docker-mcp",
			},
			Annotations: map[string]string{
				"python-docker-mcp.owner":      "alice@example.com",
				"python-docker-mcp.created":    "2026-11-23T20:00:00Z",
				"python-docker-mcp.pids-limit": "128",
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			ShareProcessNamespace:         ptr(false),
			Hostname:                      "sandbox",
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr(true), RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &gid, SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            "sandbox",
				Image:           "python-docker-mcp-sandbox:latest",
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sh", "-c", startGate},
				Args:            []string{"python3", "-I", "-c", "print(1)", "extra"},
				WorkingDir:      "/workspace",
				Env: []corev1.EnvVar{
					{Name: "LANG", Value: "C.UTF-8"}, {Name: "EMPTY", Value: ""}, {Name: "A", Value: "b=c"},
				},
				Stdin:     true,
				StdinOnce: true,
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr(true),
					RunAsUser:                &uid,
					RunAsGroup:               &gid,
					ReadOnlyRootFilesystem:   ptr(true),
					AllowPrivilegeEscalation: ptr(false),
					Privileged:               ptr(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "workspace", MountPath: "/workspace"},
				},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("64Mi"))}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("128Mi"))}}},
			},
		},
	}
	got, err := Pod(testSpec(), Config{Namespace: "sandboxes"}, "pdm-sandbox-x")
	if err != nil {
		t.Fatal(err)
	}
	// Quantities compare by value, not by their cached string form.
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Pod() mismatch (-want +got):\n%s", diff)
	}
}

func TestPodOptions(t *testing.T) {
	tests := []struct {
		name  string
		spec  func(*backend.Spec)
		cfg   Config
		check func(*corev1.Pod) string // "" = fine, else what is wrong
	}{
		{"runtime class from config", nil, Config{RuntimeClass: "gvisor"}, func(p *corev1.Pod) string {
			if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != "gvisor" {
				return "runtimeClassName not gvisor"
			}
			return ""
		}},
		{"runtime class from spec wins", func(s *backend.Spec) { s.Runtime = "kata" }, Config{RuntimeClass: "gvisor"}, func(p *corev1.Pod) string {
			if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != "kata" {
				return "runtimeClassName not kata"
			}
			return ""
		}},
		{"no runtime class by default", nil, Config{}, func(p *corev1.Pod) string {
			if p.Spec.RuntimeClassName != nil {
				return "runtimeClassName set"
			}
			return ""
		}},
		{"node selector, node name and pull policy", nil,
			Config{NodeSelector: map[string]string{"sandbox": "true"}, NodeName: "n1", ImagePullPolicy: corev1.PullNever},
			func(p *corev1.Pod) string {
				if p.Spec.NodeSelector["sandbox"] != "true" || p.Spec.NodeName != "n1" || p.Spec.Containers[0].ImagePullPolicy != corev1.PullNever {
					return "node selector, node name or pull policy not applied"
				}
				return ""
			}},
		{"network enabled: no deny label", func(s *backend.Spec) { s.NetworkDisabled = false }, Config{}, func(p *corev1.Pod) string {
			if _, ok := p.Labels[LabelNetwork]; ok {
				return "network label set on a pod with network"
			}
			return ""
		}},
		{"writable root", func(s *backend.Spec) { s.ReadOnlyRoot = false }, Config{}, func(p *corev1.Pod) string {
			if *p.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem {
				return "root read-only"
			}
			return ""
		}},
		{"fractional CPU rounds up to a millicore", func(s *backend.Spec) { s.CPUs = 0.0001 }, Config{}, func(p *corev1.Pod) string {
			if q := p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.MilliValue() != 1 {
				return "cpu limit " + q.String()
			}
			return ""
		}},
		{"cpu request below the limit: burstable", nil, Config{CPURequest: 0.25}, func(p *corev1.Pod) string {
			r := p.Spec.Containers[0].Resources
			req, lim := r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU]
			if req.MilliValue() != 250 || lim.MilliValue() != 500 {
				return "cpu request " + req.String() + ", limit " + lim.String() + "; want 250m, 500m"
			}
			if mr, ml := r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceMemory]; mr.Cmp(ml) != 0 {
				return "memory request " + mr.String() + " differs from its limit " + ml.String()
			}
			return ""
		}},
		{"cpu request at or above the limit: the limit", nil, Config{CPURequest: 2}, func(p *corev1.Pod) string {
			r := p.Spec.Containers[0].Resources
			if req := r.Requests[corev1.ResourceCPU]; req.MilliValue() != 500 {
				return "cpu request " + req.String() + ", want the limit 500m"
			}
			return ""
		}},
		{"cpu request without a cpu limit: none", func(s *backend.Spec) { s.CPUs = 0 }, Config{CPURequest: 0.25}, func(p *corev1.Pod) string {
			if q, ok := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; ok {
				return "cpu request " + q.String() + " without a limit"
			}
			return ""
		}},
		{"no limits: no resources, no size limits, no pids annotation", func(s *backend.Spec) {
			s.MemoryBytes, s.CPUs, s.Pids, s.TmpBytes, s.WorkspaceBytes = 0, 0, 0, 0, 0
		}, Config{}, func(p *corev1.Pod) string {
			c := p.Spec.Containers[0]
			if len(c.Resources.Limits) != 0 || p.Spec.Volumes[0].EmptyDir.SizeLimit != nil || p.Annotations[AnnotationPids] != "" {
				return "limits set"
			}
			return ""
		}},
		{"spec labels cannot drop the backend's", func(s *backend.Spec) { s.Labels[LabelComponent] = "server" }, Config{}, func(p *corev1.Pod) string {
			if p.Labels[LabelComponent] != "sandbox" {
				return "component label overridden"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSpec()
			if tt.spec != nil {
				tt.spec(&s)
			}
			p, err := Pod(s, tt.cfg, "x")
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(p); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestPodRefusesRoot(t *testing.T) {
	s := testSpec()
	s.User = "0:0"
	if _, err := Pod(s, Config{}, "x"); !errors.Is(err, backend.ErrInvalidSpec) {
		t.Fatalf("Pod(root) error = %v, want ErrInvalidSpec", err)
	}
}

// TestPodRefusesVolumes: package volumes are Docker-only; a Spec asking
// for one is refused, saying so, rather than run without its packages.
func TestPodRefusesVolumes(t *testing.T) {
	s := testSpec()
	s.Volumes = []backend.Volume{{Name: "pkgs", Path: "/opt/packages", ReadOnly: true}}
	_, err := Pod(s, Config{}, "x")
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "Docker-only") {
		t.Fatalf("Pod(volumes) error = %v, want ErrInvalidSpec saying volumes are Docker-only", err)
	}
}

func TestNetworkPolicy(t *testing.T) {
	np := NetworkPolicy("sandboxes")
	if np.Namespace != "sandboxes" {
		t.Errorf("namespace %q, want sandboxes", np.Namespace)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 {
		t.Errorf("rules %v %v, want none (deny all)", np.Spec.Ingress, np.Spec.Egress)
	}
	if diff := cmp.Diff([]networkingv1.PolicyType{"Ingress", "Egress"}, np.Spec.PolicyTypes); diff != "" {
		t.Errorf("policy types (-want +got):\n%s", diff)
	}
	// It selects exactly the pods Pod builds with the network disabled.
	p, _ := Pod(testSpec(), Config{}, "x")
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if p.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the sandbox pod (%q)", k, v, p.Labels[k])
		}
	}
	s := testSpec()
	s.NetworkDisabled = false
	p, _ = Pod(s, Config{}, "x")
	if p.Labels[LabelNetwork] == np.Spec.PodSelector.MatchLabels[LabelNetwork] {
		t.Error("selector matches a sandbox with network enabled")
	}
}

func TestPodState(t *testing.T) {
	status := func(s corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: s}}}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want backend.State
	}{
		{"pending, no status", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, backend.State{Reason: "Pending"}},
		{"running", status(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), backend.State{Running: true, Reason: "Running"}},
		{"oom", status(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}),
			backend.State{Exited: true, ExitCode: 137, OOMKilled: true, Reason: "OOMKilled"}},
		{"error exit", status(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}),
			backend.State{Exited: true, ExitCode: 1, Reason: "Error"}},
		{"waiting", status(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}),
			backend.State{Reason: "ContainerCreating"}},
		{"evicted", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, backend.State{Reason: "Evicted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, podState(tt.pod)); diff != "" {
				t.Errorf("podState() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartState(t *testing.T) {
	b := &Backend{cfg: Config{Namespace: "ns"}}
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerName, Image: "img:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "msg"}}}}}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		wantDone bool
		wantErr  error
	}{
		{"creating", waiting("ContainerCreating"), false, nil},
		{"image missing", waiting("ErrImageNeverPull"), true, backend.ErrImageMissing},
		{"image pull backoff", waiting("ImagePullBackOff"), true, backend.ErrImageMissing},
		{"config error", waiting("CreateContainerConfigError"), true, backend.ErrStart},
		{"running", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}, true, nil},
		{"exited", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 125}}}}}}, true, backend.ErrStart},
		{"pod failed", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, true, backend.ErrStart},
		{"no room on the node", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu"}}, true, errNoRoom},
		{"deleting", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}, true, backend.ErrStart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, err := b.startState(tt.pod)
			if done != tt.wantDone || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("startState() = %v, %v; want %v, %v", done, err, tt.wantDone, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "ns/") {
				t.Errorf("error %q does not name the pod", err)
			}
		})
	}
}

// TestPodRefusesJoinNetwork: joining a holder's namespace is a Docker
// mechanism; every Pod has its own.
func TestPodRefusesJoinNetwork(t *testing.T) {
	s := testSpec()
	s.NetworkDisabled, s.JoinNetwork = true, "holder"
	_, err := Pod(s, Config{}, "x")
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "Docker-only") {
		t.Fatalf("Pod(JoinNetwork) error = %v, want ErrInvalidSpec saying it is Docker-only", err)
	}
}
