package docker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// invalidReply is the executor's reason (sandbox.go) for a call whose
// sandbox answered with something that is not a reply to it.
const invalidReply = "the sandbox sent an invalid reply"

// forger is Python that tries every way the runner used to be reachable
// from user code to answer request `target` with a forged result "666":
// the runner's file descriptors through /proc/1, a frame walk and the
// garbage collector looking for the protocol's send function, and every
// descriptor of its own process. It reports what it reached on stdout.
const forger = `
import gc, json, os, struct, sys
def forge(target, size=None, fds=True):
    body = json.dumps({"id": target, "status": "ok", "stdout": "FORGED", "result": "666"}).encode()
    frame = struct.pack(">I", size if size is not None else len(body)) + body
    reached = []
    for path in ("/proc/1/fd/1", "/proc/1/fd/0", "/proc/1/fd/3", "/proc/1/fd/4", "/proc/1/mem"):
        try:
            with open(path, "wb", buffering=0) as f:
                f.write(frame)
            reached.append(path)
        except Exception:
            pass
    try:
        for o in gc.get_objects():
            if callable(o) and getattr(o, "__name__", "") == "_send":
                o({"id": target, "status": "ok", "result": "666"})
                reached.append("gc:_send")
    except Exception:
        pass
    f = sys._getframe()
    while f is not None:
        if "_send" in f.f_globals:
            try:
                f.f_globals["_send"]({"id": target, "status": "ok", "result": "666"})
                reached.append("frame:_send")
            except Exception:
                pass
            break
        f = f.f_back
    for fd in range(3, 64 if fds else 3):
        try:
            os.write(fd, frame)
            reached.append("fd%d" % fd)
        except OSError:
            pass
    return reached
`

// TestForgedFramesCannotAnswer: user code cannot reach the protocol, so a
// forged frame — from a thread an earlier call left running, from a frame
// walk or the garbage collector, or an oversized one — never becomes the
// answer to a call, never grows the server's memory past the caps, and
// never stops the server's timer.
func TestForgedFramesCannotAnswer(t *testing.T) {
	e, _ := newExec(t, nil)

	t.Run("thread left by an earlier call", func(t *testing.T) {
		code := forger + `
import threading, time
log = []
def keep_forging():
    for i in range(400):
        for target in range(1, 8):
            log.extend(forge(target))
        time.sleep(0.01)
threading.Thread(target=keep_forging, daemon=True).start()
`
		_, id := persistent(t, e, "", executor.Request{Owner: "o", Code: code, Imports: gated(t, code)})
		for i := 0; i < 5; i++ {
			res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: "6 * 7"})
			if res.Result != nil && *res.Result == "666" {
				t.Fatalf("call %d answered by the forger: %+v", i, res)
			}
			// The thread's frames may reach the session's own result pipe:
			// the runner then refuses the reply (wrong nonce); they never
			// reach the protocol.
			if res.Status == "ok" {
				if res.Result == nil || *res.Result != "42" {
					t.Errorf("call %d: result %v, want 42", i, res.Result)
				}
			} else if res.Status != "killed" || !strings.Contains(res.Error.Message, invalidReply) {
				t.Errorf("call %d: status %s %+v, want ok or killed with %q", i, res.Status, res.Error, invalidReply)
			}
		}
		res, _ := persistent(t, e, id, executor.Request{Owner: "o", Code: "sorted({r for r in log if not r.startswith('fd')}) if 'log' in globals() else []"})
		if res.Result != nil && *res.Result != "[]" {
			t.Errorf("the forger reached the runner through %s", *res.Result)
		}
	})

	t.Run("frame walk and gc in the same call", func(t *testing.T) {
		code := forger + "print(sorted(r for r in forge(1) if not r.startswith('fd')))\n6 * 7"
		res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code)})
		if res.Status == "ok" && (res.Result == nil || *res.Result != "42" || res.Stdout != "[]\n") {
			t.Errorf("forged frames: result %v stdout %q, want 42 and nothing reached", res.Result, res.Stdout)
		}
		if res.Status != "ok" && (res.Status != "killed" || !strings.Contains(res.Error.Message, invalidReply)) {
			t.Errorf("status %s %+v, want ok, or killed with %q", res.Status, res.Error, invalidReply)
		}
	})

	t.Run("oversized", func(t *testing.T) {
		heapGrowth := watchHeap()
		// 240 MB announced and written on every descriptor in reach.
		code := forger + `
chunk = b"x" * (1 << 20)
forge(1, size=240 << 20)
for fd in range(1, 64):
    try:
        for _ in range(240):
            os.write(fd, chunk)
    except OSError:
        pass
`
		res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code)})
		grew := heapGrowth()
		if res.Status == "killed" {
			if !strings.Contains(res.Error.Message, invalidReply) {
				t.Errorf("killed for %q, want %q", res.Error.Message, invalidReply)
			}
		} else if res.Status != "ok" {
			t.Errorf("status %s %+v, want ok or killed (invalid reply)", res.Status, res.Error)
		}
		if res.Result != nil && *res.Result == "666" {
			t.Errorf("forged result accepted")
		}
		if n := int64(len(res.Stdout) + len(res.Stderr)); n > 2*int64(configOf(t, e).Limits.MaxOutputBytes)+1024 {
			t.Errorf("output of %d bytes, want at most twice the output cap", n)
		}
		if grew > 100<<20 {
			t.Errorf("server heap grew by %d MB, want < 100 MB", grew>>20)
		}
	})

	t.Run("the server's timer", func(t *testing.T) {
		// Forged "done" frames, then code that ignores the runner's stop
		// signal: the call still ends with status timeout.
		code := forger + `
import signal
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
for target in range(1, 8):
    forge(target, fds=False)
while True:
    pass
`
		res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code), Limits: executor.Limits{Timeout: 2 * time.Second}})
		wantStatus(t, res, "timeout")
	})
}

