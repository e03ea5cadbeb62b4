package executor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestMain fails the suite when a sandbox started by this test process is
// still there after every test ran (and removes it).
func TestMain(m *testing.M) {
	code := m.Run()
	if d := dockertest.Reachable(); d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if left := leftovers(ctx, d); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d sandbox container(s) left after the suite: %v\n", len(left), left)
			for _, id := range left {
				d.Remove(ctx, id)
			}
			code = 1
		}
		if vols, _ := d.Volumes(ctx, ownLabel()); len(vols) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d package volume(s) left after the suite: %v\n", len(vols), vols)
			for _, v := range vols {
				d.RemoveVolume(ctx, v)
			}
			code = 1
		}
		cancel()
		d.Close()
	}
	os.Exit(code)
}

// ownLabel selects what this test process created.
func ownLabel() string {
	return backend.LabelPID + "=" + strconv.Itoa(os.Getpid())
}

// leftovers are the containers of this test process.
func leftovers(ctx context.Context, d *dockertest.Daemon) (ids []string) {
	list, err := d.Containers(ctx, false, ownLabel())
	if err != nil {
		return nil
	}
	for _, c := range list {
		ids = append(ids, c.ID[:12])
	}
	return ids
}

// newExec starts an executor on the real daemon with the default config,
// changed by edit, and closes it when the test ends.
func newExec(t testing.TB, edit func(*config.Config)) (*Executor, *dockertest.Daemon) {
	t.Helper()
	cfg := config.Default()
	cli := dockertest.RequireDaemon(t, cfg.Docker.Image)
	cfg.Pool.Enabled = false // pool tests turn it on
	// make test-gvisor runs these tests under runsc: the server's own
	// environment variable for docker.runtime.
	cfg.Docker.Runtime = os.Getenv("PYTHON_DOCKER_MCP_DOCKER_RUNTIME")
	if edit != nil {
		edit(&cfg)
	}
	e, err := newDocker(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e, cli
}

// newDocker is an executor on the Docker backend (docker.Open), as the
// server makes it.
func newDocker(ctx context.Context, cfg config.Config) (*Executor, error) {
	b, err := docker.Open(ctx, nil)
	if err != nil {
		return nil, err
	}
	return NewWithBackend(ctx, ConfigFrom(cfg), b, nil)
}

// dockerOf is e's Docker backend.
func dockerOf(t testing.TB, e *Executor) *docker.Backend {
	t.Helper()
	b, ok := e.be.(*docker.Backend)
	if !ok {
		t.Fatalf("the executor's backend is %T, want *docker.Backend", e.be)
	}
	return b
}

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
