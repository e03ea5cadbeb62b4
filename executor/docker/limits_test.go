package docker_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// interruptGrace is the executor's (sandbox.go): how long the runner gets to answer
// after the time limit before the container is killed.
const interruptGrace = 3 * time.Second

func TestTimeoutTransient(t *testing.T) {
	e, cli := newExec(t, nil)
	t0 := time.Now()
	res := transient(t, e, executor.Request{Code: "print('start')\nwhile True:\n    pass\n", Limits: executor.Limits{Timeout: 2 * time.Second}})
	took := time.Since(t0)
	wantStatus(t, res, "timeout")
	// The bound only shows that the timer fired: it includes starting a
	// sandbox on a shared machine, so it is generous.
	if took > 2*time.Second+interruptGrace+15*time.Second {
		t.Errorf("infinite loop with a 2s timeout took %s, want it stopped by the timer", took)
	}
	if res.Stdout != "start\n" || res.Error == nil || res.Error.Line < 2 || strings.Contains(res.Error.Traceback, "pdm-runner") {
		t.Errorf("timeout keeps the output and says where it stopped: stdout %q error %+v", res.Stdout, res.Error)
	}
	// Code that swallows the interrupt is killed after the grace period.
	t0 = time.Now()
	res = transient(t, e, executor.Request{Code: "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n", Limits: executor.Limits{Timeout: time.Second}})
	took = time.Since(t0)
	wantStatus(t, res, "timeout")
	if ran := time.Duration(res.DurationMS * float64(time.Millisecond)); ran > 3*time.Second {
		t.Errorf("uninterruptible loop with a 1s timeout ran %s before it was killed (whole call %s), want within timeout + 2s", ran, took)
	}
	if n := dockertest.Settled(t, cli, ""); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

func TestTimeoutPersistent(t *testing.T) {
	e, _ := newExec(t, nil)
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 7"})
	res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: "while True:\n    pass", Limits: executor.Limits{Timeout: time.Second}})
	wantStatus(t, res, "timeout")
	if res.StateLost {
		t.Error("an interruptible loop should keep the session's state")
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "x"})
	if res.Result == nil || *res.Result != "7" {
		t.Errorf("after an interrupted call x = %v, want 7", res.Result)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n", Limits: executor.Limits{Timeout: time.Second}})
	wantStatus(t, res, "timeout")
	if !res.StateLost {
		t.Error("an uninterruptible loop kills the interpreter: StateLost should be set")
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "'x' in globals()"})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "False" {
		t.Errorf("after a restart x should be gone; 'x' in globals() = %v", res.Result)
	}
}

func TestOOM(t *testing.T) {
	e, _ := newExec(t, nil)
	res := transient(t, e, executor.Request{Code: "b = bytearray(10 * 1024 ** 3)\nprint('survived')"})
	wantStatus(t, res, "oom")
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1"})
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))"})
	wantStatus(t, res, "oom")
	if !res.StateLost {
		t.Error("OOM in a session should report StateLost")
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "print('back')"})
	wantStatus(t, res, "ok")
}

func TestForkBomb(t *testing.T) {
	e, _ := newExec(t, nil)
	bomb := "import os\nwhile True:\n    os.fork()\n"
	res := transient(t, e, executor.Request{Code: bomb, Imports: imports("os", 1), Limits: executor.Limits{Timeout: 5 * time.Second}})
	if res.Status != "error" && res.Status != "timeout" {
		t.Fatalf("fork bomb status %q, want error (pids limit) or timeout; %+v", res.Status, res.Error)
	}
	t.Logf("fork bomb: status %s, error %s: %s", res.Status, res.Error.Type, res.Error.Message)
	res = transient(t, e, executor.Request{Code: "print('next')"})
	wantStatus(t, res, "ok")

	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1"})
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: bomb, Imports: imports("os", 1), Limits: executor.Limits{Timeout: 5 * time.Second}})
	t.Logf("fork bomb in a session: status %s state lost %v, error %+v", res.Status, res.StateLost, res.Error)
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "print('next')"})
	wantStatus(t, res, "ok")
}

