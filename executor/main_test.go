package executor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestMain fails the suite when a sandbox or package volume started by
// this test process is still there after every test ran.
func TestMain(m *testing.M) { dockertest.Main(m) }

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

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
