package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

// unreachableBackend is the fake backend whose Ping fails as an API
// server nobody answers at would.
type unreachableBackend struct {
	*fake.Backend
	err error
}

func (u *unreachableBackend) Ping(context.Context) error { return u.err }

func TestPingAsksTheBackend(t *testing.T) {
	cfg := config.Default()
	cfg.Pool.Enabled = false
	b := &unreachableBackend{Backend: fake.New()}
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), b, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("NewWithBackend: %v", err)
	}
	defer e.Close(context.Background())
	if err := e.Ping(context.Background()); err != nil {
		t.Errorf("Ping with the backend answering: %v", err)
	}
	b.err = fmt.Errorf("%w: ping: dial tcp 127.0.0.1:6443: connection refused", backend.ErrUnavailable)
	if err := e.Ping(context.Background()); !errors.Is(err, ErrDockerUnavailable) {
		t.Errorf("Ping with the backend down = %v, want ErrUnavailable", err)
	}
	if got := e.Instance(); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(got) {
		t.Errorf("Instance() = %q, want 16 hex digits", got)
	}
}

func TestPingWithoutAPinger(t *testing.T) {
	e, _ := newFake(t, nil)
	if err := e.Ping(context.Background()); err != nil {
		t.Errorf("Ping on a backend with nothing to ask = %v, want nil", err)
	}
}
