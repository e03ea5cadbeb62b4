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

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
)

var (
	latency  = flag.Bool("k8s.latency", false, "measure pod create→first byte and attach round trips against PDM_KUBECONFIG's cluster")
	latencyN = flag.Int("k8s.latency.n", 20, "sandboxes created by the latency measurement")
)

const labelTestRun = "python-docker-mcp.test-run"

// clusterBackend returns a Backend on PDM_KUBECONFIG's cluster and a label
// value that marks this test's Pods; every Pod so marked is removed, and
// waited for, when the test ends.
func clusterBackend(t *testing.T, attach string) (*Backend, string) {
	t.Helper()
	kc := os.Getenv("PDM_KUBECONFIG")
	if kc == "" {
		t.Skip("PDM_KUBECONFIG not set: no cluster to test against (`make test-kubernetes` brings one up)")
	}
	ns := os.Getenv("PDM_K8S_NAMESPACE")
	if ns == "" {
		ns = "python-docker-mcp-test"
	}
	b, err := New(Config{Kubeconfig: kc, Namespace: ns, NodeName: os.Getenv("PDM_K8S_NODE_NAME"), StartTimeout: 3 * time.Minute, Attach: attach})
	if err != nil {
		t.Fatalf("PDM_KUBECONFIG=%s: %v", kc, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("PDM_KUBECONFIG=%s is set but the cluster is unreachable: %v", kc, err)
	}
	// Namespace and default service account: clusters without a
	// controller-manager do not create the latter.
	// The restricted Pod Security Standard, as in examples/kubernetes: the
	// API server refuses a sandbox Pod that falls short of it.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := b.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/default: %v", ns, err)
	}
	var r [6]byte
	rand.Read(r[:])
	run := hex.EncodeToString(r[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		list, err := b.List(ctx, map[string]string{labelTestRun: run})
		if err != nil {
			t.Errorf("cleanup list: %v", err)
			return
		}
		for _, s := range list {
			if err := b.Remove(ctx, s.ID); err != nil {
				t.Errorf("cleanup remove %s: %v", s.ID, err)
			}
		}
		for ctx.Err() == nil {
			list, err = b.List(ctx, map[string]string{labelTestRun: run})
			if err == nil && len(list) == 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("cleanup: pods of run %s still there after 90 s: %v", run, list)
	})
	return b, run
}

func image() string {
	if s := os.Getenv("PDM_K8S_IMAGE"); s != "" {
		return s
	}
	return "python-docker-mcp-sandbox:latest"
}

// echoProgram announces itself on both streams, then echoes stdin lines.
const echoProgram = `import sys
sys.stderr.write("err-ready\n"); sys.stderr.flush()
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    sys.stdout.write("echo:" + line); sys.stdout.flush()
`

func pythonSpec(run, program string) backend.Spec {
	return backend.Spec{
		Image:      image(),
		Command:    []string{"python3", "-I", "-B", "-c", program},
		User:       "1000:1000",
		WorkingDir: "/workspace",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"},
		Labels: map[string]string{
			"python-docker-mcp.kind": "transient",
			labelTestRun:             run,
		},
		Annotations: map[string]string{
			"python-docker-mcp.owner":   "tester@example.com",
			"python-docker-mcp.created": time.Now().UTC().Format(time.RFC3339Nano),
		},
		MemoryBytes: 128 << 20, CPUs: 0.5, Pids: 64, TmpBytes: 16 << 20, WorkspaceBytes: 16 << 20,
		ReadOnlyRoot: true, NetworkDisabled: true,
	}
}

// lines reads r line by line into a channel, closed at EOF or error (the
// error, if any, is sent last as a line starting with "ERROR: ").
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			s, err := br.ReadString('\n')
			if s != "" {
				ch <- s
			}
			if err != nil {
				if err != io.EOF {
					ch <- "ERROR: " + err.Error()
				}
				return
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatalf("%s: stream ended", what)
		}
		return s
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: nothing within 60 s", what)
	}
	return ""
}

