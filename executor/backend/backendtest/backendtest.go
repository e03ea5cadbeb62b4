// Package backendtest is the test suite every backend.Backend passes against
// its real runtime (a Docker daemon, a Kubernetes cluster): the contract of
// package backend, checked end to end. A backend's tests call Run with a
// Harness; each check runs as a subtest, marks its sandboxes with a label of
// its own and removes them (and waits for them to go) when it ends.
//
// The image must have python3 and /bin/sh (the sandbox image does).
package backendtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// DeadlinePassed is parent with a deadline that has passed but a timer
// that has not yet marked it done: the moment in which a call that failed
// on the deadline is seen before ctx.Err() says so (see backend.Ended).
func DeadlinePassed(parent context.Context) context.Context { return deadlinePassed{parent} }

type deadlinePassed struct{ context.Context }

func (deadlinePassed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// LabelRun marks the sandboxes of one check.
const LabelRun = "python-docker-mcp.test-run"

// Harness is what a backend gives the suite.
type Harness struct {
	// New returns a backend on the real runtime, already known reachable
	// (it fails the test, never skips, when it is not).
	New func(t *testing.T) backend.Backend
	// Image has python3 and /bin/sh.
	Image string
}

// Run runs every check of the suite as a subtest.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTrip", RoundTrip},
		{"Hardening", Hardening},
		{"ExitCode", ExitCode},
		{"OOM", OOM},
		{"CloseEndsProgram", CloseEndsProgram},
		{"CloseUnread", CloseUnread},
		{"ListRemove", ListRemove},
		{"InvalidSpec", InvalidSpec},
		{"CreateCancelled", CreateCancelled},
		{"Concurrent", Concurrent},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// Start returns h's backend and a run label value whose sandboxes are all
// removed, and waited for, when t ends.
func Start(t *testing.T, h Harness) (backend.Backend, string) {
	t.Helper()
	b := h.New(t)
	var r [6]byte
	rand.Read(r[:])
	run := hex.EncodeToString(r[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		sel := map[string]string{LabelRun: run}
		list, err := b.List(ctx, sel)
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
			if list, err = b.List(ctx, sel); err == nil && len(list) == 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("cleanup: sandboxes of run %s still there after 90 s: %v", run, list)
	})
	return b, run
}

// EchoProgram announces itself on stdout and stderr, then echoes each stdin
// line prefixed with "echo:", and exits 0 at EOF.
const EchoProgram = `import sys
sys.stderr.write("err-ready\n"); sys.stderr.flush()
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    sys.stdout.write("echo:" + line); sys.stdout.flush()
`

// Spec is a hardened sandbox running `python3 -c program`, marked with run
// and with this test process's host and pid, as a live server's sandbox
// is: a server's startup reaper (another package's tests on the same
// runtime) leaves it alone.
func Spec(image, run, program string) backend.Spec {
	host, _ := os.Hostname()
	return backend.Spec{
		Image:      image,
		Command:    []string{"python3", "-I", "-B", "-c", program},
		User:       "1000:1000",
		WorkingDir: "/workspace",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"},
		Labels: map[string]string{
			"python-docker-mcp.kind": "transient",
			"python-docker-mcp.pid":  strconv.Itoa(os.Getpid()),
			LabelRun:                 run,
		},
		Annotations: map[string]string{
			"python-docker-mcp.host":    host,
			"python-docker-mcp.owner":   "tester@example.com",
			"python-docker-mcp.created": time.Now().UTC().Format(time.RFC3339Nano),
		},
		MemoryBytes: 128 << 20, CPUs: 0.5, Pids: 64, TmpBytes: 16 << 20, WorkspaceBytes: 16 << 20,
		ReadOnlyRoot: true, NetworkDisabled: true,
	}
}

// Lines reads r line by line into a channel, closed at EOF; a read error
// is sent last, as a line starting with "ERROR: ".
func Lines(r io.Reader) <-chan string {
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

// Next is the next line of ch; the test fails if ch ends or stays silent
// for 60 s.
func Next(t *testing.T, ch <-chan string, what string) string {
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

// ReadAll reads r to its end; the test fails if that takes over 90 s (a
// stream that never ends would otherwise hang the suite).
func ReadAll(t *testing.T, r io.Reader, what string) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		return res.b, res.err
	case <-time.After(90 * time.Second):
		t.Fatalf("%s: no end of stream within 90 s", what)
	}
	return nil, nil
}

// Rest is what is left on ch up to its end; the test fails if ch has not
// ended within 90 s.
func Rest(t *testing.T, ch <-chan string, what string) []string {
	t.Helper()
	var rest []string
	timeout := time.After(90 * time.Second)
	for {
		select {
		case s, ok := <-ch:
			if !ok {
				return rest
			}
			rest = append(rest, s)
		case <-timeout:
			t.Fatalf("%s: no end of stream within 90 s (so far %q)", what, rest)
		}
	}
}

// WaitState polls State (which may lag the program) until ok, for 90 s.
func WaitState(t *testing.T, b backend.Backend, id string, ok func(backend.State) bool) backend.State {
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

// RoundTrip: output written before anyone could read it arrives; lines go
// both ways over the attach stream; State says running; EOF on stdin ends
// the program with exit 0 and its stdout.
func RoundTrip(t *testing.T, h Harness) {
	b, run := Start(t, h)
	ctx := context.Background()
	sb, err := b.Create(ctx, Spec(h.Image, run, EchoProgram))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	out, errs := Lines(sb.Stdout), Lines(sb.Stderr)
	if got := Next(t, out, "stdout"); got != "ready\n" {
		t.Fatalf("first stdout line %q, want ready (output before the attach lost?)", got)
	}
	if got := Next(t, errs, "stderr"); got != "err-ready\n" {
		t.Fatalf("first stderr line %q, want err-ready", got)
	}
	for i := range 20 {
		msg := fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i*100))
		if _, err := io.WriteString(sb.Stdin, msg); err != nil {
			t.Fatalf("write stdin: %v", err)
		}
		if got := Next(t, out, "echo"); got != "echo:"+msg {
			t.Fatalf("echo %d: got %q, want %q", i, got, "echo:"+msg)
		}
	}
	WaitState(t, b, sb.ID, func(s backend.State) bool { return s.Running })
	if err := sb.Stdin.Close(); err != nil {
		t.Fatalf("close stdin: %v", err)
	}
	if rest := Rest(t, out, "stdout after EOF on stdin"); len(rest) > 0 {
		t.Fatalf("stdout after EOF: %q", rest)
	}
	if st := WaitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 0 || st.OOMKilled {
		t.Fatalf("State() after EOF = %+v, want exit 0", st)
	}
}