// denyAll denies every capability class.
var denyAll = &executor.Capabilities{}

// TestCapabilitiesDenied: with processes, sockets, pty and native code
// denied, every route to them fails with the policy's PermissionError,
// however it is spelled: C twins, attribute chains through allowed
// libraries, library helpers that take a string, asyncio and process
// pools.
func TestCapabilitiesDenied(t *testing.T) {
	e, _ := newExec(t, nil)
	routes := []struct {
		name, code, class string
	}{
		{"os.system", "import os\nos.system('true')", "processes"},
		{"posix.system", "import posix\nposix.system('true')", "processes"},
		{"_posixsubprocess.fork_exec", "import _posixsubprocess, os\nr, w = os.pipe()\n_posixsubprocess.fork_exec(['/bin/true'], [b'/bin/true'], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w, False, False, 0, None, None, None, -1, None, False)", "processes"},
		{"os.spawnvp", "import os\nos.spawnvp(os.P_WAIT, 'true', ['true'])", "processes"},
		{"alias and vars()", "import os\no = os\nvars(o)['fork']()", "processes"},
		{"matplotlib.subprocess", "import matplotlib\nmatplotlib.subprocess.run(['true'])", "processes"},
		{"pkgutil.resolve_name", "import pkgutil\npkgutil.resolve_name('subprocess:run')(['true'])", "processes"},
		{"logging.config factory", "import logging.config\nlogging.config.dictConfig({'version': 1, 'handlers': {'h': {'()': 'subprocess.Popen', 'args': ['true']}}, 'root': {'handlers': ['h']}})", "processes"},
		{"pickle._loads", "import pickle\npickle._loads(b'csubprocess\\nPopen\\n(S\"true\"\\ntR.')", "processes"},
		{"pandas.read_pickle", "import io, pandas\npandas.read_pickle(io.BytesIO(b'csubprocess\\nPopen\\n(S\"true\"\\ntR.'))", "processes"},
		{"importlib.util loader", "import importlib.util\ns = importlib.util.spec_from_file_location('x', '/usr/lib/python3.13/subprocess.py')\nm = importlib.util.module_from_spec(s)\ns.loader.exec_module(m)\nm.run(['true'])", "processes"},
		{"ProcessPoolExecutor", "import concurrent.futures as f\nwith f.ProcessPoolExecutor(1) as ex:\n    ex.submit(abs, -1).result()", "processes"},
		{"fork from a thread", "import os, threading\nerr = []\ndef f():\n    try:\n        os.fork()\n    except Exception as e:\n        err.append(e)\nt = threading.Thread(target=f)\nt.start()\nt.join()\nraise err[0]", "processes"},
		{"asyncio.create_subprocess_exec", "import asyncio\nasync def m():\n    await asyncio.create_subprocess_exec('true')\nasyncio.run(m())", "sockets"}, // its event loop needs a socketpair first
		{"_socket.socket", "import _socket\n_socket.socket()", "sockets"},
		{"socketpair", "import socket\nsocket.socketpair()", "sockets"},
		{"os.openpty", "import os\nos.openpty()", "pty"},
		{"memfd_create", "import os\nos.memfd_create('x')", "native_code"},
		{"executable anonymous memory", "import mmap\nmmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)", "native_code"},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			res := transient(t, e, executor.Request{Code: rt.code, Imports: gated(t, rt.code), Capabilities: denyAll})
			wantStatus(t, res, "error")
			want := "policy.capabilities." + rt.class
			if !strings.Contains(res.Error.Message, want) || !strings.Contains(res.Error.Message, "not allowed by the sandbox policy") {
				t.Errorf("error %s: %s, want the policy's refusal naming %s", res.Error.Type, res.Error.Message, want)
			}
		})
	}
	// ctypes reached through an allowed library is native code: refused
	// whoever calls it.
	code := "import numpy.ctypeslib as c\nc.ctypes.CDLL(None).getpid()"
	res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code), Capabilities: denyAll})
	wantStatus(t, res, "error")
	if !strings.Contains(res.Error.Message, "ctypes.dlsym is refused at run time") || !strings.Contains(res.Error.Message, "policy.capabilities.native_code") {
		t.Errorf("ctypes with native code denied: %s: %s, want the policy's refusal", res.Error.Type, res.Error.Message)
	}
	// With native code allowed, ctypes calls libc directly: the kernel
	// still refuses the process (no Python exception to report).
	code = "import numpy.ctypeslib as c\nlibc = c.ctypes.CDLL(None, use_errno=True)\nprint(libc.system(b'true') != 0, c.ctypes.get_errno())"
	res = transient(t, e, executor.Request{Code: code, Imports: gated(t, code), Capabilities: &executor.Capabilities{NativeCode: true}})
	wantStatus(t, res, "ok")
	if res.Stdout != "True 1\n" {
		t.Errorf("libc system() with processes denied: %q, want failure with EPERM", res.Stdout)
	}
}

