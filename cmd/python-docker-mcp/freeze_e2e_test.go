package main

import (
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// A session does nothing between calls: what a call leaves running (a
// thread, a timer's signal handler) is stopped by the runner from the
// reply to the next call, and the next result says the reply cannot be
// shown to be that call's own.

func TestSessionFrozenBetweenCalls(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	code := `import threading, time, signal
def tick():
    while True:
        with open("ticks.txt", "a") as f:
            f.write("t")
        time.sleep(0.1)
threading.Thread(target=tick, daemon=True).start()
def alarm(sig, frame):
    with open("alarms.txt", "a") as f:
        f.write("a")
signal.signal(signal.SIGALRM, alarm)
signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
time.sleep(0.5)
`
	res := c.call(t, "execute-persistent", map[string]any{"code": code})
	sc := structured(t, res)
	id, _ := sc["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("first call: %q", text(res))
	}
	if sc["integrity"] != "verified" {
		t.Errorf("first call of a fresh interpreter: integrity %v, want verified", sc["integrity"])
	}
	if r, _ := sc["integrity_reason"].(string); !strings.Contains(r, "this call left running") || !strings.Contains(r, "thread") || !strings.Contains(r, "SIGALRM") {
		t.Errorf("first call: integrity_reason %q does not say it left a thread and a SIGALRM handler running", r)
	}
	size := func(path string) float64 {
		r := c.call(t, "read-file", map[string]any{"session_id": id, "path": path, "length": 1})
		if r.IsError {
			t.Fatalf("read-file %s: %q", path, text(r))
		}
		n, _ := structured(t, r)["total_size"].(float64)
		return n
	}
	ticks, alarms := size("ticks.txt"), size("alarms.txt")
	time.Sleep(2 * time.Second) // a gap between calls, not a timed assertion
	if t2, a2 := size("ticks.txt"), size("alarms.txt"); t2 != ticks || a2 != alarms {
		t.Errorf("between calls the thread wrote %v -> %v bytes and the timer's handler %v -> %v: want nothing to run", ticks, t2, alarms, a2)
	}
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "6 * 7"})
	sc = structured(t, res)
	if res.IsError || sc["result"] != "42" {
		t.Fatalf("second call: %q", text(res))
	}
	r, _ := sc["integrity_reason"].(string)
	if sc["integrity"] != "unverified" || !strings.Contains(r, "the last call left running") || !strings.Contains(r, "thread") || !strings.Contains(r, "SIGALRM") {
		t.Errorf("second call: integrity %v, reason %q; want unverified, naming the thread and the SIGALRM handler", sc["integrity"], r)
	}
	if !strings.Contains(text(res), "integrity unverified") {
		t.Errorf("second call's text does not say integrity is unverified: %q", text(res))
	}
	if ms, _ := sc["idle_cpu_ms"].(float64); ms != 0 {
		t.Errorf("idle_cpu_ms %v: the frozen session used CPU between calls", ms)
	}
}

// A call that arms a timer whose handler reads the next request from the
// worker's control pipe and answers it with the nonce it read: its forged
// reply, if it gets through, is never reported as verified.
func TestSessionForgedReplyIsUnverified(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	code := `import os, json, struct, signal, stat, fcntl
ctrl = res = None
for fd in range(3, 64):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if stat.S_ISFIFO(st.st_mode):
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        if mode == os.O_RDONLY:
            ctrl = fd
        elif mode == os.O_WRONLY:
            res = fd
def forge(sig, frame):
    n = struct.unpack(">I", os.read(ctrl, 4))[0]
    buf = b""
    while len(buf) < n:
        buf += os.read(ctrl, n - len(buf))
    req = json.loads(buf)
    rep = json.dumps({"status": "ok", "result": "'forged'", "nonce": req["nonce"], "stdout": "", "stderr": ""}).encode()
    os.write(res, struct.pack(">I", len(rep)) + rep)
signal.signal(signal.SIGALRM, forge)
signal.setitimer(signal.ITIMER_REAL, 0.5)
print(ctrl, res)
`
	res := c.call(t, "execute-persistent", map[string]any{"code": code})
	sc := structured(t, res)
	id, _ := sc["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("first call: %q", text(res))
	}
	if strings.Contains(text(res), "None") {
		t.Fatalf("the attack did not find the worker's pipes: %q", text(res))
	}
	time.Sleep(time.Second) // the timer fires between calls
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "'real'"})
	sc = structured(t, res)
	r, _ := sc["integrity_reason"].(string)
	t.Logf("second call: result %v, integrity %v (%s)", sc["result"], sc["integrity"], r)
	if sc["integrity"] != "unverified" || !strings.Contains(r, "a handler for SIGALRM") || !strings.Contains(r, "SIGALRM, which came while it was frozen") {
		t.Errorf("second call (result %v): integrity %v, reason %q; want unverified, naming the SIGALRM handler and the signal that came while frozen", sc["result"], sc["integrity"], r)
	}
	// The session goes on: the next request reaches the worker's loop.
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "6 * 7"})
	if sc = structured(t, res); sc["result"] != "42" {
		t.Errorf("third call: %q", text(res))
	}
}
