package executor

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestDockerUnreachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no.sock"))
	_, err := newDocker(tctx(t, 20*time.Second), config.Default())
	if !errors.Is(err, ErrDockerUnavailable) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("New without a daemon: %v, want ErrDockerUnavailable saying what to do", err)
	}
}

func TestCancellation(t *testing.T) {
	e, cli := newExec(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := e.Transient(ctx, Request{Code: "while True:\n    pass"})
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 5*time.Second {
		t.Errorf("cancelled transient run: %v after %s, want context.Canceled promptly", err, time.Since(t0))
	}
	if n := dockertest.Settled(t, cli, ""); n != 0 {
		t.Errorf("%d containers after a cancelled transient run, want 0", n)
	}

	_, id := persistent(t, e, "", Request{Owner: "o", Code: "x = 3"})
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	if _, _, err := e.Persistent(ctx, id, Request{Owner: "o", Code: "while True:\n    pass"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled session run: %v, want context.Canceled", err)
	}
	res, _ := persistent(t, e, id, Request{Owner: "o", Code: "x"})
	if res.Result == nil || *res.Result != "3" || res.StateLost {
		t.Errorf("after a cancelled call the session should keep its state: %+v", res)
	}
}
