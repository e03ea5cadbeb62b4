package kubernetes

// Tests against a real cluster. They run when PDM_KUBECONFIG names a
// kubeconfig (.ci/k8s/up.sh prints one; `make test-kubernetes` does it all)
// and fail, rather than skip, when that cluster cannot be reached.
//
//	PDM_KUBECONFIG         kubeconfig of the cluster
//	PDM_K8S_NAMESPACE      namespace for the test Pods (default python-docker-mcp-test;
//	                       created with its default service account when missing)
//	PDM_K8S_NODE_NAME      bind Pods to this node (clusters without a scheduler,
//	                       like .ci/k8s's: "localhost")
//	PDM_K8S_IMAGE          image with python3 and /bin/sh (default python-docker-mcp-sandbox:latest)
//	PDM_K8S_POD_PIDS       the node's podPidsLimit, if it has one (.ci/k8s: 256)
//	PDM_K8S_RUNTIME_CLASS  runtimeClassName of every sandbox Pod (Config.RuntimeClass;
//	                       .ci/k8s with RUNSC=1: gvisor); TestClusterRuntimeClass
//	                       then checks that the Pods really run under it

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
)

var (
	latency  = flag.Bool("k8s.latency", false, "measure pod create→first byte and attach round trips against PDM_KUBECONFIG's cluster")
	latencyN = flag.Int("k8s.latency.n", 20, "sandboxes created by the latency measurement")
)

// newCluster returns a Backend on PDM_KUBECONFIG's cluster, its namespace
// ready (restricted Pod Security, default service account).
func newCluster(t *testing.T, attach string) *Backend {
	t.Helper()
	kc := os.Getenv("PDM_KUBECONFIG")
	if kc == "" {
		t.Skip("PDM_KUBECONFIG not set: no cluster to test against (`make test-kubernetes` brings one up)")
	}
	ns := os.Getenv("PDM_K8S_NAMESPACE")
	if ns == "" {
		ns = "python-docker-mcp-test"
	}
	b, err := New(Config{Kubeconfig: kc, Namespace: ns, NodeName: os.Getenv("PDM_K8S_NODE_NAME"), RuntimeClass: os.Getenv("PDM_K8S_RUNTIME_CLASS"), StartTimeout: 3 * time.Minute, Attach: attach})
	if err != nil {
		t.Fatalf("PDM_KUBECONFIG=%s: %v", kc, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("PDM_KUBECONFIG=%s is set but the cluster is unreachable: %v", kc, err)
	}
	// The restricted Pod Security Standard, as in examples/kubernetes: the
	// API server refuses a sandbox Pod that falls short of it. Clusters
	// without a controller-manager do not create the default account.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := b.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/default: %v", ns, err)
	}
	return b
}

func harness(attach string) backendtest.Harness {
	return backendtest.Harness{New: func(t *testing.T) backend.Backend { return newCluster(t, attach) }, Image: image()}
}

// clusterBackend is newCluster plus a run label whose Pods are removed,
// and waited for, when the test ends.
func clusterBackend(t *testing.T, attach string) (*Backend, string) {
	t.Helper()
	b := newCluster(t, attach)
	_, run := backendtest.Start(t, backendtest.Harness{New: func(*testing.T) backend.Backend { return b }})
	return b, run
}

func pythonSpec(run, program string) backend.Spec { return backendtest.Spec(image(), run, program) }

// TestClusterSuite: the shared backend suite on the cluster, attach
// protocol chosen by the client (WebSocket, SPDY fallback).
func TestClusterSuite(t *testing.T) { backendtest.Run(t, harness("")) }

// TestClusterShared: backend.Shared on the cluster: attach again to a
// Detachable Pod, session records as Leases.
func TestClusterShared(t *testing.T) { backendtest.RunShared(t, harness("")) }

// TestClusterAttachProtocols: the stream checks over each protocol alone.
func TestClusterAttachProtocols(t *testing.T) {
	for _, p := range []string{"websocket", "spdy"} {
		t.Run(p+"/RoundTrip", func(t *testing.T) { backendtest.RoundTrip(t, harness(p)) })
		t.Run(p+"/CloseEndsProgram", func(t *testing.T) { backendtest.CloseEndsProgram(t, harness(p)) })
	}
}

