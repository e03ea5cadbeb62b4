package docker_test

import (
	"os"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/owner"
)

// TestReaperTellsReplicasApart plays servers running as containers on one
// daemon (replicas: the same hostname with host networking, and pid 1 in
// every container). A new executor must remove only the leftovers of a
// replica whose container is gone, never those of one that runs, nor
// those whose owner it cannot check.
func TestReaperTellsReplicasApart(t *testing.T) {
	cfg := config.Default()
	cli := dockertest.RequireDaemon(t, cfg.Docker.Image)
	ctx := tctx(t, 2*time.Minute)
	host, _ := os.Hostname()
	create := func(labels map[string]string, cmd ...string) string {
		return leftover(ctx, t, cli, cfg.Docker.Image, labels, cmd...)
	}
	exists := func(id string) bool { return containerExists(ctx, cli, id) }
	// Two "server containers": one running, one stopped (its server crashed).
	liveServer := create(map[string]string{}, "python3", "-c", "import time; time.sleep(300)")
	if err := cli.Start(ctx, liveServer); err != nil {
		t.Fatal(err)
	}
	deadServer := create(map[string]string{}, "python3", "-c", "pass")

	replica := func(server, pidns string) map[string]string {
		return map[string]string{backend.LabelKind: backend.KindTransient, backend.LabelPID: "1", backend.LabelHost: host, backend.LabelInstance: randomHex(8),
			executor.LabelServer: server, executor.LabelPIDNS: pidns}
	}
	ofLive := create(replica(liveServer, "pid:[1]"), "python3", "-c", "pass")
	ofDead := create(replica(deadServer, "pid:[2]"), "python3", "-c", "pass")
	ofGone := create(replica("0000000000000000000000000000000000000000000000000000000000000000", "pid:[3]"), "python3", "-c", "pass")
	// A server in another pid namespace whose container is unknown: its
	// pid 1 says nothing about it here.
	unknown := replica("", "pid:[4]")
	delete(unknown, executor.LabelServer)
	ofUnknown := create(unknown, "python3", "-c", "pass")

	e, _ := newExec(t, nil)
	for name, c := range map[string]struct {
		id   string
		want bool
	}{
		"running replica's sandbox":        {ofLive, true},
		"stopped replica's sandbox":        {ofDead, false},
		"removed replica's sandbox":        {ofGone, false},
		"sandbox of another pid namespace": {ofUnknown, true},
	} {
		if got := exists(c.id); got != c.want {
			t.Errorf("%s: exists after New = %v, want %v", name, got, c.want)
		}
	}

	// Seen from a server that is itself pid 1 in a container (where the
	// old host+pid rule took every replica's pid 1 for its own), whose
	// open executor is e.
	open := func(instance string) bool { return instance == e.Instance() }
	check := &owner.Check{PID: 1, Host: host, Open: open, Runtime: docker.New(cli.Client), Self: owner.Identity{PIDNS: "pid:[9]", Container: deadServer}}
	for name, c := range map[string]struct {
		labels map[string]string
		want   bool
	}{
		"a running replica, also pid 1":            {replica(liveServer, "pid:[1]"), true},
		"an earlier run of this container":         {replica(deadServer, "pid:[8]"), false},
		"this container and pid namespace, closed": {replica(deadServer, "pid:[9]"), false},
		"a replica without a known container":      {unknown, true},
	} {
		if got := check.Alive(ctx, ownerOf(c.labels)); got != c.want {
			t.Errorf("%s: alive = %v, want %v", name, got, c.want)
		}
	}
}

// ownerOf is what a sandbox's labels say about the server that made it,
// as the executor's reaper reads them.
func ownerOf(l map[string]string) owner.Server {
	return owner.Server{Instance: l[backend.LabelInstance], PID: l[backend.LabelPID], Host: l[backend.LabelHost],
		Identity: owner.Identity{PIDNS: l[executor.LabelPIDNS], Container: l[executor.LabelServer]}}
}