// TestRunnerStreamsCannotBeReopened: code that calls libc itself (native
// code allowed, so no audit hook stands in the way) cannot open the
// runner's protocol streams again through /proc/1/fd, under any runtime.
// Under runc the runner is non-dumpable and /proc/1/fd is closed; gVisor's
// /proc applies no such check, and the runner's streams have mode 0 (the
// code puts the mode back first). What may open there is harmless:
// /dev/null, the pipes of the worker's own call, the cgroup file the
// runner reads OOM kills from, and the directories it looks paths up from
// (/proc, the writable mounts' tops), which any process opens by path. The runner's memory stays closed under
// both; its environ, maps and auxv are closed under runc and readable
// under runsc (executor/README.md, "gVisor": no secret is in them).
func TestRunnerStreamsCannotBeReopened(t *testing.T) {
	e, _ := newExec(t, nil)
	code := `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
# Directories the runner holds so that it looks paths up from them, not
# from / (/proc and the writable mounts' tops): any process opens them by
# their paths.
tops = ("/proc", "/dev", "/dev/mqueue", "/dev/shm", "/tmp", "/workspace")
reached = []
for n in range(64):
    p = b"/proc/1/fd/%d" % n
    buf = ctypes.create_string_buffer(256)
    k = libc.readlink(p, buf, 255)
    target = buf.raw[:k].decode() if k > 0 else "?"
    libc.chmod(p, 0o666)  # a mode the runner set is put back first
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK, os.O_RDWR | os.O_NONBLOCK):
        fd = libc.open(p, flags)
        if fd >= 0:
            os.close(fd)
            if target not in ("/dev/null",) + tops and not target.startswith(("pipe:", "/sys/fs/cgroup/")):
                reached.append("%d %s %o" % (n, target, flags))
files = []
for name in (b"mem", b"environ", b"maps", b"auxv"):
    fd = libc.open(b"/proc/1/" + name, os.O_RDONLY)
    if fd >= 0:
        os.close(fd)
        files.append(name.decode())
print(reached)
print(files)
`
	want := "[]\n[]\n"
	if configOf(t, e).Docker.Runtime == "runsc" {
		want = "[]\n['environ', 'maps', 'auxv']\n"
	}
	for _, kind := range []string{"transient", "session"} {
		req := executor.Request{Owner: "o", Code: code, Imports: gated(t, code), Capabilities: &executor.Capabilities{NativeCode: true}}
		var res *executor.Result
		if kind == "transient" {
			res = transient(t, e, req)
		} else {
			res, _ = persistent(t, e, "", req)
		}
		wantStatus(t, res, "ok")
		if res.Stdout != want {
			t.Errorf("%s: what libc opened of the runner's (descriptors, then files of /proc/1):\n%s\nwant:\n%s", kind, res.Stdout, want)
		}
	}
}