// TestClusterHardening: what only Pods need: no service account token, no
// service links (with a service in the namespace to link).
func TestClusterHardening(t *testing.T) {
	b, run := clusterBackend(t, "")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pdm-link-probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := b.client.CoreV1().Services(b.cfg.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service: %v", err)
	}
	got, line := backendtest.RunProbe(t, b, pythonSpec(run, backendtest.HardeningProbe))
	if got.SAToken {
		t.Errorf("service account token mounted: probe says %s", line)
	}
	// The kubelet always sets KUBERNETES_SERVICE_*; enableServiceLinks
	// false keeps out every other service's variables.
	if len(got.ServiceEnv) != 0 {
		t.Errorf("service links: probe says %s", line)
	}
}

// underGVisor says whether the sandbox Pods of b run under gVisor: a
// RuntimeClass (PDM_K8S_RUNTIME_CLASS) whose handler is runsc.
func underGVisor(t *testing.T, b *Backend) bool {
	t.Helper()
	if b.cfg.RuntimeClass == "" {
		return false
	}
	rc, err := b.client.NodeV1().RuntimeClasses().Get(context.Background(), b.cfg.RuntimeClass, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("RuntimeClass %s: %v", b.cfg.RuntimeClass, err)
	}
	return rc.Handler == "runsc"
}

// TestClusterRuntimeClass: with PDM_K8S_RUNTIME_CLASS set, every sandbox
// Pod names that RuntimeClass, and it is no label only: a Pod's kernel is
// not the node's when the class's handler is gVisor's runsc (its Sentry
// reports its own release), and is the node's otherwise. So a node that
// ran the Pods under runc anyway fails here, not silently. Under gVisor it
// also holds what of the shared suite's Hardening and OOM checks holds
// there (the suite's own are skipped by .ci/k8s/test.sh with RUNSC=1; the
// rest differ, see the README).
func TestClusterRuntimeClass(t *testing.T) {
	class := os.Getenv("PDM_K8S_RUNTIME_CLASS")
	if class == "" {
		t.Skip("PDM_K8S_RUNTIME_CLASS not set: sandbox Pods run under the node's default runtime")
	}
	b, run := clusterBackend(t, "")
	ctx := context.Background()
	rc, err := b.client.NodeV1().RuntimeClasses().Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("RuntimeClass %s: %v", class, err)
	}
	sb, err := b.Create(ctx, pythonSpec(run, "import os; print(os.uname().release, flush=True)"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	release := strings.TrimSpace(backendtest.Next(t, backendtest.Lines(sb.Stdout), "uname"))
	pod, err := b.client.CoreV1().Pods(b.cfg.Namespace).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != class {
		t.Fatalf("Pod %s runtimeClassName %v, want %s", pod.Name, pod.Spec.RuntimeClassName, class)
	}
	node, err := b.client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %q of Pod %s: %v", pod.Spec.NodeName, pod.Name, err)
	}
	host := node.Status.NodeInfo.KernelVersion
	t.Logf("RuntimeClass %s (handler %s): the Pod's kernel release %q, the node's %q", class, rc.Handler, release, host)
	gvisor := rc.Handler == "runsc"
	if gvisor == (release == host) {
		t.Errorf("handler %s, yet the Pod's kernel release %q vs the node's %q: want them to differ exactly under runsc", rc.Handler, release, host)
	}
	if !gvisor {
		return
	}
	got, line := backendtest.RunProbe(t, b, pythonSpec(run, backendtest.HardeningProbe))
	backendtest.CheckHardening(t, got, line, true)
	if !slices.Equal(got.Net, []string{"lo"}) {
		t.Errorf("loopback only: probe says %s", line)
	}
	t.Logf("differs under gVisor: seccomp %q (the Pod's RuntimeDefault profile is not applied inside the sandbox), /tmp %v and /workspace %v (the emptyDirs through the gofer)", got.Seccomp, got.TmpFS, got.WorkspaceFS)
	spec := pythonSpec(run, "x = b'a' * (512 << 20)\nprint('survived', flush=True)")
	spec.MemoryBytes = 64 << 20
	sb2, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close()
	go io.Copy(io.Discard, sb2.Stderr)
	if out, _ := backendtest.ReadAll(t, sb2.Stdout, "stdout of the program killed for memory"); strings.Contains(string(out), "survived") {
		t.Fatalf("allocating 512 MiB under a 64 MiB limit survived: %q", out)
	}
	st := backendtest.WaitState(t, b, sb2.ID, func(s backend.State) bool { return s.Exited })
	if !st.OOMKilled {
		t.Errorf("State() = %+v, want OOMKilled", st)
	}
	t.Logf("OOM under gVisor: State() = %+v (exit code %d; 137 under runc)", st, st.ExitCode)
}