// TestStubbornForkBomb: a session call whose processes keep every pid of
// the sandbox taken (they do not die when fork fails) and outlive its time
// limit. The call times out; what it started is killed with its
// interpreter, and the session's next call runs in a new one.
func TestStubbornForkBomb(t *testing.T) {
	e, _ := newExec(t, nil)
	bomb := "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1"})
	res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: bomb, Imports: imports("os", 1, "time", 1), Limits: executor.Limits{Timeout: 3 * time.Second}})
	if res.Status != "timeout" {
		t.Fatalf("stubborn fork bomb: status %q, want timeout; %+v", res.Status, res.Error)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "print('next')"})
	wantStatus(t, res, "ok")
	if res.Stdout != "next\n" {
		t.Errorf("the session's next call printed %q", res.Stdout)
	}
}

// watchHeap samples this process's heap in use every 5 ms until the
// function it returns is called; that function stops the sampling and
// returns the peak's growth in bytes over the heap at the start (after a
// GC).
func watchHeap() (growth func() int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return int64(peak) - int64(base)
	}
}

func TestHugeOutput(t *testing.T) {
	e, _ := newExec(t, nil)
	heapGrowth := watchHeap()
	code := "import sys\nprint('HEAD')\n_chunk = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(_chunk)\nprint('TAIL')\n"
	res := transient(t, e, executor.Request{Code: code, Imports: imports("sys", 1)})
	grew := heapGrowth()
	wantStatus(t, res, "ok")
	if !res.StdoutTruncated || !strings.HasPrefix(res.Stdout, "HEAD\nxxx") || !strings.HasSuffix(res.Stdout, "xxxTAIL\n") || !strings.Contains(res.Stdout, "bytes dropped] ...") {
		t.Errorf("200 MB of output: truncated %v, head %.20q, tail %.20q", res.StdoutTruncated, res.Stdout, res.Stdout[max(0, len(res.Stdout)-20):])
	}
	if len(res.Stdout) > int(configOf(t, e).Limits.MaxOutputBytes)+100 {
		t.Errorf("stdout is %d bytes, want at most max_output_bytes plus the marker", len(res.Stdout))
	}
	if want := int64(200<<20 + len("HEAD\nTAIL\n")); res.StdoutBytes != want {
		t.Errorf("StdoutBytes = %d, want %d", res.StdoutBytes, want)
	}
	if n := len(res.StdoutFull); n < int(configOf(t, e).Outputs.MaxStreamBytes) || n > int(configOf(t, e).Outputs.MaxStreamBytes)+100 ||
		!strings.HasPrefix(res.StdoutFull, "HEAD\nxxx") || !strings.HasSuffix(res.StdoutFull, "xxxTAIL\n") {
		t.Errorf("StdoutFull: %d bytes, head %.20q; want outputs.max_stream_bytes (%d) of head and tail", n, res.StdoutFull, configOf(t, e).Outputs.MaxStreamBytes)
	}
	if grew > 100<<20 {
		t.Errorf("server heap grew by %d MB, want < 100 MB", grew>>20)
	} else {
		t.Logf("server heap grew by at most %.1f MB", float64(grew)/(1<<20))
	}
}

