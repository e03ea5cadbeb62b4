package docker_test

// The executor on this backend: tests of what only the real daemon and the
// real sandbox show (limits Docker enforces, the network namespaces'
// holders, package installs, the runtimes, isolation inside a container),
// driving the executor through its exported API. The executor's own logic
// is tested on the fake backend, in package executor.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// TestMain fails the suite when a container or package volume started by
// this test process is still there after every test ran.
func TestMain(m *testing.M) { dockertest.Main(m) }

// made is what newDocker knows of an executor it started: its Docker
// backend and the configuration it was given.
type made struct {
	b   *docker.Backend
	cfg config.Config
}

// executors maps each executor newDocker started to its made.
var executors sync.Map

// newExec starts an executor on the real daemon with the default config,
// changed by edit, and closes it when the test ends.
func newExec(t testing.TB, edit func(*config.Config)) (*executor.Executor, *dockertest.Daemon) {
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
func newDocker(ctx context.Context, cfg config.Config) (*executor.Executor, error) {
	b, err := docker.Open(ctx, nil)
	if err != nil {
		return nil, err
	}
	e, err := executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, nil)
	if err != nil {
		return nil, err
	}
	executors.Store(e, made{b: b, cfg: cfg})
	return e, nil
}

func madeOf(t testing.TB, e *executor.Executor) made {
	t.Helper()
	m, ok := executors.Load(e)
	if !ok {
		t.Fatal("the executor was not started by newDocker")
	}
	return m.(made)
}

// dockerOf is e's Docker backend.
func dockerOf(t testing.TB, e *executor.Executor) *docker.Backend {
	t.Helper()
	return madeOf(t, e).b
}

// configOf is the configuration e was started with.
func configOf(t testing.TB, e *executor.Executor) config.Config {
	t.Helper()
	return madeOf(t, e).cfg
}

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// imports builds the gate's facts for plain `import m` statements, given as
// module, line pairs.
func imports(pairs ...any) []analyze.Import {
	var out []analyze.Import
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, analyze.Import{Module: pairs[i].(string), Line: pairs[i+1].(int)})
	}
	return out
}

// gated returns the static gate's import facts for code, as the tool
// layer sends them.
func gated(t *testing.T, code string) []analyze.Import {
	t.Helper()
	f, err := analyze.Source([]byte(code), analyze.Options{})
	if err != nil {
		t.Fatalf("analyze %.60q: %v", code, err)
	}
	return f.Imports
}

func transient(t *testing.T, e *executor.Executor, req executor.Request) *executor.Result {
	t.Helper()
	res, err := e.Transient(tctx(t, 2*time.Minute), req)
	if err != nil {
		t.Fatalf("Transient(%.80q): %v", req.Code, err)
	}
	return res
}

func persistent(t *testing.T, e *executor.Executor, id string, req executor.Request) (*executor.Result, string) {
	t.Helper()
	res, sid, err := e.Persistent(tctx(t, 2*time.Minute), id, req)
	if err != nil {
		t.Fatalf("Persistent(%q, %.80q): %v", id, req.Code, err)
	}
	return res, sid
}

func wantStatus(t *testing.T, res *executor.Result, status string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status = %q, want %q; error %+v; stdout %.300q; stderr %.500q", res.Status, status, res.Error, res.Stdout, res.Stderr)
	}
}

// poolExec is newExec with a warm pool of size sandboxes (preloading
// preload), once the pool is full.
func poolExec(t *testing.T, size int, preload ...string) (*executor.Executor, *dockertest.Daemon) {
	t.Helper()
	e, cli := newExec(t, func(c *config.Config) {
		c.Pool = config.Pool{Enabled: true, Size: size, MaxAge: config.Duration(time.Hour), MaxConcurrentCreations: 2, Preload: preload}
	})
	waitPoolFull(t, e)
	return e, cli
}

// waitPoolFull waits up to a minute for e's pools to hold as many idle
// sandboxes as they keep.
func waitPoolFull(t testing.TB, e *executor.Executor) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		full := true
		for _, p := range e.Stats().Pools {
			if p.Idle < p.Size {
				full = false
				if time.Now().After(deadline) {
					t.Fatalf("%s pool has %d of %d sandboxes after a minute", p.Kind, p.Idle, p.Size)
				}
			}
		}
		if full {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