func waitState(t *testing.T, b *Backend, id string, ok func(backend.State) bool) backend.State {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var st backend.State
	var err error
	for time.Now().Before(deadline) {
		st, err = b.State(context.Background(), id)
		if err == nil && ok(st) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("state of %s never matched: last %+v, %v", id, st, err)
	return st
}

func TestClusterAttachRoundTrip(t *testing.T) {
	for _, attach := range []string{"", "websocket", "spdy"} {
		name := attach
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			b, run := clusterBackend(t, attach)
			ctx := context.Background()
			sb, err := b.Create(ctx, pythonSpec(run, echoProgram))
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			out, errs := lines(sb.Stdout), lines(sb.Stderr)
			if got := next(t, out, "stdout"); got != "ready\n" {
				t.Fatalf("first stdout line %q, want ready (output before the attach lost?)", got)
			}
			if got := next(t, errs, "stderr"); got != "err-ready\n" {
				t.Fatalf("first stderr line %q, want err-ready", got)
			}
			for i := range 20 {
				msg := fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i*100))
				if _, err := io.WriteString(sb.Stdin, msg); err != nil {
					t.Fatalf("write stdin: %v", err)
				}
				if got := next(t, out, "echo"); got != "echo:"+msg {
					t.Fatalf("echo %d: got %q, want %q", i, got, "echo:"+msg)
				}
			}
			// The API learns of the start at the kubelet's next relist.
			waitState(t, b, sb.ID, func(s backend.State) bool { return s.Running })
			// EOF on stdin ends the loop: the program exits 0, stdout ends.
			if err := sb.Stdin.Close(); err != nil {
				t.Fatalf("close stdin: %v", err)
			}
			for s := range out {
				t.Fatalf("stdout after EOF: %q", s)
			}
			st := waitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited })
			if st.ExitCode != 0 || st.OOMKilled {
				t.Fatalf("State() after EOF = %+v, want exit 0", st)
			}
		})
	}
}

func TestClusterHardening(t *testing.T) {
	b, run := clusterBackend(t, "")
	const probe = `import json, os, sys
def status(key):
    for l in open("/proc/self/status"):
        if l.startswith(key + ":"):
            return l.split()[1]
def writable(path):
    try:
        with open(os.path.join(path, "probe"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
def mem_limit():
    for p in ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"):
        try:
            return int(open(p).read())
        except (OSError, ValueError):
            pass
sys.stdin.readline()
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "cwd": os.getcwd(),
    "cap_eff": status("CapEff"), "no_new_privs": status("NoNewPrivs"), "seccomp": status("Seccomp"),
    "root_writable": writable("/"), "tmp_writable": writable("/tmp"), "workspace_writable": writable("/workspace"),
    "net": sorted(os.listdir("/sys/class/net")),
    "sa_token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"),
    "service_env": sorted(k for k in os.environ if k.endswith("_SERVICE_HOST") and not k.startswith("KUBERNETES_")),
    "mem_limit": mem_limit(),
    "tmp_fs": [l.split()[2] for l in open("/proc/mounts") if l.split()[1] == "/tmp"],
}), flush=True)
`
	// A service in the namespace, whose variables service links would add.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pdm-link-probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := b.client.CoreV1().Services(b.cfg.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service: %v", err)
	}
	sb, err := b.Create(context.Background(), pythonSpec(run, probe))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	io.WriteString(sb.Stdin, "go\n")
	out := lines(sb.Stdout)
	var got struct {
		UID               int      `json:"uid"`
		GID               int      `json:"gid"`
		EUID              int      `json:"euid"`
		Cwd               string   `json:"cwd"`
		CapEff            string   `json:"cap_eff"`
		NoNewPrivs        string   `json:"no_new_privs"`
		Seccomp           string   `json:"seccomp"`
		RootWritable      bool     `json:"root_writable"`
		TmpWritable       bool     `json:"tmp_writable"`
		WorkspaceWritable bool     `json:"workspace_writable"`
		Net               []string `json:"net"`
		SAToken           bool     `json:"sa_token"`
		ServiceEnv        []string `json:"service_env"`
		MemLimit          int64    `json:"mem_limit"`
		TmpFS             []string `json:"tmp_fs"`
	}
	line := next(t, out, "probe")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("probe output %q: %v", line, err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"runs as 1000:1000", got.UID == 1000 && got.GID == 1000 && got.EUID == 1000},
		{"working dir /workspace", got.Cwd == "/workspace"},
		{"no effective capabilities", got.CapEff == "0000000000000000"},
		{"no new privileges", got.NoNewPrivs == "1"},
		{"seccomp filter on", got.Seccomp == "2"},
		{"read-only root", !got.RootWritable},
		{"writable /tmp and workspace", got.TmpWritable && got.WorkspaceWritable},
		{"/tmp is tmpfs", slices.Equal(got.TmpFS, []string{"tmpfs"})},
		{"no service account token", !got.SAToken},
		// The kubelet always sets KUBERNETES_SERVICE_*; enableServiceLinks
		// false keeps out every other service's variables.
		{"no service links", len(got.ServiceEnv) == 0},
		{"memory limit 128 MiB", got.MemLimit == 128<<20},
		{"no network interface but lo (on this test cluster)", !slices.ContainsFunc(got.Net, func(s string) bool { return s != "lo" }) || os.Getenv("PDM_K8S_NETWORK") == "yes"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: probe says %s", c.name, line)
		}
	}
}

