package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// sandboxIDCode prints, on its own first line, an id of the container the
// code runs in (the hostname is "sandbox" in every one): its root mount's
// line names the container's own overlay layer (under runc; gVisor's
// mountinfo names none).
const sandboxIDCode = "import hashlib as _h\nprint(_h.sha1(([l for l in open('/proc/self/mountinfo') if l.split()[4] == '/'][0] ).encode()).hexdigest()[:12], flush=True)\ndel _h\n"

// reuseArgs: every capability class, so that calls can leave processes,
// sockets and System V objects behind; one kept sandbox per principal, so
// that a principal's calls one after another all run in it (with more, a
// call that finds its sandbox still being reset on a loaded machine takes
// another).
var reuseArgs = []string{
	"--set", "policy.capabilities.processes=true", "--set", "policy.capabilities.sockets=true",
	"--set", "policy.capabilities.native_code=true", "--set", "pool.reuse=principal",
	"--set", "pool.max_per_principal=1",
}

// leftBehind are things call N of a principal leaves for call N+1 in the
// same sandbox. look prints what call N+1 finds; it must print the same
// before and after leave ran.
var leftBehind = []struct {
	name, leave, look string
}{
	{"files in every writable path", `
import os, socket
for m in [l.split()[4] for l in open('/proc/self/mountinfo') if 'rw' in l.split()[5].split(',')]:
    if m.startswith(('/proc', '/sys')) or not os.access(m, os.W_OK):
        continue
    for make in (lambda: os.makedirs(m + '/left/deep'), lambda: open(m + '/left/deep/file', 'w').write('x'),
                 lambda: open(m + '/left.txt', 'w').write('x'), lambda: os.symlink('/etc/passwd', m + '/left.link'),
                 lambda: os.mkfifo(m + '/left.fifo'), lambda: socket.socket(socket.AF_UNIX).bind(m + '/left.sock'),
                 lambda: os.chmod(m + '/left', 0)):
        try:
            make()
            print('left in', m)
        except OSError as e:
            print('not in', m, e)`, `
import os
for m in sorted(l.split()[4] for l in open('/proc/self/mountinfo') if 'rw' in l.split()[5].split(',')):
    if m.startswith(('/proc', '/sys')):
        continue
    for root, dirs, files in os.walk(m):
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(root, d))]
        print(root, sorted(dirs), sorted(files))`},
	{"a background process and a daemonised grandchild", `
import subprocess
subprocess.Popen(['sleep', '1000'])
subprocess.Popen(['sh', '-c', 'setsid sleep 1001 & exit 0'], start_new_session=True).wait()
print('left')`, `
import os
me = os.getpid()
for p in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):
    if p in (1, me):
        continue
    try:
        print(p, open('/proc/%d/cmdline' % p, 'rb').read().replace(b'\0', b' '))
    except OSError:
        pass
print('processes listed')`},
	{"a process whose first thread ended while another runs on", `
import subprocess, time
# pthread_exit in the first thread: /proc shows the process as a zombie
# while its other thread goes on writing.
subprocess.Popen(['python3', '-c', """import ctypes, threading, time
def write():
    while True:
        open('/tmp/pdm-thread-left', 'w').write(str(time.time()))
        time.sleep(0.02)
threading.Thread(target=write).start()
time.sleep(0.1)
ctypes.CDLL(None).pthread_exit(None)"""])
time.sleep(0.5)
print('left', open('/tmp/pdm-thread-left').read() != '')`, `
import os, time
time.sleep(0.3)  # a writer left behind would have written by now
me = os.getpid()
print(sorted(os.listdir('/tmp')), sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)))`},
	{"System V shared memory, semaphores and message queues", `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
assert libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o666) >= 0
assert libc.shmget(0x1234, 4096, IPC_CREAT | 0o666) >= 0
assert libc.semget(0x1235, 1, IPC_CREAT | 0o666) >= 0
assert libc.msgget(0x1236, IPC_CREAT | 0o666) >= 0
print(open('/proc/sysvipc/shm').read())`, `
for k in ('shm', 'sem', 'msg'):
    print(k, open('/proc/sysvipc/' + k).read().splitlines()[1:])`},
	{"an abstract unix socket", `
import socket, subprocess
s = socket.socket(socket.AF_UNIX)
s.bind('\0pdm-left')
s.listen()
subprocess.Popen(['python3', '-c', "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0pdm-left-child')\ns.listen()\ntime.sleep(1000)"])
import time; time.sleep(0.3)
print('left')`, `
import socket
print(sorted(l.split()[-1] for l in open('/proc/net/unix').read().splitlines()[1:] if l.split()[-1].startswith('@')))
for name in ('\0pdm-left', '\0pdm-left-child'):
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)  # free again
    s.close()
print('bound')`},
	{"environment, working directory and umask", `
import os
os.environ['PDM_LEFT'] = '1'
os.putenv('PDM_LEFT_PUT', '1')
os.chdir('/tmp')
os.umask(0o777)
print('left')`, `
import os
u = os.umask(0o022); os.umask(u)
print(sorted(os.environ.items()), os.getcwd(), oct(u))`},
	{"signal handlers", `
import signal
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD):
    signal.signal(s, lambda *a: print('handler left behind ran'))
signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)
print('left')`, `
import signal, time
time.sleep(0.8)  # a timer left behind would fire now
print([(s.name, repr(signal.getsignal(s))) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD)], signal.getitimer(signal.ITIMER_REAL))`},
	{"monkeypatched modules, sys.modules and builtins", `
import json, sys, builtins, os.path, types
json.dumps = lambda *a, **k: 'patched'
os.path.join = lambda *a: 'patched'
sys.modules['pdm_left'] = types.ModuleType('pdm_left')
builtins.PDM_LEFT = 1
builtins.abs = lambda x: 'patched'
print('left')`, `
import json, sys, builtins, os.path
print(json.dumps({'a': 1}), os.path.join('a', 'b'), 'pdm_left' in sys.modules, hasattr(builtins, 'PDM_LEFT'), abs(-1))`},
	{"threads left running", `
import threading, time
for _ in range(3):
    threading.Thread(target=lambda: time.sleep(1000), daemon=True).start()
threading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(int, 1)]).start()
print('left')`, `
import os, threading
print(threading.active_count(), len(os.listdir('/proc/self/task')))`},
	{"open descriptors", `
import os
fd = os.open('/tmp/pdm-fd', os.O_CREAT | os.O_RDWR)
os.dup2(fd, 100, inheritable=True)
r, w = os.pipe()
os.set_inheritable(r, True)
print('left')`, `
import os
import re
print(sorted((int(fd), re.sub(r'\[\d+\]', '', os.readlink('/proc/self/fd/' + fd))) for fd in os.listdir('/proc/self/fd') if os.path.exists('/proc/self/fd/' + fd)))`},
	{"resource limits", `
import resource
for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_CORE, resource.RLIMIT_STACK):
    soft, hard = resource.getrlimit(r)
    resource.setrlimit(r, (min(soft, 64) if soft != resource.RLIM_INFINITY else 64, min(hard, 64) if hard != resource.RLIM_INFINITY else 64))
print('left')`, `
import resource
print([(n, resource.getrlimit(getattr(resource, n))) for n in sorted(dir(resource)) if n.startswith('RLIMIT_')])`},
}

