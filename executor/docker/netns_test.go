package docker_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// netCode prints the run's network namespace, then what it was asked to
// check on 127.0.0.1:port ("listen" for a while, "connect", "bind"), with
// the host clock's times around it.
func netCode(port int, what string) string {
	return `import os, socket, time
print("ns", os.readlink("/proc/self/ns/net"))
s = socket.socket()
if "` + what + `" == "listen":
    s.bind(("127.0.0.1", ` + strconv.Itoa(port) + `)); s.listen()
    print("from", time.time()); time.sleep(15); print("to", time.time())
elif "` + what + `" == "connect":
    print("at", time.time())
    try:
        s.connect(("127.0.0.1", ` + strconv.Itoa(port) + `)); print("connected")
    except ConnectionRefusedError:
        print("refused")
else:
    s.bind(("127.0.0.1", ` + strconv.Itoa(port) + `)); s.listen(); print("bound")
`
}

// netField is the value after key in a netCode output.
func netField(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return v
		}
	}
	t.Fatalf("no %q in output %q", key, out)
	return ""
}

func netTime(t *testing.T, out, key string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(netField(t, out, key), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A sandbox leases the namespace of a holder container; one sandbox at a
// time uses it, and the next one finds nothing of the previous one there.
func TestNetworkLease(t *testing.T) {
	e, cli := newExec(t, nil)
	holders := func() int { return dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork) }

	// A listener that a run left in its namespace is gone for the next run
	// of the same namespace, which can bind the same port. (A run's
	// container is removed after the call returns; the namespace is
	// leased again once it is.)
	gone := func() {
		if n := dockertest.Settled(t, cli, backend.LabelKind+"="+backend.KindTransient); n != 0 {
			t.Fatalf("%d transient containers 10 s after the call", n)
		}
		for deadline := time.Now().Add(10 * time.Second); dockerOf(t, e).Idle() != holders(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d holders idle 10 s after their sandboxes went", dockerOf(t, e).Idle(), holders())
			}
		}
	}
	a := transient(t, e, netReq(t, 45679, "bind"))
	wantStatus(t, a, "ok")
	gone()
	b := transient(t, e, netReq(t, 45679, "connect"))
	wantStatus(t, b, "ok")
	if netField(t, a.Stdout, "ns") != netField(t, b.Stdout, "ns") {
		t.Errorf("back-to-back runs in namespaces %s and %s: the holder was not reused", netField(t, a.Stdout, "ns"), netField(t, b.Stdout, "ns"))
	}
	if !strings.Contains(b.Stdout, "refused") {
		t.Errorf("the previous run's listener answered in the next run: %q", b.Stdout)
	}
	gone()
	c := transient(t, e, netReq(t, 45679, "bind"))
	wantStatus(t, c, "ok")
	gone()
	if n := holders(); n != 1 {
		t.Errorf("%d holders after three calls one after another, want 1", n)
	}

	// Two runs at once have two namespaces: the second cannot reach the
	// first one's listener while it listens.
	var wg sync.WaitGroup
	var listener *executor.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := e.Transient(tctx(t, 2*time.Minute), netReq(t, 45680, "listen"))
		if err != nil {
			t.Errorf("listener: %v", err)
			return
		}
		listener = res
	}()
	var other *executor.Result
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if n := dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindTransient); n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	other = transient(t, e, netReq(t, 45680, "connect"))
	wg.Wait()
	if listener == nil {
		t.FailNow()
	}
	wantStatus(t, listener, "ok")
	wantStatus(t, other, "ok")
	at, from, to := netTime(t, other.Stdout, "at"), netTime(t, listener.Stdout, "from"), netTime(t, listener.Stdout, "to")
	if at < from || at > to {
		t.Fatalf("the connect (%.3f) did not happen while the other run listened (%.3f to %.3f): timing too loose to judge", at, from, to)
	}
	if netField(t, other.Stdout, "ns") == netField(t, listener.Stdout, "ns") {
		t.Errorf("two runs at once share namespace %s", netField(t, other.Stdout, "ns"))
	}
	if !strings.Contains(other.Stdout, "refused") {
		t.Errorf("a run reached another run's listener: %q", other.Stdout)
	}
	gone()
	if n := holders(); n != 2 {
		t.Errorf("%d holders after two runs at once, want 2", n)
	}

	// A holder killed from outside is replaced: the next run still runs,
	// and the dead holder is not left behind.
	list, err := cli.Containers(context.Background(), false, dockertest.OwnLabel(), backend.LabelKind+"="+backend.KindNetwork)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range list {
		if err := cli.Kill(context.Background(), h.ID, "KILL"); err != nil {
			t.Fatal(err)
		}
	}
	d := transient(t, e, netReq(t, 45681, "bind"))
	wantStatus(t, d, "ok")
	running, err := cli.Containers(context.Background(), true, dockertest.OwnLabel(), backend.LabelKind+"="+backend.KindNetwork)
	if err != nil {
		t.Fatal(err)
	}
	if n := holders(); n != len(running) {
		t.Errorf("%d holders, %d of them running: dead holders left behind", n, len(running))
	}
}

