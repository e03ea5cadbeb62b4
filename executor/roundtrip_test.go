package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// removeOnly is a backend that can only remove sandboxes: all a round
// trip that ends in a kill needs.
type removeOnly struct {
	backend.Backend
	removed atomic.Int32
}

func (r *removeOnly) Remove(context.Context, string) error {
	r.removed.Add(1)
	return nil
}

// fakeSandbox is a sandbox whose frames the test sends; requests written
// to it are decoded and handed to the test.
func fakeSandbox(t *testing.T) (*Executor, *removeOnly, *sandbox, <-chan map[string]any) {
	t.Helper()
	docker := &removeOnly{}
	e := &Executor{be: docker, log: slog.New(slog.NewTextHandler(io.Discard, nil)), live: map[string]*sandbox{}, unremoved: map[string]bool{}}
	server, runnerEnd := net.Pipe()
	sb := &sandbox{id: "fake", meta: sandboxMeta{Kind: backend.KindTransient}, frames: make(chan frameOrErr, 4), stderr: &tailBuffer{max: 1024}, quit: make(chan struct{})}
	sb.box = backend.NewSandbox("fake", server, nil, nil, server.Close)
	sb.limit.Store(idleFrameLimit)
	reqs := make(chan map[string]any, 4)
	go func() {
		for {
			data, err := readFrame(runnerEnd, limitOf(maxRequestFrame))
			if err != nil {
				close(reqs)
				return
			}
			var m map[string]any
			_ = json.Unmarshal(data, &m)
			reqs <- m
		}
	}()
	t.Cleanup(func() { server.Close(); runnerEnd.Close() })
	return e, docker, sb, reqs
}

// TestRoundTripRefusesForgedReplies: only a frame with the request's id
// and nonce answers it; anything else, including a "done" frame for the
// right id, kills the sandbox with invalidReply, and the server's timer
// ends a call that gets no answer.
func TestRoundTripRefusesForgedReplies(t *testing.T) {
	tests := []struct {
		name       string
		reply      func(id uint64, nonce string) frameOrErr
		wantStatus string
		wantReason string
	}{
		{
			name:  "the right id and nonce",
			reply: func(id uint64, nonce string) frameOrErr { return frameOf2(id, nonce, "ok") },
		},
		{
			name:       "a forged done frame without the nonce",
			reply:      func(id uint64, _ string) frameOrErr { return frameOf2(id, "guess", "ok") },
			wantStatus: "killed", wantReason: invalidReply,
		},
		{
			name:       "an answer to another request",
			reply:      func(id uint64, nonce string) frameOrErr { return frameOf2(id+1, nonce, "ok") },
			wantStatus: "killed", wantReason: invalidReply,
		},
		{
			name:       "malformed",
			reply:      func(uint64, string) frameOrErr { return frameOrErr{data: []byte(`{"id":`)} },
			wantStatus: "killed", wantReason: invalidReply,
		},
		{
			name: "oversized",
			reply: func(uint64, string) frameOrErr {
				return frameOrErr{err: fmt.Errorf("%w: a frame of %d bytes", errFrameTooLarge, 240<<20)}
			},
			wantStatus: "killed", wantReason: invalidReply,
		},
		{
			name:       "no answer",
			wantStatus: "timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, docker, sb, reqs := fakeSandbox(t)
			go func() {
				req, ok := <-reqs
				if !ok || tt.reply == nil {
					return
				}
				if got := sb.limit.Load(); got != 12345 {
					t.Errorf("frame limit while the request waits: %d, want the request's 12345", got)
				}
				sb.frames <- tt.reply(uint64(req["id"].(float64)), req["nonce"].(string))
			}()
			resp, fail, err := e.roundTrip(context.Background(), sb, &protocol.Run{}, 300*time.Millisecond, false, 12345)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantStatus == "" {
				if fail != nil || resp == nil || resp.Status != "ok" {
					t.Fatalf("valid reply: resp %+v fail %+v", resp, fail)
				}
				if sb.limit.Load() != idleFrameLimit {
					t.Errorf("frame limit after the call: %d, want %d", sb.limit.Load(), idleFrameLimit)
				}
				return
			}
			if resp != nil || fail == nil || fail.status != tt.wantStatus || !strings.Contains(fail.reason, tt.wantReason) {
				t.Fatalf("resp %+v fail %+v, want status %s with %q", resp, fail, tt.wantStatus, tt.wantReason)
			}
			if !sb.dead.Load() || docker.removed.Load() != 1 {
				t.Errorf("sandbox dead %v, removed %d times; want killed and removed once", sb.dead.Load(), docker.removed.Load())
			}
		})
	}
}

func frameOf2(id uint64, nonce, status string) frameOrErr {
	data, _ := json.Marshal(map[string]any{"id": id, "nonce": nonce, "status": status})
	return frameOrErr{data: data}
}

// TestRoundTripRunnerTakesNoInput: a runner that reads nothing from its
// stdin (hung, or busy past the limit) holds the request's write; the
// call still ends at its time limit, or when its context ends, and the
// sandbox is removed. Before, the write came first and waited for good.
func TestRoundTripRunnerTakesNoInput(t *testing.T) {
	stalled := func(t *testing.T) (*Executor, *removeOnly, *sandbox) {
		docker := &removeOnly{}
		e := &Executor{be: docker, log: slog.New(slog.NewTextHandler(io.Discard, nil)), live: map[string]*sandbox{}, unremoved: map[string]bool{}}
		server, runnerEnd := net.Pipe() // synchronous: a write waits for a read that never comes
		sb := &sandbox{id: "stalled", meta: sandboxMeta{Kind: backend.KindPersistent}, frames: make(chan frameOrErr, 4), stderr: &tailBuffer{max: 1024}, quit: make(chan struct{})}
		sb.box = backend.NewSandbox("stalled", server, nil, nil, server.Close)
		t.Cleanup(func() { server.Close(); runnerEnd.Close() })
		return e, docker, sb
	}
	within := func(t *testing.T, what string, f func()) {
		t.Helper()
		ended := make(chan struct{})
		go func() { defer close(ended); f() }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the call still waits on its write after 30 s", what)
		}
	}
	t.Run("time limit", func(t *testing.T) {
		e, docker, sb := stalled(t)
		within(t, "time limit", func() {
			resp, fail, err := e.roundTrip(context.Background(), sb, &protocol.Run{Code: "1"}, 200*time.Millisecond, true, 1<<20)
			if err != nil || resp != nil || fail == nil || fail.status != "timeout" || !strings.Contains(fail.reason, "did not take the request") {
				t.Errorf("resp %+v fail %+v err %v; want a timeout saying the runner did not take the request", resp, fail, err)
			}
		})
		if !sb.dead.Load() || docker.removed.Load() != 1 {
			t.Errorf("sandbox dead %v, removed %d times; want removed once", sb.dead.Load(), docker.removed.Load())
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		e, docker, sb := stalled(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		within(t, "cancel", func() {
			// interrupt: a session call, which is interrupted rather than
			// killed once its request is in; this one never got in.
			resp, fail, err := e.roundTrip(ctx, sb, &protocol.Run{Code: "1"}, time.Hour, true, 1<<20)
			if !errors.Is(err, context.DeadlineExceeded) || resp != nil || fail != nil {
				t.Errorf("resp %+v fail %+v err %v; want the context's error", resp, fail, err)
			}
		})
		if !sb.dead.Load() || docker.removed.Load() != 1 {
			t.Errorf("sandbox dead %v, removed %d times; want removed once", sb.dead.Load(), docker.removed.Load())
		}
	})
}