// TestModuleRulesJudgeCTwinsAndHelpers: blocked modules and their C
// implementations are one module, and library helpers that import a
// string do not import a blocked module for user code; a file name
// proves nothing.
func TestModuleRulesJudgeCTwinsAndHelpers(t *testing.T) {
	e, _ := newExec(t, nil)
	blocked := executor.ModuleRules{Blocked: []string{"subprocess", "socket", "ctypes", "pty", "multiprocessing"}}
	routes := []struct{ name, code string }{
		{"_posixsubprocess", "import _posixsubprocess"},
		{"_socket", "__import__('_socket')"},
		{"_ctypes", "import importlib\nimportlib.import_module('_ctypes')"},
		{"pkgutil.resolve_name", "import pkgutil\npkgutil.resolve_name('subprocess:run')"},
		{"logging.config factory", "import logging.config\nlogging.config.dictConfig({'version': 1, 'handlers': {'h': {'()': 'subprocess.Popen', 'args': ['true']}}, 'root': {'handlers': ['h']}})"},
		{"pickle._loads", "import pickle\npickle._loads(b'csubprocess\\nPopen\\n.')"},
		{"pandas.read_pickle", "import io, pandas\npandas.read_pickle(io.BytesIO(b'csubprocess\\nPopen\\n.'))"},
		{"importlib.util loader", "import importlib.util\ns = importlib.util.spec_from_file_location('x', '/usr/lib/python3.13/subprocess.py')\ns.loader.exec_module(importlib.util.module_from_spec(s))"},
		{"a frozen file name", "exec(compile('import subprocess', '<frozen os>', 'exec'))"},
		{"a library file name", "exec(compile('import subprocess', '/usr/lib/python3.13/os.py', 'exec'))"},
		{"ctypes through numpy", "import numpy.ctypeslib as c\nc.ctypes.CDLL(None)"},
		{"a module written to the workspace", "import importlib\nopen('mine.py', 'w').write('import subprocess\\n')\nimportlib.invalidate_caches()\nimport mine"},
		{"the import system's exec helper", "import importlib._bootstrap as b\nb._call_with_frames_removed(exec, compile('import subprocess', '/usr/lib/python3.13/x.py', 'exec'), {})"},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			res := transient(t, e, executor.Request{Code: rt.code, Imports: gated(t, rt.code), Modules: blocked})
			wantStatus(t, res, "error")
			if !strings.Contains(res.Error.Message, "refused at run time") || !strings.Contains(res.Error.Message, "blocked_modules") {
				t.Errorf("error %s: %s, want a refusal naming blocked_modules", res.Error.Type, res.Error.Message)
			}
		})
	}
	// Libraries keep their own imports, static and internal.
	code := "import numpy as np, pandas as pd\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\npd.DataFrame({'a': np.arange(3)}).a.sum()"
	res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code), Modules: blocked, Capabilities: denyAll})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "np.int64(3)" || len(res.Images) != 1 {
		t.Errorf("libraries with their modules blocked: result %v, %d images", res.Result, len(res.Images))
	}
}

// TestCapabilitiesAllowed: with every class allowed the science stack and
// processes work; with every class denied the science stack still works
// (its native code is the image's, mapped from read-only files), except
// KMeans, which limits BLAS threads through ctypes (threadpoolctl) and
// says native_code is what it needs.
func TestCapabilitiesAllowed(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) { c.Docker.Timeout = config.Duration(2 * time.Minute) })
	code := `import numpy as np, pandas as pd, scipy.linalg
import matplotlib.pyplot as plt
from sklearn.linear_model import LogisticRegression
from sklearn.cluster import KMeans
X = np.random.RandomState(0).randn(200, 3)
y = (X[:, 0] > 0).astype(int)
df = pd.DataFrame(X, columns=list("abc"))
df.plot()
print(LogisticRegression().fit(X, y).score(X, y) > 0.9)
print(df.describe().shape, scipy.linalg.inv(np.eye(3)).sum())
try:
    print(KMeans(3, n_init=2, random_state=0).fit(X).inertia_ > 0)
except PermissionError as e:
    print("policy.capabilities.native_code" in str(e))
`
	all := &executor.Capabilities{Processes: true, Sockets: []string{"unix", "inet", "inet6"}, PTY: true, NativeCode: true}
	for _, tc := range []struct {
		name string
		caps *executor.Capabilities
		more string
		want string
	}{
		{"allowed", all, "import subprocess, os, socket\nprint(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip(), len(os.openpty()), socket.socketpair()[0].family.name)\n", "child 2 AF_UNIX\n"},
		{"denied", denyAll, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := code + tc.more
			res := transient(t, e, executor.Request{Code: src, Imports: gated(t, src), Capabilities: tc.caps})
			wantStatus(t, res, "ok")
			if want := "True\n(8, 3) 3.0\nTrue\n" + tc.want; res.Stdout != want || len(res.Images) != 1 {
				t.Errorf("stdout %q, %d images; want %q and 1 image", res.Stdout, len(res.Images), want)
			}
		})
	}
}

