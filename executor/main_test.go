package executor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestMain fails the suite when a sandbox started by this test process is
// still there after every test ran (and removes it).
func TestMain(m *testing.M) {
	code := m.Run()
	if left := leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d sandbox container(s) left after the suite: %v\n", len(left), left)
		cli, err := client.New(client.FromEnv)
		if err == nil {
			for _, id := range left {
				cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
		code = 1
	}
	if vols := leftoverVolumes(); len(vols) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d package volume(s) left after the suite: %v\n", len(vols), vols)
		if cli, err := client.New(client.FromEnv); err == nil {
			for _, v := range vols {
				cli.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
			}
		}
		code = 1
	}
	os.Exit(code)
}

// ownLabel selects what this test process created.
func ownLabel() client.Filters {
	return make(client.Filters).Add("label", LabelPID+"="+strconv.Itoa(os.Getpid()))
}

// withDaemon calls fn with a client of a reachable daemon, or not at all.
func withDaemon(fn func(ctx context.Context, cli *client.Client)) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return
	}
	fn(ctx, cli)
}

// leftovers are the containers of this test process.
func leftovers() (ids []string) {
	withDaemon(func(ctx context.Context, cli *client.Client) {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: ownLabel()})
		if err != nil {
			return
		}
		for _, c := range list.Items {
			ids = append(ids, c.ID[:12])
		}
	})
	return ids
}

// leftoverVolumes are the package volumes of this test process.
func leftoverVolumes() (names []string) {
	withDaemon(func(ctx context.Context, cli *client.Client) {
		list, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: ownLabel()})
		if err != nil {
			return
		}
		for _, v := range list.Items {
			names = append(names, v.Name)
		}
	})
	return names
}

// newExec starts an executor on the real daemon with the default config,
// changed by edit, and closes it when the test ends.
func newExec(t testing.TB, edit func(*config.Config)) (*Executor, *client.Client) {
	t.Helper()
	cfg := config.Default()
	cli := dockertest.RequireImage(t, cfg.Docker.Image)
	cfg.Pool.Enabled = false // pool tests turn it on
	// make test-gvisor runs these tests under runsc: the server's own
	// environment variable for docker.runtime.
	cfg.Docker.Runtime = os.Getenv("PYTHON_DOCKER_MCP_DOCKER_RUNTIME")
	if edit != nil {
		edit(&cfg)
	}
	e, err := New(context.Background(), ConfigFrom(cfg))
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

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