func TestSandboxConfinement(t *testing.T) {
	e, _ := newExec(t, nil)
	code := `import os, socket
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return os.strerror(e.errno) if e.errno else type(e).__name__
for p in ("/etc/pdm-test", "/usr/pdm-test", "/pdm-test"):
    print(p, attempt(lambda: open(p, "w")))
def fill():
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
            f.flush()
print("fill /tmp", attempt(fill), os.path.getsize("/tmp/fill") <= 64 << 20)
def tcp():
    s = socket.socket()
    s.settimeout(3)
    s.connect(("1.1.1.1", 53))
print("tcp", attempt(tcp))
try:
    socket.getaddrinfo("example.com", 80)
    print("dns ok")
except socket.gaierror as e:
    print("dns", type(e).__name__)
print("docker.sock", os.path.exists("/var/run/docker.sock"), os.path.exists("/run/docker.sock"))
print("uid", os.getuid(), os.getgid())
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print("CapEff", status["CapEff"].strip(), "NoNewPrivs", status["NoNewPrivs"].strip())
root = [l.split() for l in open("/proc/self/mountinfo") if l.split()[4] == "/"][0]
print("root mount", root[5].split(",")[0])
`
	res := transient(t, e, executor.Request{Code: code, Imports: imports("os", 1, "socket", 1)})
	wantStatus(t, res, "ok")
	want := `/etc/pdm-test Read-only file system
/usr/pdm-test Read-only file system
/pdm-test Read-only file system
fill /tmp No space left on device True
tcp Network is unreachable
dns gaierror
docker.sock False False
uid 1000 1000
CapEff 0000000000000000 NoNewPrivs 1
root mount ro
`
	if res.Stdout != want {
		t.Errorf("confinement report:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

func TestTransientLeavesNoProcess(t *testing.T) {
	e, _ := newExec(t, nil)
	res := transient(t, e, executor.Request{Code: "import subprocess\nsubprocess.Popen(['sleep', '1000'])\nopen('/tmp/mark', 'w').write('x')", Imports: imports("subprocess", 1)})
	wantStatus(t, res, "ok")
	code := `import os
procs = [open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
print(any(c.startswith(b"sleep\x001000") for c in procs), os.path.exists("/tmp/mark"))`
	res = transient(t, e, executor.Request{Code: code, Imports: imports("os", 1)})
	wantStatus(t, res, "ok")
	if res.Stdout != "False False\n" {
		t.Errorf("next transient call sees sleep process / /tmp mark: %q, want \"False False\"", res.Stdout)
	}
}

func TestOOMOfAChildProcess(t *testing.T) {
	e, _ := newExec(t, nil)
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1"})
	code := "import subprocess\nr = subprocess.run(['python3', '-c', 'b = bytearray(10 * 1024 ** 3)'])\nprint(r.returncode)"
	res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: code, Imports: imports("subprocess", 1)})
	wantStatus(t, res, "oom")
	if res.StateLost || res.Stdout != "-9\n" {
		t.Errorf("the child was OOM-killed, the interpreter should live on: state lost %v, stdout %q", res.StateLost, res.Stdout)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "x"})
	if res.Result == nil || *res.Result != "1" {
		t.Errorf("session state after a child's OOM: %v", res.Result)
	}
}

func TestFigureCaps(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) { c.Limits.MaxImageBytes = 30 << 10 })
	code := "import matplotlib.pyplot as plt\nfor i in range(20):\n    plt.figure(figsize=(3, 2))\n    plt.plot([i, 0])\n"
	res := transient(t, e, executor.Request{Code: code, Imports: []analyze.Import{{Module: "matplotlib.pyplot", Alias: "plt", Line: 1}}})
	wantStatus(t, res, "ok")
	total := 0
	for _, im := range res.Images {
		total += len(im.PNG)
	}
	if len(res.Images) == 0 || len(res.Images) >= 20 || total > 30<<10 || !strings.Contains(res.Stderr, "figure(s) not returned") {
		t.Errorf("%d images, %d bytes, stderr %q; want some, within 30 KiB, and a note about the rest", len(res.Images), total, res.Stderr)
	}
	// Figures are closed after each run: the next call in a session starts with none.
	_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "import matplotlib.pyplot as plt\nplt.plot([1])", Imports: []analyze.Import{{Module: "matplotlib.pyplot", Alias: "plt", Line: 1}}})
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "len(plt.get_fignums())"})
	if res.Result == nil || *res.Result != "0" || len(res.Images) != 0 {
		t.Errorf("open figures after the previous call returned its images: %v (%d images)", res.Result, len(res.Images))
	}
}
