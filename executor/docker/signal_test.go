package docker_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestServerProcess is not a test: it is the "server" TestShutdown starts
// in a child process. It opens a session, says "ready", and on SIGTERM or
// SIGINT closes the executor the way the binary's main does.
func TestServerProcess(t *testing.T) {
	if os.Getenv("PDM_EXECUTOR_SERVER") != "1" {
		t.Skip("helper process for TestShutdown")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg := config.Default()
	cfg.Pool.Enabled = os.Getenv("PDM_POOL") == "1"
	cfg.Pool.Preload = nil
	e, err := newDocker(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Persistent(context.Background(), "", executor.Request{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	waitPoolFull(t, e)
	os.Stdout.WriteString("ready\n")
	<-ctx.Done()
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func startServer(t *testing.T, pool bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PDM_EXECUTOR_SERVER=1")
	if pool {
		cmd.Env = append(cmd.Env, "PDM_POOL=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("server process did not get ready")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("server process not ready after 2 minutes")
	}
	return cmd
}

// containersOf counts the containers of the server with pid, its
// network-namespace holders too (sandboxesOf leaves them out).
func containersOf(t *testing.T, cli *dockertest.Daemon, pid int, running bool) int {
	return countOf(t, cli, pid, running, true)
}

func sandboxesOf(t *testing.T, cli *dockertest.Daemon, pid int) int {
	return countOf(t, cli, pid, false, false)
}

func countOf(t *testing.T, cli *dockertest.Daemon, pid int, running, holders bool) int {
	t.Helper()
	list, err := cli.Containers(context.Background(), running, backend.LabelPID+"="+strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	return dockertest.Sandboxes(list, holders)
}

func TestShutdown(t *testing.T) {
	cli := dockertest.RequireDaemon(t, config.Default().Docker.Image)
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startServer(t, true)
			if n := sandboxesOf(t, cli, cmd.Process.Pid); n != 4 {
				t.Fatalf("%d containers of the server (a session, a pool of 2 and one for sessions), want 4", n)
			}
			cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("server exit: %v", err)
			}
			if n := containersOf(t, cli, cmd.Process.Pid, false); n != 0 {
				t.Errorf("%d containers after the server exited on %s, want 0", n, sig)
			}
		})
	}
	t.Run("crash", func(t *testing.T) {
		cmd := startServer(t, false)
		pid := cmd.Process.Pid
		cmd.Process.Kill()
		cmd.Wait()
		// Without the server's attach the runners and the network
		// namespaces' holders exit (StdinOnce) ...
		deadline := time.Now().Add(20 * time.Second)
		for containersOf(t, cli, pid, true) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if n := containersOf(t, cli, pid, true); n != 0 {
			t.Errorf("%d sandboxes still running 20 s after their server was killed", n)
		}
		if containersOf(t, cli, pid, false) == 0 {
			t.Fatal("expected the killed server's stopped containers to be there before the next start")
		}
		// ... and the next start removes what is left.
		newExec(t, nil)
		if n := containersOf(t, cli, pid, false); n != 0 {
			t.Errorf("%d containers of the killed server after the next New, want 0", n)
		}
	})
}