func image() string {
	if s := os.Getenv("PDM_K8S_IMAGE"); s != "" {
		return s
	}
	return "python-docker-mcp-sandbox:latest"
}

// TestClusterNoRoom: with the node's CPUs taken, the kubelet turns a new
// sandbox Pod away (OutOfcpu); Create replaces it until room frees up,
// and the sandbox then runs.
func TestClusterNoRoom(t *testing.T) {
	b, run := clusterBackend(t, "")
	node, err := b.client.CoreV1().Nodes().Get(context.Background(), os.Getenv("PDM_K8S_NODE_NAME"), metav1.GetOptions{})
	if err != nil {
		t.Skipf("no node named by PDM_K8S_NODE_NAME to fill: %v", err)
	}
	cpus := float64(node.Status.Allocatable.Cpu().MilliValue()) / 1000
	spec := pythonSpec(run, "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()")
	spec.CPUs = cpus / 2
	var fill []*backend.Sandbox
	for range 2 {
		sb, err := b.Create(context.Background(), spec)
		if err != nil {
			t.Fatalf("filling the node: %v", err)
		}
		defer sb.Close()
		fill = append(fill, sb)
	}
	type result struct {
		sb  *backend.Sandbox
		err error
	}
	third := make(chan result, 1)
	go func() {
		sb, err := b.Create(context.Background(), spec)
		third <- result{sb, err}
	}()
	select {
	case r := <-third:
		t.Fatalf("Create on a full node returned at once: %v, %v", r.sb, r.err)
	case <-time.After(5 * time.Second):
	}
	fill[0].Close()
	if err := b.Remove(context.Background(), fill[0].ID); err != nil {
		t.Fatal(err)
	}
	r := <-third
	if r.err != nil {
		t.Fatalf("Create once room freed up: %v", r.err)
	}
	defer r.sb.Close()
	if got := backendtest.Next(t, backendtest.Lines(r.sb.Stdout), "stdout"); got != "ready\n" {
		t.Fatalf("sandbox that waited for room printed %q", got)
	}
}

// TestClusterPids: Kubernetes has no per-Pod pids limit; the node's
// podPidsLimit caps a sandbox's processes and threads.
func TestClusterPids(t *testing.T) {
	limit, _ := strconv.Atoi(os.Getenv("PDM_K8S_POD_PIDS"))
	if limit <= 0 {
		t.Skip("PDM_K8S_POD_PIDS (the node's podPidsLimit) not set")
	}
	b, run := clusterBackend(t, "")
	if underGVisor(t, b) {
		// A sandbox's threads and processes are the Sentry's, not the
		// host's: the Pod's pids cgroup counts only gVisor's own few
		// (measured: 1024 threads started under podPidsLimit 256).
		t.Skip("known gap: the node's podPidsLimit does not cap a gVisor sandbox's processes (README, \"gVisor on the node\")")
	}
	sb, err := b.Create(context.Background(), pythonSpec(run, `import sys, threading
sys.stdin.readline()
ev, n = threading.Event(), 0
try:
    for _ in range(4 * `+strconv.Itoa(limit)+`):
        threading.Thread(target=ev.wait, daemon=True).start()
        n += 1
    print("unlimited", n, flush=True)
except RuntimeError:
    print("limited", n, flush=True)
ev.set()
`))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	io.WriteString(sb.Stdin, "go\n")
	var verdict string
	var n int
	line := backendtest.Next(t, backendtest.Lines(sb.Stdout), "threads")
	if _, err := fmt.Sscan(line, &verdict, &n); err != nil || verdict != "limited" || n >= limit {
		t.Fatalf("thread probe %q: want limited below the node's podPidsLimit %d", line, limit)
	}
	t.Logf("thread probe: %s", strings.TrimSpace(line))
}