// sameSandbox runs code for one principal and returns the sandbox id and
// the rest of stdout, failing on anything but status ok.
func inSandbox(t *testing.T, call func(code string) *sdk.CallToolResult, code string) (string, string) {
	t.Helper()
	res := call(sandboxIDCode + code + "\nprint('--end--')")
	sc := structured(t, res)
	if res.IsError || sc["status"] != "ok" {
		t.Fatalf("status %v:\n%s", sc["status"], text(res))
	}
	id, rest, _ := strings.Cut(stdoutOf(res), "\n")
	return id, rest
}

// stdoutOf is the stdout a result's text shows, up to a line --end-- the
// code printed last (the text goes on with notes after stdout).
func stdoutOf(res *sdk.CallToolResult) string {
	_, out, _ := strings.Cut(text(res), "--- stdout ---\n")
	out, _, _ = strings.Cut(out, "--end--")
	return out
}

// TestReuseLeavesNothing drives the built server over stdio with every
// capability class allowed: for each thing in leftBehind, call N of the
// principal looks, call N+1 leaves it, call N+2 looks again, all in the
// same sandbox (the test checks they were), and call N+2 must see what
// call N saw.
func TestReuseLeavesNothing(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", reuseArgs)
	call := func(code string) *sdk.CallToolResult {
		return c.call(t, "execute-transient", map[string]any{"code": code})
	}
	for _, tt := range leftBehind {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			id0, before := inSandbox(t, call, tt.look)
			id1, left := inSandbox(t, call, tt.leave)
			id2, after := inSandbox(t, call, tt.look)
			if id0 != id1 || id1 != id2 {
				t.Fatalf("the calls ran in sandboxes %s, %s, %s: want one kept sandbox (leave printed %q)", id0, id1, id2, left)
			}
			if after != before {
				t.Errorf("the next call of the same principal found what the last one left:\nbefore: %s\nafter:  %s", before, after)
			}
		})
	}
}

