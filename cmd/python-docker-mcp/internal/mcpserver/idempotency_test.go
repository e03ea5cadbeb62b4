package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

func (h *harness) keyed(t *testing.T, ctx context.Context, key any, name string, args map[string]any) (*sdk.CallToolResult, error) {
	t.Helper()
	return h.session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args, Meta: sdk.Meta{MetaIdempotencyKey: key}})
}

func (h *harness) runs() int {
	h.exec.mu.Lock()
	defer h.exec.mu.Unlock()
	return len(h.exec.requests)
}

// TestIdempotencyKeyRunsOnce: a call retried with its key is answered
// with the first attempt's result and never reaches the executor again;
// the key reaches the executor (for shared session records); reusing a
// key for other arguments, or a malformed key, runs nothing.
func TestIdempotencyKeyRunsOnce(t *testing.T) {
	h := start(t, config.Default(), "")
	ctx := context.Background()
	s := "x"
	h.exec.result = executor.Result{Status: "ok", Stdout: "1\n", Result: &s}
	args := map[string]any{"session_id": "s1", "code": "n += 1\nprint(n)"}
	first, err := h.keyed(t, ctx, "k-1", ToolExecutePersistent, args)
	if err != nil || first.IsError {
		t.Fatalf("first attempt: %v %q", err, textOf(first))
	}
	if first.Meta["replayed"] != nil {
		t.Errorf("first attempt marked replayed: %v", first.Meta)
	}
	h.exec.result.Stdout = "2\n" // what a second run would print
	retry, err := h.keyed(t, ctx, "k-1", ToolExecutePersistent, args)
	if err != nil || retry.IsError {
		t.Fatalf("retry: %v %q", err, textOf(retry))
	}
	if n := h.runs(); n != 1 {
		t.Errorf("the executor ran %d times, want once", n)
	}
	if textOf(retry) != textOf(first) || retry.Meta["replayed"] != true || retry.Meta[MetaIdempotencyKey] != "k-1" {
		t.Errorf("retry = %q (meta %v), want the first result %q marked replayed", textOf(retry), retry.Meta, textOf(first))
	}
	if got := h.exec.requests[0].IdempotencyKey; got != "k-1" {
		t.Errorf("the executor's request carried key %q, want k-1", got)
	}

	other := map[string]any{"session_id": "s1", "code": "n = 0"}
	res, err := h.keyed(t, ctx, "k-1", ToolExecutePersistent, other)
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "already used for another call") {
		t.Errorf("the key reused for other arguments: %v %q, want a refusal", err, textOf(res))
	}
	for _, bad := range []any{42, "", strings.Repeat("k", 129), "with space"} {
		res, err := h.keyed(t, ctx, bad, ToolExecutePersistent, args)
		if err != nil || !res.IsError || !strings.Contains(textOf(res), "nothing was run") {
			t.Errorf("key %v: %v %q, want invalid", bad, err, textOf(res))
		}
	}
	if n := h.runs(); n != 1 {
		t.Errorf("the executor ran %d times after refused keys, want once", n)
	}
	// Without a key every call runs.
	h.call(t, ToolExecutePersistent, args)
	h.call(t, ToolExecutePersistent, args)
	if n := h.runs(); n != 3 {
		t.Errorf("the executor ran %d times, want 3", n)
	}
}

// TestIdempotencyKeyWaitsForTheFirstAttempt: a retry that arrives while
// the first attempt runs waits for it and gets its result.
func TestIdempotencyKeyWaitsForTheFirstAttempt(t *testing.T) {
	h := start(t, config.Default(), "")
	gate := make(chan struct{})
	h.exec.gate = gate
	ctx := context.Background()
	args := map[string]any{"code": "print(1)"}
	var wg sync.WaitGroup
	results := make([]*sdk.CallToolResult, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.keyed(t, ctx, "same", ToolExecuteTransient, args)
			if err != nil {
				t.Errorf("attempt %d: %v", i, err)
			}
			results[i] = res
		}()
	}
	for h.runs() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the retries arrive
	close(gate)
	wg.Wait()
	if n := h.runs(); n != 1 {
		t.Errorf("the executor ran %d times for 3 concurrent attempts, want once", n)
	}
	replays := 0
	for _, r := range results {
		if r != nil && r.Meta["replayed"] == true {
			replays++
		}
	}
	if replays != 2 {
		t.Errorf("%d results marked replayed, want 2", replays)
	}
}