func TestClusterImageMissing(t *testing.T) {
	b, run := clusterBackend(t, "")
	b.cfg.ImagePullPolicy = corev1.PullNever
	spec := pythonSpec(run, "pass")
	spec.Image = "python-docker-mcp-sandbox:no-such-tag"
	_, err := b.Create(context.Background(), spec)
	if !errors.Is(err, backend.ErrImageMissing) {
		t.Fatalf("Create(missing image) error = %v, want ErrImageMissing", err)
	}
	left, err := b.List(context.Background(), map[string]string{backendtest.LabelRun: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left {
		if !s.Removing {
			t.Fatalf("pod %s left behind by a failed Create", s.ID)
		}
	}
}

// TestClusterLatency measures, per sandbox, Create called → first stdout
// byte (the program's "ready" line), with and without attaching before the
// API reports the container running (alternating, so both see the same
// load), the attach stream's line round trip, and Remove → Pod gone. Run
// with -k8s.latency; it reports, it asserts nothing about time.
func TestClusterLatency(t *testing.T) {
	if !*latency {
		t.Skip("run with -k8s.latency")
	}
	b, run := clusterBackend(t, "")
	ctx := context.Background()
	var first, firstAPI, rtt, remove, docker []time.Duration
	_, dockerErr := exec.LookPath("docker")
	for i := range 2 * *latencyN {
		b.noEarlyAttach = i%2 == 1
		if dockerErr == nil && i%2 == 0 {
			docker = append(docker, dockerRun(t))
		}
		t0 := time.Now()
		sb, err := b.Create(ctx, pythonSpec(run, backendtest.EchoProgram))
		if err != nil {
			t.Fatal(err)
		}
		out := backendtest.Lines(sb.Stdout)
		go io.Copy(io.Discard, sb.Stderr)
		if got := backendtest.Next(t, out, "ready"); got != "ready\n" {
			t.Fatalf("first line %q", got)
		}
		if b.noEarlyAttach {
			firstAPI = append(firstAPI, time.Since(t0))
		} else {
			first = append(first, time.Since(t0))
		}
		for range 20 {
			t1 := time.Now()
			io.WriteString(sb.Stdin, "ping\n")
			if got := backendtest.Next(t, out, "echo"); got != "echo:ping\n" {
				t.Fatalf("echo %q", got)
			}
			rtt = append(rtt, time.Since(t1))
		}
		sb.Close()
		t2 := time.Now()
		if err := b.Remove(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := b.State(ctx, sb.ID); errors.Is(err, backend.ErrNotFound) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		remove = append(remove, time.Since(t2))
	}
	report := func(name string, d []time.Duration) {
		p := func(q float64) time.Duration { return quantile(d, q) }
		t.Logf("%-52s n=%-4d p50 %8.1f ms  p95 %8.1f ms", name, len(d), ms(p(0.5)), ms(p(0.95)))
	}
	report("create → first stdout byte", first)
	report("create → first stdout byte, attach after API status", firstAPI)
	report("attach line round trip", rtt)
	report("remove → pod gone (grace 1 s)", remove)
	if len(docker) > 0 {
		report("baseline: docker run -i → first stdout byte", docker)
	}
}

// dockerRun is the baseline: the same program, image and limits in a plain
// `docker run -i --rm`, from the command to the first line of stdout.
func dockerRun(t *testing.T) time.Duration {
	t.Helper()
	t0 := time.Now()
	cmd := exec.Command("docker", "run", "-i", "--rm", "--network", "none", "--read-only",
		"--user", "1000:1000", "--tmpfs", "/tmp", "--memory", "128m", "--cpus", "0.5",
		image(), "python3", "-I", "-B", "-c", backendtest.EchoProgram)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("docker run: %v", err)
	}
	line := backendtest.Next(t, backendtest.Lines(stdout), "docker run")
	d := time.Since(t0)
	stdin.Close()
	if err := cmd.Wait(); err != nil || line != "ready\n" {
		t.Fatalf("docker run: first line %q, %v", line, err)
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile is the q-quantile (nearest rank) of d, which it leaves unsorted.
func quantile(d []time.Duration, q float64) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[int(q*float64(len(d)-1)+0.5)]
}

// TestClusterLeastPrivilege runs the backend as the server's service account
// with exactly the RBAC of examples/kubernetes, so the manifests' Role is
// proven sufficient (WebSocket and SPDY attach included), and checks that the
// account gets no more.
func TestClusterLeastPrivilege(t *testing.T) {
	admin, run := clusterBackend(t, "")
	ctx := context.Background()
	const serverNS, sandboxNS, sa = "python-docker-mcp", "python-docker-mcp-sandboxes", "python-docker-mcp"
	for _, o := range manifests(t) {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = admin.client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = admin.client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			if _, err = admin.client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = admin.client.RbacV1().Roles(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			}
		case *rbacv1.RoleBinding:
			if _, err = admin.client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = admin.client.RbacV1().RoleBindings(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %T: %v", o, err)
		}
	}
	// Pods run as their namespace's default account (no controller-manager
	// here to create it).
	if _, err := admin.client.CoreV1().ServiceAccounts(sandboxNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	exp := int64(600)
	tok, err := admin.client.CoreV1().ServiceAccounts(serverNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", serverNS, sa, err)
	}
	rc := rest.AnonymousClientConfig(admin.rest)
	rc.BearerToken = tok.Status.Token
	client, err := clientset.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, attach := range []string{"websocket", "spdy"} {
		b := &Backend{cfg: admin.cfg, rest: rc, client: client}
		b.cfg.Namespace, b.cfg.Attach = sandboxNS, attach
		sb, err := b.Create(ctx, pythonSpec(run, backendtest.EchoProgram))
		if err != nil {
			t.Fatalf("%s: Create as %s: %v", attach, sa, err)
		}
		go io.Copy(io.Discard, sb.Stderr)
		out := backendtest.Lines(sb.Stdout)
		backendtest.Next(t, out, "ready")
		io.WriteString(sb.Stdin, "hi\n")
		if got := backendtest.Next(t, out, "echo"); got != "echo:hi\n" {
			t.Fatalf("%s: echo %q", attach, got)
		}
		sb.Close()
		if l, err := b.List(ctx, map[string]string{backendtest.LabelRun: run}); err != nil || len(l) == 0 {
			t.Fatalf("%s: List as %s = %v, %v", attach, sa, l, err)
		}
		if _, err := b.State(ctx, sb.ID); err != nil {
			t.Fatalf("%s: State as %s: %v", attach, sa, err)
		}
		if err := b.Remove(ctx, sb.ID); err != nil {
			t.Fatalf("%s: Remove as %s: %v", attach, sa, err)
		}
	}
	// The server's Lease, in its own namespace (where the server's Pod
	// runs): held, read, released; refused in the sandbox namespace.
	lb := &Backend{cfg: admin.cfg, rest: rc, client: client}
	lb.cfg.Namespace, lb.cfg.LeaseNamespace = sandboxNS, serverNS
	release, err := lb.Hold(ctx, "least-privilege-"+run)
	if err != nil {
		t.Fatalf("Hold as %s in %s: %v", sa, serverNS, err)
	}
	if ok, err := lb.Alive(ctx, "least-privilege-"+run); !ok || err != nil {
		t.Errorf("Alive as %s = %v, %v; want true", sa, ok, err)
	}
	if err := release(ctx); err != nil {
		t.Errorf("release as %s: %v", sa, err)
	}
	lb.cfg.LeaseNamespace = sandboxNS
	if _, err := lb.Hold(ctx, "least-privilege-"+run); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "leases") {
		t.Errorf("Hold as %s in %s = %v, want a refusal naming the RBAC needed", sa, sandboxNS, err)
	}
	// No more than that: not in another namespace, not Secrets, not exec.
	other := &Backend{cfg: admin.cfg, rest: rc, client: client}
	if _, err := other.List(ctx, nil); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "pods/attach") {
		t.Errorf("List in %s as %s = %v, want a refusal naming the RBAC needed", admin.cfg.Namespace, sa, err)
	}
	if _, err := client.CoreV1().Secrets(sandboxNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets as %s: %v, want Forbidden", sa, err)
	}
	ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: sandboxNS, Verb: "create", Resource: "pods", Subresource: "exec"}}}
	if r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{}); err != nil || r.Status.Allowed {
		t.Errorf("pods/exec allowed for %s (%v): the Role must not grant it", sa, err)
	}
	// The sandboxes this test created there are removed by now or soon;
	// wait so the namespace is clean for the next run.
	deadline := time.Now().Add(60 * time.Second)
	b := &Backend{cfg: admin.cfg, rest: admin.rest, client: admin.client}
	b.cfg.Namespace = sandboxNS
	for time.Now().Before(deadline) {
		if l, err := b.List(ctx, map[string]string{backendtest.LabelRun: run}); err == nil && len(l) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("sandboxes of run %s still in %s after 60 s", run, sandboxNS)
}
