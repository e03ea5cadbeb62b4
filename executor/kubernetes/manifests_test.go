package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const manifestDir = "../../examples/kubernetes"

// manifests decodes every object of examples/kubernetes with the API's own
// scheme (strict: unknown fields are errors).
func manifests(t *testing.T) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	dec := scheme.Codecs.UniversalDeserializer()
	var objs []runtime.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			// Strict pass: a misspelt field would otherwise be dropped silently.
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s %s: %v", f, gvk.Kind, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

func find[T runtime.Object](objs []runtime.Object, name string, nameOf func(T) string) T {
	for _, o := range objs {
		if v, ok := o.(T); ok && nameOf(v) == name {
			return v
		}
	}
	var zero T
	return zero
}

func TestManifests(t *testing.T) {
	objs := manifests(t)
	const serverNS, sandboxNS, sa = "python-docker-mcp", "python-docker-mcp-sandboxes", "python-docker-mcp"

	// Namespaces enforce the restricted Pod Security Standard.
	for _, ns := range []string{serverNS, sandboxNS} {
		n := find(objs, ns, func(n *corev1.Namespace) string { return n.Name })
		if n == nil {
			t.Fatalf("namespace %s missing", ns)
		}
		if n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("namespace %s does not enforce the restricted pod security standard", ns)
		}
	}
	if DefaultNamespace != sandboxNS {
		t.Errorf("DefaultNamespace %q, manifests put sandboxes in %q", DefaultNamespace, sandboxNS)
	}

	// RBAC: exactly pods and pods/attach in the sandbox namespace, leases in
	// the server's, bound to the server's service account; no wildcards.
	if find(objs, sa, func(s *corev1.ServiceAccount) string { return s.Name }) == nil {
		t.Fatal("service account missing")
	}
	wantRules := map[string][]rbacv1.PolicyRule{
		"python-docker-mcp-sandboxes": {
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods/attach"}, Verbs: []string{"create", "get"}},
		},
		"python-docker-mcp-leases": {
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "list", "watch", "update", "delete"}},
		},
	}
	wantNS := map[string]string{"python-docker-mcp-sandboxes": sandboxNS, "python-docker-mcp-leases": serverNS}
	for name, rules := range wantRules {
		r := find(objs, name, func(r *rbacv1.Role) string { return r.Name })
		if r == nil {
			t.Fatalf("role %s missing", name)
		}
		if r.Namespace != wantNS[name] {
			t.Errorf("role %s in namespace %q, want %q", name, r.Namespace, wantNS[name])
		}
		if diff := cmp.Diff(rules, r.Rules); diff != "" {
			t.Errorf("role %s rules (-want +got):\n%s", name, diff)
		}
		b := find(objs, name, func(b *rbacv1.RoleBinding) string { return b.Name })
		if b == nil || b.Namespace != r.Namespace || b.RoleRef.Name != name || b.RoleRef.Kind != "Role" ||
			len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != serverNS {
			t.Errorf("role binding %s does not bind role %s to %s/%s: %+v", name, name, serverNS, sa, b)
		}
	}
	for _, o := range objs {
		if _, ok := o.(*rbacv1.ClusterRole); ok {
			t.Error("a ClusterRole: the server needs no cluster-wide rights")
		}
	}

	// The server: 2 replicas, hardened, under its service account.
	d := find(objs, "python-docker-mcp", func(d *appsv1.Deployment) string { return d.Name })
	if d == nil {
		t.Fatal("deployment missing")
	}
	ps := d.Spec.Template.Spec
	c := ps.Containers[0]
	sc := c.SecurityContext
	checks := []struct {
		name string
		ok   bool
	}{
		{"2 replicas", d.Spec.Replicas != nil && *d.Spec.Replicas == 2},
		{"namespace", d.Namespace == serverNS},
		{"image python-docker-mcp-server:latest", len(ps.Containers) == 1 && c.Image == "python-docker-mcp-server:latest"},
		{"service account", ps.ServiceAccountName == sa},
		{"no host namespaces", !ps.HostNetwork && !ps.HostPID && !ps.HostIPC},
		{"pod runAsNonRoot", ps.SecurityContext != nil && ps.SecurityContext.RunAsNonRoot != nil && *ps.SecurityContext.RunAsNonRoot},
		{"non-root uid", ps.SecurityContext != nil && ps.SecurityContext.RunAsUser != nil && *ps.SecurityContext.RunAsUser != 0},
		{"seccomp RuntimeDefault", ps.SecurityContext != nil && ps.SecurityContext.SeccompProfile != nil && ps.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"read-only root", sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"no privilege escalation", sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"capabilities drop ALL, add none", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
		{"not privileged", sc != nil && (sc.Privileged == nil || !*sc.Privileged)},
		{"memory and cpu limits", !c.Resources.Limits.Memory().IsZero() && !c.Resources.Limits.Cpu().IsZero()},
		{"readiness probe /healthz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/healthz"},
		{"liveness probe /livez (a backend outage must not restart the server)", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/livez"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("deployment: %s", ch.name)
		}
	}
	cm := find(objs, "python-docker-mcp", func(c *corev1.ConfigMap) string { return c.Name })
	if cm == nil {
		t.Fatal("config map missing")
	}
	// The server's configuration loads as the server loads it, and
	// selects this backend in the sandboxes' namespace.
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(config.Options{File: file})
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml does not load:\n%v", err)
	}
	if c := loaded.Config; c.Backend != "kubernetes" || FromConfig(c.Kubernetes).Namespace != sandboxNS {
		t.Errorf("config.yaml: backend %q, kubernetes.namespace %q; want kubernetes, %s", c.Backend, c.Kubernetes.Namespace, sandboxNS)
	}
	lc := loaded.Config
	if lc.Server.PublicURL == "" || lc.Auth.Mode != "jwt" || lc.Auth.PublicKeyPath == "" {
		t.Errorf("config.yaml: public_url %q, auth.mode %q, auth.public_key_path %q; want the public URL and JWTs verified with a mounted public key",
			lc.Server.PublicURL, lc.Auth.Mode, lc.Auth.PublicKeyPath)
	}
	if r := lc.Kubernetes.CPURequest; r <= 0 || r >= lc.Docker.CPULimit {
		t.Errorf("config.yaml: kubernetes.cpu_request %g, docker.cpu_limit %g; want a request below the limit (burstable sandboxes)", r, lc.Docker.CPULimit)
	}
	// Every file the config names is in a volume the container mounts.
	for key, f := range map[string]string{"auth.public_key_path": lc.Auth.PublicKeyPath, "server.session_key_file": lc.Server.SessionKeyFile, "config": "/etc/python-docker-mcp/config.yaml"} {
		mounted := false
		for _, m := range c.VolumeMounts {
			if filepath.Dir(f) == m.MountPath {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("%s %s is in no volume the server container mounts", key, f)
		}
	}

	svc := find(objs, "python-docker-mcp", func(s *corev1.Service) string { return s.Name })
	if svc == nil {
		t.Fatal("service missing")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("service selector %s=%s does not match the deployment's pods", k, v)
		}
	}

	// The NetworkPolicy is the one the package builds.
	np := find(objs, "python-docker-mcp-sandbox-deny-all", func(n *networkingv1.NetworkPolicy) string { return n.Name })
	if np == nil {
		t.Fatal("network policy missing")
	}
	want := NetworkPolicy(sandboxNS)
	if diff := cmp.Diff(want.Spec, np.Spec); diff != "" {
		t.Errorf("examples' NetworkPolicy differs from NetworkPolicy() (-want +got):\n%s", diff)
	}
	if np.Namespace != want.Namespace {
		t.Errorf("network policy namespace %q, want %q", np.Namespace, want.Namespace)
	}

	rc := find(objs, "gvisor", func(r *nodev1.RuntimeClass) string { return r.Name })
	if rc == nil || rc.Handler != "runsc" {
		t.Errorf("runtime class gvisor with handler runsc missing: %+v", rc)
	}

	// Everything namespaced lives in one of the two namespaces.
	for _, o := range objs {
		m, ok := o.(interface{ GetNamespace() string })
		if !ok {
			continue
		}
		if ns := m.GetNamespace(); ns != "" && ns != serverNS && ns != sandboxNS {
			t.Errorf("%T in namespace %q", o, ns)
		}
	}
}