// Probe is what HardeningProbe prints, as JSON on one line.
type Probe struct {
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
	WorkspaceFS       []string `json:"workspace_fs"`
}

// HardeningProbe waits for a line on stdin, then prints a Probe of the
// sandbox as seen from inside.
const HardeningProbe = `import json, os, sys
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
def fs(path):
    return [l.split()[2] for l in open("/proc/mounts") if l.split()[1] == path]
def net():
    try:
        return sorted(os.listdir("/sys/class/net"))
    except FileNotFoundError:  # gVisor's sysfs has no class/net
        import socket
        return sorted(n for _, n in socket.if_nameindex())
sys.stdin.readline()
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "cwd": os.getcwd(),
    "cap_eff": status("CapEff"), "no_new_privs": status("NoNewPrivs"), "seccomp": status("Seccomp"),
    "root_writable": writable("/"), "tmp_writable": writable("/tmp"), "workspace_writable": writable("/workspace"),
    "net": net(),
    "sa_token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"),
    "service_env": sorted(k for k in os.environ if k.endswith("_SERVICE_HOST") and not k.startswith("KUBERNETES_")),
    "mem_limit": mem_limit(),
    "tmp_fs": fs("/tmp"), "workspace_fs": fs("/workspace"),
}), flush=True)
`

// RunProbe creates a sandbox from spec (whose program should be
// HardeningProbe) and returns what it printed, raw and decoded.
func RunProbe(t *testing.T, b backend.Backend, spec backend.Spec) (Probe, string) {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	io.WriteString(sb.Stdin, "go\n")
	line := Next(t, Lines(sb.Stdout), "probe")
	var p Probe
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatalf("probe output %q: %v", line, err)
	}
	return p, line
}