// TestFiguresRenderInsideTheTimeLimit: rendering the figures a call left
// open is part of the call.
func TestFiguresRenderInsideTheTimeLimit(t *testing.T) {
	e, _ := newExec(t, nil)
	code := "import matplotlib.pyplot as plt\nfor i in range(16):\n    plt.figure(dpi=300)\n    plt.scatter(range(200000), range(200000))\nprint('created')"
	res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code), Limits: executor.Limits{Timeout: 3 * time.Second}})
	if res.Stdout != "created\n" {
		t.Skipf("the machine is too slow to create the figures within the limit (stdout %q)", res.Stdout)
	}
	wantStatus(t, res, "timeout")
	if len(res.Images) != 0 {
		t.Errorf("%d images from a call that ran out of time while rendering", len(res.Images))
	}
}

// TestSessionWorkerKeepsItsCapabilities: a session's worker keeps the
// capabilities it started with (a filter can only be tightened); a call
// with other capabilities gets a fresh worker and says so.
func TestSessionWorkerKeepsItsCapabilities(t *testing.T) {
	e, _ := newExec(t, nil)
	res, id := persistent(t, e, "", executor.Request{Owner: "o", Code: "x = 1", Capabilities: denyAll})
	wantStatus(t, res, "ok")
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "x + 1", Capabilities: &executor.Capabilities{Sockets: []string{}}})
	if res.StateLost || res.Result == nil || *res.Result != "2" {
		t.Errorf("same capabilities: state lost %v, result %v; want the session's x", res.StateLost, res.Result)
	}
	code := "import os\nos.getpid() > 0 and 'x' in globals()"
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: code, Imports: gated(t, code), Capabilities: &executor.Capabilities{Processes: true}})
	wantStatus(t, res, "ok")
	if !res.StateLost || res.Result == nil || *res.Result != "False" || !strings.Contains(res.Stderr, "capabilities or module rules differ") {
		t.Errorf("other capabilities: state lost %v, result %v, stderr %q; want a fresh worker that says why", res.StateLost, res.Result, res.Stderr)
	}
}

// TestRunnerIsUnreachable: process 1 is the runner; user code can neither
// read it nor signal it away.
func TestRunnerIsUnreachable(t *testing.T) {
	e, _ := newExec(t, nil)
	code := `import os, signal
def attempt(f):
    try:
        f()
        return "reached"
    except OSError as e:
        return type(e).__name__
print(open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode())
for p in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/1", "/proc/1/maps"):
    print(p, attempt(lambda: open(p, "rb").read(1)))
print("fd list", attempt(lambda: os.listdir("/proc/1/fd")))
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
    os.kill(1, s)
print("signalled")
`
	res, id := persistent(t, e, "", executor.Request{Owner: "o", Code: code, Imports: gated(t, code)})
	wantStatus(t, res, "ok")
	want := "python3\n/proc/1/mem PermissionError\n/proc/1/environ PermissionError\n/proc/1/fd/1 PermissionError\n/proc/1/maps PermissionError\nfd list PermissionError\nsignalled\n"
	if res.Stdout != want {
		t.Errorf("reaching the runner:\n%s\nwant:\n%s", res.Stdout, want)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "o", Code: "attempt.__name__"})
	if res.Status != "ok" || res.StateLost || res.Result == nil || *res.Result != "'attempt'" {
		t.Errorf("after signalling process 1: status %s, state lost %v, result %v; want the session alive", res.Status, res.StateLost, res.Result)
	}
}