// TestIdempotencyKeyOfACancelledTransientCall: a transient call whose
// client went away left nothing behind, so its retry runs; a cancelled
// session call may have changed the session, so its retry gets its
// outcome.
func TestIdempotencyKeyOfACancelledCall(t *testing.T) {
	for _, tt := range []struct {
		tool     string
		args     map[string]any
		wantRuns int
	}{
		{ToolExecuteTransient, map[string]any{"code": "print(1)"}, 2},
		{ToolExecutePersistent, map[string]any{"session_id": "s1", "code": "n += 1"}, 1},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			h := start(t, config.Default(), "")
			h.exec.block = true
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.keyed(t, ctx, "k", tt.tool, tt.args)
			}()
			for h.runs() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-h.exec.ended
			<-done
			h.exec.mu.Lock()
			h.exec.block = false
			h.exec.mu.Unlock()
			var res *sdk.CallToolResult
			var err error
			// The cancelled attempt ends on the server after the client
			// stopped waiting: retry until it is no longer in flight.
			for range 200 {
				rctx, rcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				res, err = h.keyed(t, rctx, "k", tt.tool, tt.args)
				rcancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := h.runs(); n != tt.wantRuns {
				t.Errorf("the executor ran %d times, want %d (retry: %q)", n, tt.wantRuns, textOf(res))
			}
		})
	}
}

// TestOutcomeUnknownIsNotAPlainFailure: the executor's verdict on a
// retried call whose server died renders as its own status.
func TestOutcomeUnknownIsNotAPlainFailure(t *testing.T) {
	h := start(t, config.Default(), "")
	for _, tt := range []struct {
		err    error
		status string
	}{
		{fmt.Errorf("%w: it may have run", executor.ErrOutcomeUnknown), "outcome_unknown"},
		{fmt.Errorf("%w: it ran", executor.ErrAlreadyRan), "already_ran"},
	} {
		h.exec.err = tt.err
		res, err := h.keyed(t, context.Background(), tt.status, ToolExecutePersistent, map[string]any{"session_id": "s1", "code": "n += 1"})
		if err != nil || !res.IsError || structuredOf(t, res)["status"] != tt.status || !strings.HasPrefix(textOf(res), tt.status+":") {
			t.Errorf("%v: %v %q %v, want status %s", tt.err, err, textOf(res), structuredOf(t, res)["status"], tt.status)
		}
	}
}

// TestCallMemoBounds: keys are per principal; a principal's oldest
// results go beyond its cap, and every result after the TTL.
func TestCallMemoBounds(t *testing.T) {
	m := newCallMemo()
	now := time.Now()
	fp := [32]byte{1}
	done := func(owner, key string) {
		c, first := m.begin(memoKey{owner, key}, fp, now)
		if !first {
			t.Fatalf("%s/%s: not the first attempt", owner, key)
		}
		m.finish(c, &mcp.CallToolResult{}, nil, true, now)
	}
	done("alice", "k")
	if _, first := m.begin(memoKey{"bob", "k"}, fp, now); !first {
		t.Errorf("bob's key k matched alice's")
	}
	for i := range idempotencyMaxPerOwner {
		done("carol", fmt.Sprint(i))
	}
	if _, first := m.begin(memoKey{"alice", "k"}, fp, now); first {
		t.Errorf("alice's result went with another principal's cap")
	}
	done("carol", "one more")
	if _, first := m.begin(memoKey{"carol", "0"}, fp, now); !first {
		t.Errorf("carol's oldest result kept beyond %d", idempotencyMaxPerOwner)
	}
	if _, first := m.begin(memoKey{"carol", "1"}, fp, now.Add(idempotencyTTL+time.Second)); !first {
		t.Errorf("a result kept beyond the TTL")
	}
}

// TestInterruptedCallIsAWarning: a call that took its session over from a
// server that died mid-call says that call may have run.
func TestInterruptedCallIsAWarning(t *testing.T) {
	h := start(t, config.Default(), "")
	h.exec.result = executor.Result{Status: "ok", Interrupted: "server-a"}
	res := h.call(t, ToolExecutePersistent, map[string]any{"session_id": "s1", "code": "n"})
	ws, _ := structuredOf(t, res)["warnings"].([]any)
	found := false
	for _, w := range ws {
		if m, _ := w.(map[string]any); m["rule"] == "session.interrupted_call" && strings.Contains(m["msg"].(string), "may have run") {
			found = true
		}
	}
	if res.IsError || !found || !strings.Contains(textOf(res), "may have run") {
		t.Errorf("result %q, warnings %v; want an ok result warning that the interrupted call may have run", textOf(res), ws)
	}
}