// Hardening: the Spec's hardening as the program sees it.
func Hardening(t *testing.T, h Harness) {
	b, run := Start(t, h)
	got, line := RunProbe(t, b, Spec(h.Image, run, HardeningProbe))
	CheckHardening(t, got, line, false)
}

// CheckHardening holds a Probe of a Spec made by Spec (memory 128 MiB) to
// the hardening every sandbox has. Under gVisor (gvisor true) two checks
// are left out: runsc applies no OCI seccomp profile (the runner's own
// filter is what bounds the code there), and /tmp and the workspace are
// served over 9p, not tmpfs.
func CheckHardening(t *testing.T, got Probe, line string, gvisor bool) {
	t.Helper()
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"runs as 1000:1000", got.UID == 1000 && got.GID == 1000 && got.EUID == 1000},
		{"working dir /workspace", got.Cwd == "/workspace"},
		{"no effective capabilities", got.CapEff == "0000000000000000"},
		{"no new privileges", got.NoNewPrivs == "1"},
		{"seccomp filter on", gvisor || got.Seccomp == "2"},
		{"read-only root", !got.RootWritable},
		{"writable /tmp and workspace", got.TmpWritable && got.WorkspaceWritable},
		{"/tmp and workspace are tmpfs", gvisor || slices.Equal(got.TmpFS, []string{"tmpfs"}) && slices.Equal(got.WorkspaceFS, []string{"tmpfs"})},
		{"memory limit 128 MiB", got.MemLimit == 128<<20},
		{"no network interface but lo", !slices.ContainsFunc(got.Net, func(s string) bool { return s != "lo" })},
	} {
		if !c.ok {
			t.Errorf("%s: probe says %s", c.name, line)
		}
	}
}

