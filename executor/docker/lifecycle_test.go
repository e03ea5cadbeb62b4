package docker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// leftover creates, without starting it, a container of image running
// cmd with labels (plus the test label), removed with its volumes when t
// ends, and returns its id. Its network is none, should a test start it.
func leftover(ctx context.Context, t *testing.T, cli *dockertest.Daemon, image string, labels map[string]string, cmd ...string) string {
	t.Helper()
	labels["python-docker-mcp.test"] = "1"
	id, err := cli.Create(ctx, image, labels, cmd...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Remove(context.Background(), id) })
	return id
}

// containerExists reports whether the daemon knows the container id.
func containerExists(ctx context.Context, cli *dockertest.Daemon, id string) bool {
	return cli.Exists(ctx, id)
}

func TestNewReapsLeftovers(t *testing.T) {
	cfg := config.Default()
	cli := dockertest.RequireDaemon(t, cfg.Docker.Image)
	ctx := tctx(t, time.Minute)
	host, _ := os.Hostname()
	mk := func(labels map[string]string) string {
		return leftover(ctx, t, cli, cfg.Docker.Image, labels, "python3", "-c", "pass")
	}
	exists := func(id string) bool { return containerExists(ctx, cli, id) }
	// A live executor's session must survive another executor's start.
	a, _ := newExec(t, nil)
	_, sid := persistent(t, a, "", executor.Request{Owner: "o", Code: "x = 1"})
	// Left by a crashed server on this host (its pid is gone).
	crashed := mk(map[string]string{backend.LabelKind: backend.KindTransient, backend.LabelPID: "999999", backend.LabelHost: host, backend.LabelInstance: "gone"})
	// Left by a closed executor of this very process.
	closed := mk(map[string]string{backend.LabelKind: backend.KindPersistent, backend.LabelPID: itoa(os.Getpid()), backend.LabelHost: host, backend.LabelInstance: "closed"})
	// Owned by a server on another machine sharing the daemon.
	foreign := mk(map[string]string{backend.LabelKind: backend.KindTransient, backend.LabelPID: "1", backend.LabelHost: "elsewhere", backend.LabelInstance: "x"})

	newExec(t, nil)
	if exists(crashed) || exists(closed) {
		t.Errorf("leftovers survived New: crashed %v, closed %v", exists(crashed), exists(closed))
	}
	if !exists(foreign) {
		t.Error("New removed a container of a server on another host")
	}
	res, _ := persistent(t, a, sid, executor.Request{Owner: "o", Code: "x"})
	if res.Result == nil || *res.Result != "1" || res.StateLost {
		t.Errorf("a live executor's session was disturbed by another New: %+v", res)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestImageMissing(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) { c.Docker.Image = "python-docker-mcp-sandbox:no-such-tag" })
	_, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "1"})
	if !errors.Is(err, executor.ErrImageMissing) || !strings.Contains(err.Error(), "image build") {
		t.Errorf("run with a missing image: %v, want ErrImageMissing naming the build command", err)
	}
}

// proxy forwards a unix socket to the real Docker socket and can be stopped
// and started again, to play a daemon that goes away and comes back.
type proxy struct {
	path, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func (p *proxy) start(t *testing.T) {
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { io.Copy(d, c); d.Close() }()
			go func() { io.Copy(c, d); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	os.Remove(p.path)
}

func TestDockerGoesAwayAndComesBack(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	p := &proxy{path: filepath.Join(t.TempDir(), "d.sock"), target: "/var/run/docker.sock"}
	p.start(t)
	t.Cleanup(p.stop) // after the executor's Close, which needs Docker
	t.Setenv("DOCKER_HOST", "unix://"+p.path)
	e, _ := newExec(t, nil)
	if res, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "1"}); err != nil || res.Status != "ok" {
		t.Fatalf("with Docker: %v %+v", err, res)
	}
	p.stop()
	_, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "1"})
	if !errors.Is(err, executor.ErrDockerUnavailable) {
		t.Errorf("while Docker is gone: %v, want ErrDockerUnavailable", err)
	}
	p.start(t)
	if res, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "1"}); err != nil || res.Status != "ok" {
		t.Errorf("after Docker came back: %v %+v", err, res)
	}
}

func TestClose(t *testing.T) {
	cfg := config.Default()
	cli := dockertest.RequireDaemon(t, cfg.Docker.Image)
	cfg.Pool.Enabled = false
	e, err := newDocker(tctx(t, time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	for range 2 {
		if _, _, err := e.Persistent(tctx(t, time.Minute), "", executor.Request{Owner: "o", Code: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.Instance()); n != 2 {
		t.Fatalf("%d session containers, want 2", n)
	}
	// A container labelled as this executor's that it never tracked (a
	// start whose clean-up failed): Close removes it too.
	spec := backendtest.Spec(cfg.Docker.Image, "close-stray", "import time; time.sleep(600)")
	spec.Labels[backend.LabelInstance] = e.Instance()
	stray, err := dockerOf(t, e).Create(tctx(t, time.Minute), spec)
	if err != nil {
		t.Fatal(err)
	}
	stray.Close()
	if err := e.Close(tctx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.Instance()); n != 0 {
		t.Errorf("%d containers after Close, want 0", n)
	}
	if _, err := e.Transient(tctx(t, time.Minute), executor.Request{Code: "1"}); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("Transient after Close: %v, want ErrClosed", err)
	}
}