func netReq(t *testing.T, port int, what string) executor.Request {
	code := netCode(port, what)
	return executor.Request{Code: code, Imports: gated(t, code)}
}

// TestNetworkHoldersReady: with the pool on, the executor starts holders
// while it has nothing else to start, up to holderFloor and no more, so a
// burst's cold starts lease one instead of starting it; Close removes them.
func TestNetworkHoldersReady(t *testing.T) {
	e, cli := poolExec(t, 1)
	floor := holderFloor(configOf(t, e))
	if floor < 2 {
		t.Fatalf("holder floor %d", floor)
	}
	deadline := time.Now().Add(time.Minute)
	for dockerOf(t, e).Idle() < floor {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle holders a minute after the pool filled, want %d", dockerOf(t, e).Idle(), floor)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if n := dockerOf(t, e).Idle(); n != floor {
		t.Errorf("%d idle holders with nothing running, want the floor %d", n, floor)
	}
	// Cold starts (tighter limits than the pool's) lease ready holders.
	before := dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork)
	t.Logf("idle %d, all %d, sandboxes %d", dockerOf(t, e).Idle(), dockerOf(t, e).Holders(), dockertest.Ours(t, cli, ""))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "print(1)", Limits: executor.Limits{Memory: 200 << 20}})
			if err != nil || res.Status != "ok" {
				t.Errorf("cold call: %v %+v", err, res)
			}
		}()
	}
	wg.Wait()
	if transientMisses(e) < 2 {
		t.Errorf("%d pool misses, want the 2 calls started cold", transientMisses(e))
	}
	t.Logf("holders: %d before the cold calls, %d after", before, dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork))
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork); n != 0 {
		t.Errorf("%d holders after Close", n)
	}
}

// TestNetworkLeaseFallback: when no holder can be started, a sandbox gets a
// network namespace of its own (as without leasing) and the call runs.
func TestNetworkLeaseFallback(t *testing.T) {
	e, cli := newExec(t, nil)
	restore := docker.HolderCommand([]string{"/nonexistent/holder"})
	t.Cleanup(restore)
	res := transient(t, e, netReq(t, 45682, "bind"))
	wantStatus(t, res, "ok")
	if !strings.Contains(res.Stdout, "bound") {
		t.Errorf("run without a holder: %q", res.Stdout)
	}
	if n := dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork); n != 0 {
		t.Errorf("%d holders left after failed starts, want 0", n)
	}
	restore()
	res = transient(t, e, netReq(t, 45682, "bind"))
	wantStatus(t, res, "ok")
	if n := dockertest.Ours(t, cli, backend.LabelKind+"="+backend.KindNetwork); n != 1 {
		t.Errorf("%d holders once they start again, want 1", n)
	}
}

// holderFloor is how many idle holders an executor with configuration c
// keeps ready while it has nothing else to start (the executor's
// holderFloor): enough for the creations its pools run at once plus calls
// that start cold, within the most it keeps idle (pool.max_size plus
// those creations, at least 4).
func holderFloor(c config.Config) int {
	return min(2*c.Pool.MaxConcurrentCreations+2, max(c.Pool.MaxSize+c.Pool.MaxConcurrentCreations, 4))
}

// transientMisses is how many calls e's transient pool could not serve.
func transientMisses(e *executor.Executor) int64 {
	for _, p := range e.Stats().Pools {
		if p.Kind == backend.KindTransient {
			return p.Misses
		}
	}
	return 0
}