// ExitCode: the program's exit status and output reach the caller; a
// program the image lacks fails visibly (127), not silently.
func ExitCode(t *testing.T, h Harness) {
	b, run := Start(t, h)
	ctx := context.Background()
	spec := Spec(h.Image, run, "import sys; sys.stdout.write('bye'); sys.exit(3)")
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go io.Copy(io.Discard, sb.Stderr)
	if out, err := ReadAll(t, sb.Stdout, "stdout"); string(out) != "bye" || err != nil {
		t.Fatalf("stdout %q, %v; want bye", out, err)
	}
	if st := WaitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 3 || st.OOMKilled {
		t.Fatalf("State() = %+v, want exit 3", st)
	}
	spec.Command = []string{"/no/such/program"}
	sb2, err := b.Create(ctx, spec)
	if err != nil {
		return // refusing to create it is visible too
	}
	defer sb2.Close()
	go io.Copy(io.Discard, sb2.Stdout)
	msg, _ := ReadAll(t, sb2.Stderr, "stderr")
	if st := WaitState(t, b, sb2.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 127 {
		t.Fatalf("State() = %+v, want exit 127; stderr %q", st, msg)
	}
}

// OOM: allocating past the memory limit kills the program and State says
// OOMKilled (exit 137).
func OOM(t *testing.T, h Harness) {
	b, run := Start(t, h)
	spec := Spec(h.Image, run, `import sys
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
	out, _ := ReadAll(t, sb.Stdout, "stdout of the program killed for memory")
	if strings.Contains(string(out), "survived") {
		t.Fatalf("allocating 512 MiB under a 64 MiB limit survived: %q", out)
	}
	st := WaitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited })
	// A daemon learns of an OOM kill from an event of its own, which may
	// come after the exit (the executor's diagnose waits oomSettle for it):
	// an exit by SIGKILL is read again for a while.
	for end := time.Now().Add(5 * time.Second); st.ExitCode == 137 && !st.OOMKilled && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if again, err := b.State(context.Background(), sb.ID); err == nil {
			st = again
		}
	}
	if !st.OOMKilled || st.ExitCode != 137 {
		t.Fatalf("State() = %+v, want OOMKilled with exit code 137", st)
	}
}

// CloseEndsProgram: detaching (as a crashed server would) closes the
// program's stdin, so an interpreter waiting for input ends: nothing runs
// unattended. Stdin refuses writes after Close.
func CloseEndsProgram(t *testing.T, h Harness) {
	b, run := Start(t, h)
	sb, err := b.Create(context.Background(), Spec(h.Image, run, EchoProgram))
	if err != nil {
		t.Fatal(err)
	}
	out := Lines(sb.Stdout)
	go io.Copy(io.Discard, sb.Stderr)
	Next(t, out, "ready")
	if err := sb.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	Rest(t, out, "stdout after Close")
	if _, err := io.WriteString(sb.Stdin, "x\n"); err == nil {
		t.Error("write to Stdin after Close succeeded")
	}
	if st := WaitState(t, b, sb.ID, func(s backend.State) bool { return s.Exited }); st.ExitCode != 0 {
		t.Fatalf("State() after Close = %+v, want exit 0 (stdin EOF)", st)
	}
}

// CloseUnread: Close returns while the program floods stdout and stderr
// that nobody reads (the stream is blocked on them), and Remove then ends
// the program.
func CloseUnread(t *testing.T, h Harness) {
	b, run := Start(t, h)
	sb, err := b.Create(context.Background(), Spec(h.Image, run, `import sys
sys.stdout.write("ready\n"); sys.stdout.flush()
while True:
    sys.stdout.write("x" * 65536); sys.stderr.write("y" * 65536)
`))
	if err != nil {
		t.Fatal(err)
	}
	// Both streams are read until "ready" arrives (the contract: one
	// unread stream may stall the other, and stderr's flood can come
	// first); then neither is.
	readingErr := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-readingErr:
				return
			default:
			}
			if _, err := sb.Stderr.Read(buf); err != nil {
				return
			}
		}
	}()
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 6)
		_, err := io.ReadFull(sb.Stdout, buf)
		if err == nil && string(buf) != "ready\n" {
			err = fmt.Errorf("first bytes %q, want ready", buf)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no ready line within 60 s")
	}
	close(readingErr)
	done := make(chan error, 1)
	go func() { done <- sb.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close() = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close() hangs while the program's output is unread")
	}
	if err := b.Remove(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	WaitGone(t, b, sb.ID)
}

// WaitGone polls State until the sandbox is gone (ErrNotFound), for 90 s.
func WaitGone(t *testing.T, b backend.Backend, id string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := b.State(context.Background(), id)
		if errors.Is(err, backend.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still there 90 s after Remove (State: %v)", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ListRemove: List selects on labels and returns annotations; Remove makes
// a sandbox go (State: ErrNotFound) and is idempotent.
func ListRemove(t *testing.T, h Harness) {
	b, run := Start(t, h)
	ctx := context.Background()
	var ids []string
	for _, kind := range []string{"transient", "persistent"} {
		spec := Spec(h.Image, run, "import sys; sys.stdin.read()")
		spec.Labels["python-docker-mcp.kind"] = kind
		sb, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		ids = append(ids, sb.ID)
	}
	all, err := b.List(ctx, map[string]string{LabelRun: run})
	if err != nil || len(all) != 2 {
		t.Fatalf("List(run) = %v, %v; want 2 sandboxes", all, err)
	}
	pers, err := b.List(ctx, map[string]string{LabelRun: run, "python-docker-mcp.kind": "persistent"})
	if err != nil || len(pers) != 1 || pers[0].ID != ids[1] {
		t.Fatalf("List(persistent) = %v, %v; want [%s]", pers, err, ids[1])
	}
	if p := pers[0]; p.Annotations["python-docker-mcp.owner"] != "tester@example.com" || p.Labels["python-docker-mcp.kind"] != "persistent" || p.Created.IsZero() || p.Removing {
		t.Fatalf("List() info = %+v, want owner annotation, kind label, created time, not removing", p)
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
		if left, _ := b.List(ctx, map[string]string{LabelRun: run, "python-docker-mcp.kind": "persistent"}); len(left) == 1 && !left[0].Removing {
			t.Fatalf("List() after Remove = %+v, want Removing", left[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.Remove(ctx, ids[1]); err != nil {
		t.Fatalf("Remove(gone) = %v, want nil", err)
	}
	if rest, err := b.List(ctx, map[string]string{LabelRun: run}); err != nil || len(rest) != 1 || rest[0].ID != ids[0] {
		t.Fatalf("List() after Remove = %v, %v; want only %s", rest, err, ids[0])
	}
}

// InvalidSpec: a Spec breaking Validate's rules creates nothing.
func InvalidSpec(t *testing.T, h Harness) {
	b, run := Start(t, h)
	spec := Spec(h.Image, run, "pass")
	spec.User = "0:0"
	if _, err := b.Create(context.Background(), spec); !errors.Is(err, backend.ErrInvalidSpec) {
		t.Fatalf("Create(root) error = %v, want ErrInvalidSpec", err)
	}
	if l, err := b.List(context.Background(), map[string]string{LabelRun: run}); err != nil || len(l) != 0 {
		t.Fatalf("List() after a refused Create = %v, %v; want nothing", l, err)
	}
}

// CreateCancelled: a Create whose ctx ends at any stage returns ctx's error
// and leaves no sandbox running.
func CreateCancelled(t *testing.T, h Harness) {
	b, run := Start(t, h)
	for _, d := range []time.Duration{time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		sb, err := b.Create(ctx, Spec(h.Image, run, EchoProgram))
		cancel()
		if err == nil {
			sb.Close()
			b.Remove(context.Background(), sb.ID)
			continue // quicker than the deadline
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Create(deadline %s) error = %v, want DeadlineExceeded", d, err)
		}
	}
	left, err := b.List(context.Background(), map[string]string{LabelRun: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left {
		if !s.Removing {
			t.Errorf("sandbox %s left behind by a cancelled Create", s.ID)
		}
	}
}

// Concurrent: sandboxes created at the same time from one backend each get
// their own stream (no crossed output).
func Concurrent(t *testing.T, h Harness) {
	b, run := Start(t, h)
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- func() error {
				sb, err := b.Create(context.Background(), Spec(h.Image, run, EchoProgram))
				if err != nil {
					return err
				}
				defer sb.Close()
				go io.Copy(io.Discard, sb.Stderr)
				out := Lines(sb.Stdout)
				select {
				case got := <-out:
					if got != "ready\n" {
						return fmt.Errorf("sandbox %d: first line %q", i, got)
					}
				case <-time.After(60 * time.Second):
					return fmt.Errorf("sandbox %d: no first line within 60 s", i)
				}
				for j := range 5 {
					msg := fmt.Sprintf("sandbox %d line %d\n", i, j)
					io.WriteString(sb.Stdin, msg)
					select {
					case got := <-out:
						if got != "echo:"+msg {
							return fmt.Errorf("sandbox %d: got %q, want %q", i, got, "echo:"+msg)
						}
					case <-time.After(60 * time.Second):
						return fmt.Errorf("sandbox %d: no echo within 60 s", i)
					}
				}
				return nil
			}()
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// RunShared runs the checks of backend.Shared, for backends that have it.
func RunShared(t *testing.T, h Harness) {
	t.Run("SharedAttach", func(t *testing.T) { SharedAttach(t, h) })
	t.Run("SharedSessions", func(t *testing.T) { SharedSessions(t, h) })
}

func shared(t *testing.T, b backend.Backend) backend.Shared {
	t.Helper()
	s, ok := b.(backend.Shared)
	if !ok {
		t.Fatalf("%T does not implement backend.Shared", b)
	}
	return s
}

// SharedAttach: a Detachable sandbox's program outlives its attach
// streams; Attach connects another stream that reaches its stdin and
// receives its output, as every attached stream does; an unknown or
// removed sandbox is ErrNotFound.
func SharedAttach(t *testing.T, h Harness) {
	b, run := Start(t, h)
	sh := shared(t, b)
	ctx := context.Background()
	spec := Spec(h.Image, run, EchoProgram)
	spec.Detachable = true
	first, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	out1 := Lines(first.Stdout)
	go io.Copy(io.Discard, first.Stderr)
	Next(t, out1, "ready")

	second, err := sh.Attach(ctx, first.ID)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	out2 := Lines(second.Stdout)
	go io.Copy(io.Discard, second.Stderr)
	// The new stream may connect to the output a little after its input:
	// ask until an answer comes back on it.
	got := ""
	for i := 0; got == "" && i < 100; i++ {
		if _, err := fmt.Fprintf(second.Stdin, "p%d\n", i); err != nil {
			t.Fatalf("write on the attached stream: %v", err)
		}
		select {
		case l, ok := <-out2:
			if !ok || strings.HasPrefix(l, "ERROR: ") {
				t.Fatalf("attached stream ended: %q", l)
			}
			got = l
		case <-time.After(300 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(got, "echo:p") {
		t.Fatalf("attached stream's first line %q, want an echo of its input", got)
	}
	// The first stream sees the same output.
	if l := Next(t, out1, "the first stream's copy of the echo"); !strings.HasPrefix(l, "echo:p") {
		t.Errorf("first stream got %q, want the echo the second stream asked for", l)
	}
	// Closing the first stream leaves the program running for the second.
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	Rest(t, out1, "first stream after Close")
	if _, err := io.WriteString(second.Stdin, "after\n"); err != nil {
		t.Fatal(err)
	}
	for l := Next(t, out2, "echo after the first stream closed"); strings.TrimSpace(l) != "echo:after"; l = Next(t, out2, "echo after the first stream closed") {
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	// (State may lag: wait until it says running or ended.)
	if st := WaitState(t, b, first.ID, func(s backend.State) bool { return s.Running || s.Exited }); !st.Running {
		t.Fatalf("State after every stream closed = %+v; want the Detachable program running", st)
	}
	third, err := sh.Attach(ctx, first.ID)
	if err != nil {
		t.Fatalf("Attach after every stream closed: %v", err)
	}
	third.Close()

	if err := b.Remove(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	WaitGone(t, b, first.ID)
	if _, err := sh.Attach(ctx, first.ID); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Attach to a removed sandbox: %v, want ErrNotFound", err)
	}
	if _, err := sh.Attach(ctx, "no-such-sandbox-"+run); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Attach to an unknown id: %v, want ErrNotFound", err)
	}
}

// SharedSessions: a session record has one holder at a time; another
// waits until release; SetSandbox, Meta and LastUsed are kept; deleted
// records are ErrNotFound; Sessions selects by owner.
func SharedSessions(t *testing.T, h Harness) {
	b, run := Start(t, h)
	sh := shared(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner := "tester " + run + "@example.com"
	id := "test" + run
	t.Cleanup(func() { sh.DeleteSession(context.Background(), id) })
	created := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	lk, err := sh.CreateSession(ctx, backend.SessionRecord{ID: id, Owner: owner, Created: created, LastUsed: created, Meta: map[string]string{"memory": "123"}}, "server-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.CreateSession(ctx, backend.SessionRecord{ID: id, Owner: owner}, "server-b"); err == nil {
		t.Error("a second CreateSession with the same id succeeded")
	}
	recs, err := sh.Sessions(ctx, owner)
	if err != nil || len(recs) != 1 || recs[0].ID != id || recs[0].Holder != "server-a" || !recs[0].Held(time.Now()) || !recs[0].Created.Equal(created) {
		t.Fatalf("Sessions(owner) = %+v, %v; want the record held by server-a", recs, err)
	}
	if other, err := sh.Sessions(ctx, "someone else "+run); err != nil || len(other) != 0 {
		t.Errorf("Sessions(another owner) = %+v, %v; want none", other, err)
	}
	busy, bcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = sh.LockSession(busy, id, "server-b")
	bcancel()
	if err == nil {
		t.Fatal("server-b took a record server-a holds")
	}
	if err := lk.SetSandbox(ctx, "sandbox-1"); err != nil {
		t.Fatal(err)
	}
	// server-b waits for the release.
	took := make(chan backend.SessionLock, 1)
	go func() {
		l, err := sh.LockSession(ctx, id, "server-b")
		if err != nil {
			t.Errorf("LockSession after release: %v", err)
		}
		took <- l
	}()
	time.Sleep(200 * time.Millisecond)
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-took
	if lb == nil {
		return
	}
	rec := lb.Record()
	if rec.Sandbox != "sandbox-1" || rec.Meta["memory"] != "123" || rec.Owner != owner || !rec.LastUsed.After(created) || rec.Holder != "server-b" {
		t.Errorf("record as server-b took it = %+v; want sandbox-1, the meta, the owner, a later LastUsed", rec)
	}
	if err := lb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.LockSession(ctx, id, "server-a"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("LockSession after Delete: %v, want ErrNotFound", err)
	}
	if recs, _ := sh.Sessions(ctx, owner); len(recs) != 0 {
		t.Errorf("Sessions after Delete = %+v, want none", recs)
	}
	if err := sh.DeleteSession(ctx, id); err != nil {
		t.Errorf("DeleteSession of a deleted record: %v, want nil", err)
	}
}