// TestReuseFreshRandomStreams: calls of one principal in one sandbox each
// draw their own random and numpy.random streams, though both generators
// were seeded once, in the runner that forks every call's process (the
// pool preloads them; the test checks they were).
//
// The calls import exactly pool.preload's class (numpy.random, which
// imports random), so every pooled sandbox has both and the pool learns
// no other class for them: a class of numpy alone (what `import numpy`
// makes) would lack both, since numpy 2 imports numpy.random lazily, and a
// kept sandbox of it would show nothing.
func TestReuseFreshRandomStreams(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", append([]string{"--set", "pool.preload=numpy.random"}, reuseArgs...))
	call := func(code string) *sdk.CallToolResult {
		return c.call(t, "execute-transient", map[string]any{"code": code})
	}
	const code = "import sys\npreloaded = ('numpy.random' in sys.modules, 'random' in sys.modules)\nimport random, numpy.random\nprint(random.random(), numpy.random.random(), random.getrandbits(64), preloaded)"
	for i := 0; i < 3; i++ {
		inSandbox(t, call, code) // a pooled sandbox is kept for the principal
	}
	// Six calls in preloaded sandboxes, out of at most twelve: under a
	// heavy load a call may take a cold sandbox the pool could not preload
	// in time; its streams are checked too, but it does not count.
	ids, seen, preloaded := map[string]int{}, map[string]bool{}, 0
	for i := 0; i < 12 && preloaded < 6; i++ {
		id, out := inSandbox(t, call, code)
		t.Logf("call %d in %s: %s", i, id, out)
		if strings.HasSuffix(strings.TrimSpace(out), "(True, True)") {
			preloaded++
			ids[id]++
		}
		for j, v := range strings.Fields(out)[:3] {
			if seen[fmt.Sprint(j, v)] {
				t.Errorf("call %d drew %s from stream %d, as an earlier call did", i, v, j)
			}
			seen[fmt.Sprint(j, v)] = true
		}
	}
	if preloaded < 6 {
		t.Fatalf("%d of 12 calls ran with random and numpy.random imported before them: this test shows nothing", preloaded)
	}
	most := 0
	for _, n := range ids {
		most = max(most, n)
	}
	if most < 3 {
		t.Errorf("six preloaded calls ran in sandboxes %v: want three or more in one kept sandbox, or this test shows nothing", ids)
	}
}

// TestReuseRetiresOnTimeoutOOMAndForgery: a call that times out, runs out
// of memory, or sends a reply the runner rejects removes its sandbox; the
// principal's next call runs in another.
func TestReuseRetiresOnTimeoutOOMAndForgery(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", reuseArgs)
	// Only the timeout case needs a short limit: on a slow machine,
	// filling 2 GiB up to the memory limit can take longer than 2 s.
	for _, tt := range []struct {
		name, code, status string
		timeout            int
	}{
		{"timeout", "while True: pass", "timeout", 2},
		{"oom", "x = bytearray(2 << 30)", "oom", 30},
		{"a forged reply", "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\x00\\x00\\x00\\x05junk!')\n    except OSError:\n        pass", "killed", 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			call := func(code string) *sdk.CallToolResult {
				return c.call(t, "execute-transient", map[string]any{"code": code, "timeout": tt.timeout})
			}
			id0, _ := inSandbox(t, call, "")
			id1, _ := inSandbox(t, call, "")
			if id0 != id1 {
				t.Fatalf("two calls ran in %s and %s: want one kept sandbox", id0, id1)
			}
			res := call(sandboxIDCode + tt.code)
			sc := structured(t, res)
			if sc["status"] != tt.status {
				t.Fatalf("status %v, want %s:\n%s", sc["status"], tt.status, text(res))
			}
			if id, _, _ := strings.Cut(stdoutOf(res), "\n"); id != id1 {
				t.Fatalf("the %s call ran in %q, want the kept sandbox %s", tt.name, id, id1)
			}
			if id3, _ := inSandbox(t, call, ""); id3 == id1 {
				t.Errorf("the call after a %s ran in the same sandbox %s: want it retired", tt.name, id1)
			}
		})
	}
}

// TestReuseNeverAcrossSubjects: over HTTP with two JWT subjects calling at
// the same time, each subject's calls reuse its own sandboxes and never
// land in one the other subject's calls used.
func TestReuseNeverAcrossSubjects(t *testing.T) {
	_, token, connect := quotaServer(t, reuseArgs...)
	seen := map[string]map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sub := range []string{"alice", "bob"} {
		cs, err := connect(token(sub), "")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		seen[sub] = map[string]int{}
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 15; i++ {
					res := callTool(t, cs, "execute-transient", map[string]any{"code": sandboxIDCode + "print('--end--')"})
					sc := structured(t, res)
					out := stdoutOf(res)
					if res.IsError || sc["status"] != "ok" {
						t.Errorf("%s: %s", sub, text(res))
						return
					}
					mu.Lock()
					seen[sub][strings.TrimSpace(out)]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for id := range seen["alice"] {
		if seen["bob"][id] > 0 {
			t.Errorf("sandbox %s served alice %d and bob %d calls", id, seen["alice"][id], seen["bob"][id])
		}
	}
	for sub, ids := range seen {
		most := 0
		for _, n := range ids {
			most = max(most, n)
		}
		if most < 2 {
			t.Errorf("%s's 30 calls ran in %d sandboxes, none twice: reuse did not happen, so this test shows nothing (%v)", sub, len(ids), ids)
		}
		t.Logf("%s: %d calls in %d sandboxes", sub, 30, len(ids))
	}
}