func TestClusterOOM(t *testing.T) {
	b, run := clusterBackend(t, "")
	spec := pythonSpec(run, `import sys
sys.stdin.readline()
x = b"a" * (512 << 20)
print("survived", flush=True)
`)
	spec.MemoryBytes = 64 << 20
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	io.WriteString(sb.Stdin, "go\n")
	out, _ := io.ReadAll(sb.Stdout)
	if strings.Contains(string(out), "survived") {
		t.Fatalf("allocating 512 MiB under a 64 MiB limit survived: %q", out)
	}
	st := waitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited })
	if !st.OOMKilled || st.ExitCode != 137 {
		t.Fatalf("State() = %+v, want OOMKilled with exit code 137", st)
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
	line := next(t, lines(sb.Stdout), "threads")
	if _, err := fmt.Sscan(line, &verdict, &n); err != nil || verdict != "limited" || n >= limit {
		t.Fatalf("thread probe %q: want limited below the node's podPidsLimit %d", line, limit)
	}
	t.Logf("thread probe: %s", strings.TrimSpace(line))
}

func TestClusterListRemove(t *testing.T) {
	b, run := clusterBackend(t, "")
	ctx := context.Background()
	var ids []string
	for _, kind := range []string{"transient", "persistent"} {
		spec := pythonSpec(run, "import sys; sys.stdin.read()")
		spec.Labels["python-docker-mcp.kind"] = kind
		sb, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		ids = append(ids, sb.ID)
	}
	all, err := b.List(ctx, map[string]string{labelTestRun: run})
	if err != nil || len(all) != 2 {
		t.Fatalf("List(run) = %v, %v; want 2 sandboxes", all, err)
	}
	pers, err := b.List(ctx, map[string]string{labelTestRun: run, "python-docker-mcp.kind": "persistent"})
	if err != nil || len(pers) != 1 || pers[0].ID != ids[1] {
		t.Fatalf("List(persistent) = %v, %v; want [%s]", pers, err, ids[1])
	}
	p := pers[0]
	if p.Annotations["python-docker-mcp.owner"] != "tester@example.com" || p.Labels[LabelComponent] != "sandbox" || p.Created.IsZero() || p.Removing {
		t.Fatalf("List() info = %+v, want owner annotation, component label, created time, not removing", p)
	}
	if _, err := b.List(ctx, map[string]string{"bad key!": "x"}); !errors.Is(err, backend.ErrInvalidSpec) {
		t.Fatalf("List(bad label) error = %v, want ErrInvalidSpec", err)
	}

	if err := b.Remove(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := b.State(ctx, ids[1])
		if errors.Is(err, backend.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("State() after Remove = %v; want ErrNotFound within 60 s", err)
		}
		left, _ := b.List(ctx, map[string]string{labelTestRun: run, "python-docker-mcp.kind": "persistent"})
		if len(left) == 1 && !left[0].Removing {
			t.Fatalf("List() after Remove = %+v, want Removing", left[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.Remove(ctx, ids[1]); err != nil {
		t.Fatalf("Remove(gone) = %v, want nil", err)
	}
	if rest, err := b.List(ctx, map[string]string{labelTestRun: run}); err != nil || len(rest) != 1 || rest[0].ID != ids[0] {
		t.Fatalf("List() after Remove = %v, %v; want only %s", rest, err, ids[0])
	}
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
	left, err := b.List(context.Background(), map[string]string{labelTestRun: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left {
		if !s.Removing {
			t.Fatalf("pod %s left behind by a failed Create", s.ID)
		}
	}
}

func TestClusterCloseEndsProgram(t *testing.T) {
	b, run := clusterBackend(t, "")
	sb, err := b.Create(context.Background(), pythonSpec(run, echoProgram))
	if err != nil {
		t.Fatal(err)
	}
	out := lines(sb.Stdout)
	go io.Copy(io.Discard, sb.Stderr)
	next(t, out, "ready")
	// Detaching (as a crashed server would) closes the program's stdin:
	// stdinOnce, so the echo loop ends and nothing runs unattended.
	if err := sb.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for range out {
	}
	if _, err := io.WriteString(sb.Stdin, "x\n"); err == nil {
		t.Error("write to Stdin after Close succeeded")
	}
	st := waitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited })
	if st.ExitCode != 0 {
		t.Fatalf("State() after Close = %+v, want exit 0 (stdin EOF)", st)
	}
}

func TestClusterExitCode(t *testing.T) {
	b, run := clusterBackend(t, "")
	ctx := context.Background()
	spec := pythonSpec(run, "import sys; sys.stdout.write('bye'); sys.exit(3)")
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	if out, err := io.ReadAll(sb.Stdout); string(out) != "bye" || err != nil {
		t.Fatalf("stdout %q, %v; want bye", out, err)
	}
	if st := waitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 3 || st.OOMKilled {
		t.Fatalf("State() = %+v, want exit 3", st)
	}
	// A program the image lacks: the gate's exec fails visibly (127).
	spec.Command = []string{"/no/such/program"}
	sb2, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close()
	go io.Copy(io.Discard, sb2.Stdout)
	msg, _ := io.ReadAll(sb2.Stderr)
	if st := waitState(t, b, sb2.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 127 {
		t.Fatalf("State() = %+v, want exit 127; stderr %q", st, msg)
	}
	if !strings.Contains(string(msg), "/no/such/program") {
		t.Errorf("stderr %q does not name the missing program", msg)
	}
}

func TestClusterCreateCancelled(t *testing.T) {
	b, run := clusterBackend(t, "")
	for _, d := range []time.Duration{time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		sb, err := b.Create(ctx, pythonSpec(run, echoProgram))
		cancel()
		if err == nil {
			sb.Close()
			b.Remove(context.Background(), sb.ID)
			continue // the machine was quicker than the deadline
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Create(deadline %s) error = %v, want DeadlineExceeded", d, err)
		}
	}
	left, err := b.List(context.Background(), map[string]string{labelTestRun: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left {
		if !s.Removing {
			t.Errorf("pod %s left behind by a cancelled Create", s.ID)
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
	var first, firstAPI, rtt, remove []time.Duration
	for i := range 2 * *latencyN {
		b.noEarlyAttach = i%2 == 1
		t0 := time.Now()
		sb, err := b.Create(ctx, pythonSpec(run, echoProgram))
		if err != nil {
			t.Fatal(err)
		}
		out := lines(sb.Stdout)
		go io.Copy(io.Discard, sb.Stderr)
		if got := next(t, out, "ready"); got != "ready\n" {
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
			if got := next(t, out, "echo"); got != "echo:ping\n" {
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
		slices.Sort(d)
		p := func(q float64) time.Duration { return d[int(q*float64(len(d)-1)+0.5)] }
		t.Logf("%-52s n=%-4d p50 %8.1f ms  p95 %8.1f ms", name, len(d), ms(p(0.5)), ms(p(0.95)))
	}
	report("create → first stdout byte", first)
	report("create → first stdout byte, attach after API status", firstAPI)
	report("attach line round trip", rtt)
	report("remove → pod gone (grace 1 s)", remove)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
		sb, err := b.Create(ctx, pythonSpec(run, echoProgram))
		if err != nil {
			t.Fatalf("%s: Create as %s: %v", attach, sa, err)
		}
		go io.Copy(io.Discard, sb.Stderr)
		out := lines(sb.Stdout)
		next(t, out, "ready")
		io.WriteString(sb.Stdin, "hi\n")
		if got := next(t, out, "echo"); got != "echo:hi\n" {
			t.Fatalf("%s: echo %q", attach, got)
		}
		sb.Close()
		if l, err := b.List(ctx, map[string]string{labelTestRun: run}); err != nil || len(l) == 0 {
			t.Fatalf("%s: List as %s = %v, %v", attach, sa, l, err)
		}
		if _, err := b.State(ctx, sb.ID); err != nil {
			t.Fatalf("%s: State as %s: %v", attach, sa, err)
		}
		if err := b.Remove(ctx, sb.ID); err != nil {
			t.Fatalf("%s: Remove as %s: %v", attach, sa, err)
		}
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
		if l, err := b.List(ctx, map[string]string{labelTestRun: run}); err == nil && len(l) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("sandboxes of run %s still in %s after 60 s", run, sandboxNS)
}
