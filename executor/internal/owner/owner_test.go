package owner

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

func TestSelf(t *testing.T) {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	fd := fake.NewDocker()
	fd.SelfID = "c0ffee"
	if id := Self(context.Background(), fd); id.PIDNS != ns || id.Container != "c0ffee" {
		t.Errorf("identity %+v, want pid namespace %q and the backend's container c0ffee", id, ns)
	}
	if id := Self(context.Background(), fake.New()); id.PIDNS != ns || id.Container != "" {
		t.Errorf("identity on a backend without Host %+v, want pid namespace %q and no container", id, ns)
	}
}

// stillHere is a liveness record that knows one live instance, and
// cannot tell about "unsure".
type stillHere struct{ live string }

func (s stillHere) Hold(ctx context.Context, instance string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

func (s stillHere) Alive(ctx context.Context, instance string) (bool, error) {
	if instance == "unsure" {
		return false, errors.New("the API server does not answer")
	}
	return instance == s.live, nil
}

func TestAlive(t *testing.T) {
	ctx := context.Background()
	me := strconv.Itoa(os.Getpid())
	ns, _ := os.Readlink("/proc/self/ns/pid")
	rt := fake.NewDocker()
	rt.SetRunning("live", true)
	rt.SetRunning("dead", false)
	replica := func(container, pidns string) Server {
		return Server{Instance: "other", PID: "1", Host: "h", Identity: Identity{PIDNS: pidns, Container: container}}
	}
	// A server that is itself pid 1 in container "dead" (an earlier run
	// of it, restarted), pid namespace 9, beside replicas that are pid 1
	// too.
	inContainer := &Check{PID: 1, Host: "h", Runtime: rt, Self: Identity{PIDNS: "pid:[9]", Container: "dead"},
		Open: func(instance string) bool { return instance == "open" }}
	onHost := &Check{PID: -1, Host: "h", Self: Identity{PIDNS: ns}}
	for _, tc := range []struct {
		name  string
		check *Check
		s     Server
		want  bool
	}{
		{"an open executor of this process", inContainer, Server{Instance: "open", PID: "1", Identity: Identity{Container: "dead"}}, true},
		{"a running replica, also pid 1", inContainer, replica("live", "pid:[1]"), true},
		{"a replica whose container stopped", inContainer, replica("gone", "pid:[1]"), false},
		{"an earlier run of this container", inContainer, replica("dead", "pid:[8]"), false},
		{"this container and pid namespace, not open", inContainer, replica("dead", "pid:[9]"), false},
		{"a replica without a known container", inContainer, replica("", "pid:[4]"), true},
		{"a server without identity labels, seen from a container", inContainer, replica("", ""), true},
		{"another machine's server", onHost, Server{PID: "1", Host: "elsewhere"}, true},
		{"a server of another pid namespace", onHost, Server{PID: "1", Host: "h", Identity: Identity{PIDNS: "pid:[4]"}}, true},
		{"a live process of this namespace", onHost, Server{PID: me, Host: "h", Identity: Identity{PIDNS: ns}}, true},
		{"a pid that is no process", onHost, Server{PID: "0", Host: "h", Identity: Identity{PIDNS: ns}}, false},
		{"a pid that is not a number", onHost, Server{PID: "x", Host: "h"}, false},
	} {
		if got := tc.check.Alive(ctx, tc.s); got != tc.want {
			t.Errorf("%s: Alive(%+v) = %v, want %v", tc.name, tc.s, got, tc.want)
		}
	}
	// The runtime cannot say about a container: no Runtime.
	if !onHost.Alive(ctx, replica("any", "pid:[1]")) {
		t.Error("a server in a container, on a backend that cannot say whether it runs: Alive = false, want true")
	}

	// Replicas that see each other only through liveness records: the
	// record decides, and not knowing keeps the sandboxes.
	k := &Check{PID: 1, Host: "h", Liveness: stillHere{live: "a"}}
	for _, tc := range []struct {
		instance string
		want     bool
	}{{"a", true}, {"b", false}, {"unsure", true}} {
		if got := k.Alive(ctx, Server{Instance: tc.instance, PID: "1", Host: "h"}); got != tc.want {
			t.Errorf("instance %s with liveness records: Alive = %v, want %v", tc.instance, got, tc.want)
		}
	}
}
