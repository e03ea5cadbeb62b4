package docker_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// requireRunsc skips unless the daemon the tests use has gVisor's runsc
// registered (make test-gvisor starts a private one that has); with
// PDM_TEST_GVISOR set (make test-gvisor sets it) it fails instead.
func requireRunsc(t *testing.T, cli *dockertest.Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := cli.HasRuntime(ctx, "runsc")
	if ok {
		return
	}
	if os.Getenv("PDM_TEST_GVISOR") != "" {
		t.Fatalf("the Docker daemon at %s has no runtime runsc (PDM_TEST_GVISOR is set, so this fails): %v", cli.DaemonHost(), err)
	}
	t.Skip("the Docker daemon has no runtime runsc: make test-gvisor runs this test")
}

// hostRelease is the kernel release a runc sandbox sees.
func hostRelease(t *testing.T) string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// TestGVisorPerCall: on a daemon with runc and runsc, each call runs under
// the runtime its request (the policy's decision) names: a runsc call sees
// gVisor's kernel, a default call the host's; a warm sandbox of the
// default runtime never serves a runsc call; a runsc session keeps runsc,
// also across the restart that follows a timeout.
func TestGVisorPerCall(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) {
		c.Docker.Runtime = ""
		c.Docker.Runtimes = []string{"runsc"}
		c.Pool.Enabled = true
		c.Pool.Size = 1
	})
	requireRunsc(t, cli)
	host := hostRelease(t)
	uname := "import os\nprint(os.uname().release)"
	ctx := tctx(t, 5*time.Minute)
	for _, tt := range []struct{ runtime, want string }{{"", host}, {"runsc", "gvisor"}, {"", host}, {"runsc", "gvisor"}} {
		res, err := e.Transient(ctx, executor.Request{Code: uname, Imports: imports("os", 1), Runtime: tt.runtime})
		if err != nil {
			t.Fatalf("runtime %q: %v", tt.runtime, err)
		}
		wantStatus(t, res, "ok")
		got := strings.TrimSpace(res.Stdout)
		if (tt.want == host) != (got == host) {
			t.Errorf("runtime %q: the sandbox's kernel release is %q, the host's %q: want the %s kernel", tt.runtime, got, host, map[bool]string{true: "host's", false: "gVisor's"}[tt.want == host])
		}
	}

	res, id := persistent(t, e, "", executor.Request{Owner: "o", Code: uname, Imports: imports("os", 1), Runtime: "runsc"})
	wantStatus(t, res, "ok")
	if strings.TrimSpace(res.Stdout) == host {
		t.Errorf("runsc session sees the host's kernel %q", host)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "while True: pass", Runtime: "runsc", Limits: executor.Limits{Timeout: time.Second}})
	wantStatus(t, res, "timeout")
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: uname, Imports: imports("os", 1), Runtime: "runsc"})
	wantStatus(t, res, "ok")
	if strings.TrimSpace(res.Stdout) == host {
		t.Errorf("runsc session after a timeout sees the host's kernel %q", host)
	}
	if _, _, err := e.Persistent(ctx, id, executor.Request{Owner: "o", Code: "1"}); err == nil {
		t.Error("a call naming the default runtime on a runsc session was served")
	}
}

// TestGVisorOOM: under runsc the host kernel OOM-kills the whole sandbox.
// The call reports oom, or (when the daemon got no OOM mark from the
// runtime: 3 of 40 OOM kills here) killed by SIGKILL with a reason
// that names the memory limit; never anything else. A session restarts
// with its state lost and serves the next call.
func TestGVisorOOM(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) { c.Docker.Runtime = "runsc" })
	requireRunsc(t, cli)
	oomOrKilled := func(what string, res *executor.Result) {
		t.Helper()
		switch {
		case res.Status == "oom":
		case res.Status == "killed" && res.Error != nil && strings.Contains(res.Error.Message, "exit code 137") && strings.Contains(res.Error.Message, "memory limit"):
			t.Logf("%s: killed without the daemon's OOM mark: %s", what, res.Error.Message)
		default:
			t.Errorf("%s: status %q (%+v), want oom, or killed by SIGKILL naming the memory limit", what, res.Status, res.Error)
		}
	}
	oomOrKilled("transient", transient(t, e, executor.Request{Code: "b = bytearray(10 * 1024 ** 3)\nprint('survived')"}))
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1"})
	res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: "chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))"})
	oomOrKilled("session", res)
	if !res.StateLost {
		t.Error("a session's OOM should report StateLost")
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "print('back')"})
	wantStatus(t, res, "ok")
}
