package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// unreachable writes a kubeconfig naming an API server nobody listens on.
func unreachable(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUnreachableAPI(t *testing.T) {
	b, err := New(Config{Kubeconfig: unreachable(t), StartTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Namespace() != DefaultNamespace {
		t.Errorf("Namespace() = %q, want %q", b.Namespace(), DefaultNamespace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Ping() = %v, want ErrUnavailable naming the API address", err)
	}
	spec := testSpec()
	if _, err := b.Create(ctx, spec); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Create() = %v, want ErrUnavailable", err)
	}
	if _, err := b.State(ctx, "x"); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("State() = %v, want ErrUnavailable", err)
	}
	if _, err := b.List(ctx, nil); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("List() = %v, want ErrUnavailable", err)
	}
	if err := b.Remove(ctx, "x"); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Remove() = %v, want ErrUnavailable", err)
	}
	// An invalid spec never reaches the API.
	spec.User = "0:0"
	if _, err := b.Create(ctx, spec); !errors.Is(err, backend.ErrInvalidSpec) {
		t.Errorf("Create(root) = %v, want ErrInvalidSpec", err)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing kubeconfig file", Config{Kubeconfig: filepath.Join(t.TempDir(), "nope")}, "kubernetes.kubeconfig"},
		{"bad pull policy", Config{Kubeconfig: unreachable(t), ImagePullPolicy: corev1.PullPolicy("Sometimes")}, "image_pull_policy"},
		{"bad attach protocol", Config{Kubeconfig: unreachable(t), Attach: "telnet"}, "attach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
	// Outside a Pod, an empty kubeconfig (in-cluster) says what to set.
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		if _, err := New(Config{}); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
			t.Fatalf("New(in-cluster outside a Pod) = %v, want ErrUnavailable naming kubernetes.kubeconfig", err)
		}
	}
}

func TestFromConfig(t *testing.T) {
	c := config.Default().Kubernetes
	c.NodeSelector = []string{"kubernetes.io/os=linux", " pool = sandbox "}
	c.RuntimeClass, c.NodeName = "gvisor", "node-1"
	got := FromConfig(c)
	want := Config{
		Namespace: "python-docker-mcp-sandboxes", RuntimeClass: "gvisor", NodeName: "node-1",
		NodeSelector:    map[string]string{"kubernetes.io/os": "linux", "pool": "sandbox"},
		ImagePullPolicy: corev1.PullIfNotPresent, StartTimeout: 2 * time.Minute,
		CPURequest: 0.1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromConfig (-want +got):\n%s", diff)
	}
}
