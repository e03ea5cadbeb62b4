package backend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
)

// TestEndedSeesThePassedDeadline: a call that failed on ctx's deadline
// before ctx's timer marked ctx done is judged as ctx's end, as the
// backend contract asks (backendtest.CreateCancelled).
func TestEndedSeesThePassedDeadline(t *testing.T) {
	if err := backend.Ended(backendtest.DeadlinePassed(context.Background())); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ended(passed deadline) = %v, want DeadlineExceeded", err)
	}
	if err := backend.Ended(context.Background()); err != nil {
		t.Errorf("Ended(no deadline) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backend.Ended(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ended(cancelled) = %v, want Canceled", err)
	}
}
