package executor

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// Session bookkeeping on the fake backend: ids, owners, listing, caps,
// files, cancellation and lost state. The code is the fake runner's script
// (package fake); the real-daemon tests in persistent_test.go and
// statelost_test.go hold the same behaviour with Python.

// fakeSession starts a session of owner running code and returns its id.
func fakeSession(t *testing.T, e *Executor, owner, code string) string {
	t.Helper()
	res, sid, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: owner, Code: code})
	if err != nil || res.Status != "ok" {
		t.Fatalf("new session of %s running %q: %+v, %v", owner, code, res, err)
	}
	return sid
}

// A session's id is 128 random bits in hex; its owner sees it listed, idle
// and not yet expired; another owner neither sees it nor cleans it up.
func TestFakeSessionIDsAndOwners(t *testing.T) {
	e, _ := newFake(t, nil)
	ctx := tctx(t, time.Minute)
	res, sid, err := e.Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(sid); err != nil || len(b) != 16 || res.SessionID != sid {
		t.Fatalf("session id %q (result %q), want 32 hex digits (128 bits)", sid, res.SessionID)
	}
	if other := fakeSession(t, e, "alice", "set x 2"); other == sid {
		t.Errorf("two sessions got the same id %s", sid)
	}
	infos := e.Sessions("alice")
	if len(infos) != 2 || infos[0].ID != sid {
		t.Fatalf("Sessions(alice) = %+v, want her two sessions, the oldest (%s) first", infos, sid)
	}
	for _, s := range infos {
		if s.Busy || !s.Expires.After(time.Now()) {
			t.Errorf("session %+v: want idle and not expired", s)
		}
	}
	if got := e.Sessions("bob"); len(got) != 0 {
		t.Errorf("Sessions(bob) = %+v, want none", got)
	}
	if err := e.Cleanup(ctx, "bob", sid); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob cleaning alice's session: %v, want ErrUnknownSession", err)
	}
	if err := e.Cleanup(ctx, "alice", sid); err != nil {
		t.Fatal(err)
	}
	if infos := e.Sessions("alice"); len(infos) != 1 || infos[0].ID == sid {
		t.Errorf("Sessions(alice) after Cleanup = %+v, want only the other one", infos)
	}
	if err := e.Cleanup(ctx, "alice", sid); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("second Cleanup: %v, want ErrUnknownSession", err)
	}
}

// While a call runs its session is listed busy, and a call that waits for
// it gives up when its own ctx ends; the running call is not disturbed.
func TestFakeSessionWaitHonoursContext(t *testing.T) {
	e, _ := newFake(t, nil)
	sid := fakeSession(t, e, "o", "set x 0")
	running := make(chan struct{})
	var once sync.Once
	first := make(chan *Result, 1)
	go func() {
		res, _, err := e.Persistent(tctx(t, time.Minute), sid, Request{Owner: "o", Code: "sleep 1500\nset x 1", Progress: func(m string) {
			if m == "running" {
				once.Do(func() { close(running) })
			}
		}})
		if err != nil {
			t.Errorf("the running call: %v", err)
		}
		first <- res
	}()
	<-running
	if infos := e.Sessions("o"); len(infos) != 1 || !infos[0].Busy {
		t.Errorf("Sessions during a call = %+v, want it busy", infos)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "o", Code: "get x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call with an expiring ctx: %v, want context.DeadlineExceeded", err)
	}
	if res := <-first; res == nil || res.Status != "ok" {
		t.Errorf("the running call: %+v, want ok", res)
	}
	if res, _, err := e.Persistent(tctx(t, time.Minute), sid, Request{Owner: "o", Code: "get x"}); err != nil || res.Stdout != "1\n" {
		t.Errorf("after both: %+v, %v; want x == 1", res, err)
	}
}

// A cancelled call ends with context.Canceled: a transient call's sandbox
// is removed; a session's call is interrupted and the session keeps its
// state.
func TestFakeCancellation(t *testing.T) {
	e, fb := newFake(t, nil)
	sid := fakeSession(t, e, "o", "set x 3")
	for _, tc := range []struct {
		name    string
		call    func(ctx context.Context, req Request) error
		session bool
	}{
		{"transient", func(ctx context.Context, req Request) error { _, err := e.Transient(ctx, req); return err }, false},
		{"session", func(ctx context.Context, req Request) error { _, _, err := e.Persistent(ctx, sid, req); return err }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := Request{Owner: "o", Code: "sleep 60000", Progress: func(m string) {
				if m == "running" {
					cancel()
				}
			}}
			if err := tc.call(ctx, req); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call: %v, want context.Canceled", err)
			}
			if !tc.session {
				eventually(t, "the cancelled call's sandbox is removed", func() bool { return fb.Live() == 1 })
				return
			}
			res, _, err := e.Persistent(tctx(t, time.Minute), sid, Request{Owner: "o", Code: "get x"})
			if err != nil || res.Stdout != "3\n" || res.StateLost {
				t.Errorf("after a cancelled call: %+v, %v; want x == 3 and no state lost", res, err)
			}
		})
	}
}

// Session files: what is written is read and listed; a missing file is
// fs.ErrNotExist; another owner's call is ErrUnknownSession; data past a
// limit is refused before it reaches the sandbox, naming the limit.
func TestFakeSessionFiles(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) { c.Limits.MaxFileBytes = 512 << 10 })
	ctx := tctx(t, time.Minute)
	sid := fakeSession(t, e, "o", "set x 1")
	if err := e.WriteFile(ctx, "o", sid, "data/in.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.ReadFile(ctx, "o", sid, "data/in.txt"); err != nil || string(got) != "hello" {
		t.Errorf("ReadFile = %q, %v; want hello", got, err)
	}
	if list, err := e.ListFiles(ctx, "o", sid, ""); err != nil || len(list) != 1 || list[0].Path != "data/in.txt" || list[0].Size != 5 {
		t.Errorf("ListFiles = %+v, %v; want data/in.txt of 5 bytes", list, err)
	}
	if _, err := e.ReadFile(ctx, "o", sid, "missing.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := e.ReadFile(ctx, "other", sid, "data/in.txt"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("ReadFile by another owner = %v, want ErrUnknownSession", err)
	}
	chunk := e.FileLimits().WriteChunk
	for _, tc := range []struct {
		size  int64
		limit string
	}{
		{chunk + 1, LimitWriteChunk},
		{512<<10 + 1, LimitFile},
	} {
		var lerr *FileLimitError
		if err := e.WriteFile(ctx, "o", sid, "big", make([]byte, tc.size)); !errors.As(err, &lerr) || lerr.Limit != tc.limit || lerr.Size != tc.size || !errors.Is(err, ErrLimitExceeded) {
			t.Errorf("WriteFile of %d bytes = %v, want a FileLimitError naming %s", tc.size, err, tc.limit)
		}
	}
	if _, err := e.ReadFile(ctx, "o", sid, "big"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write reached the sandbox: ReadFile(big) = %v", err)
	}
}

// A session's sandbox that dies, during a run or between calls (removed
// behind the executor's back), costs its state. Whatever notices it first
// says so: a run that finds it dead (or ends with it) says state_lost
// itself; a file tool that finds it dead starts a fresh sandbox, and the
// next run says state_lost there. The loss is reported once, x is gone,
// and the session's imported modules are forgotten; another owner never
// learns what a session imported.
func TestFakeStateLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove bool // the sandbox is removed between calls
		notice func(ctx context.Context, e *Executor, sid string)
		code   string // the first run after the loss
		status string // its status
	}{
		{"during a run", false, nil, "exit 1", "killed"},
		{"noticed by a run", true, nil, "get x", "killed"},
		{"noticed by a file tool", true, func(ctx context.Context, e *Executor, sid string) {
			// It fails or restarts the sandbox; either way the loss is
			// the next run's to report.
			_, _ = e.ListFiles(ctx, "alice", sid, "")
		}, "get x", "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, fb := newFake(t, nil)
			ctx := tctx(t, time.Minute)
			_, sid, err := e.Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1", Imports: []analyze.Import{{Module: "json", Line: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Imported("alice", sid, []string{"json", "csv"}); !slices.Equal(got, []string{"json"}) {
				t.Errorf("Imported = %v, want [json]", got)
			}
			if got := e.Imported("bob", sid, []string{"json"}); len(got) != 0 {
				t.Errorf("Imported for another owner = %v, want none", got)
			}
			if tc.remove {
				e.sessions.mu.Lock()
				id := e.sessions.byID[sid].sb.id
				e.sessions.mu.Unlock()
				if err := fb.Remove(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if tc.notice != nil {
				tc.notice(ctx, e, sid)
			}
			res, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: tc.code})
			if err != nil || !res.StateLost || res.Status != tc.status {
				t.Fatalf("first run after the loss: %+v, %v; want %s with state_lost", res, err, tc.status)
			}
			if got := e.Imported("alice", sid, []string{"json"}); len(got) != 0 {
				t.Errorf("Imported after the loss = %v, want none", got)
			}
			if res, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: "get x"}); err != nil || res.StateLost || res.Error == nil || res.Error.Type != "NameError" {
				t.Errorf("the run after: %+v, %v; want a NameError (x is gone) with the loss not reported again", res, err)
			}
		})
	}
}

// A call that runs longer than sessions.idle_ttl does not expire its
// session: the idle clock starts when a call ends, and an expired session
// is told apart from an unknown one only to its owner.
func TestFakeSessionCallOutlivesIdleTTL(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(2 * time.Second) })
	ctx := tctx(t, time.Minute)
	sid := fakeSession(t, e, "alice", "set x 1")
	if res, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: "sleep 3000\nget x"}); err != nil || res.Status != "ok" || res.Stdout != "1\n" {
		t.Fatalf("a call longer than the idle TTL: %+v, %v; want ok with x == 1", res, err)
	}
	if res, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: "get x"}); err != nil || res.Stdout != "1\n" {
		t.Errorf("the call right after: %+v, %v; want the session alive with x == 1", res, err)
	}
	eventually(t, "the idle session expires", func() bool { return len(e.Sessions("alice")) == 0 })
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "alice", Code: "get x"}); !errors.Is(err, ErrExpiredSession) {
		t.Errorf("alice after the idle TTL: %v, want ErrExpiredSession", err)
	}
	if _, _, err := e.Persistent(ctx, sid, Request{Owner: "bob", Code: "get x"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob asking for alice's expired session: %v, want ErrUnknownSession", err)
	}
}

// Cleanup of a session whose call is running ends that call with status
// killed and removes the sandbox; Cleanup of an expired session fails as
// a call would.
func TestFakeCleanupDuringACall(t *testing.T) {
	e, fb := newFake(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(300 * time.Millisecond) })
	ctx := tctx(t, time.Minute)
	sid := fakeSession(t, e, "o", "set x 1")
	running := make(chan struct{})
	var once sync.Once
	done := make(chan *Result, 1)
	go func() {
		res, _, err := e.Persistent(ctx, sid, Request{Owner: "o", Code: "sleep 60000", Progress: func(m string) {
			if m == "running" {
				once.Do(func() { close(running) })
			}
		}})
		if err != nil {
			t.Errorf("the running call: %v", err)
		}
		done <- res
	}()
	<-running
	if err := e.Cleanup(ctx, "o", sid); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || res.Status != "killed" {
		t.Errorf("the call running during Cleanup: %+v, want status killed", res)
	}
	eventually(t, "the session's sandbox is removed", func() bool { return fb.Live() == 0 })

	old := fakeSession(t, e, "o", "set x 1")
	eventually(t, "the idle session expires", func() bool { return len(e.Sessions("o")) == 0 })
	if err := e.Cleanup(ctx, "o", old); !errors.Is(err, ErrExpiredSession) {
		t.Errorf("Cleanup of an expired session: %v, want ErrExpiredSession", err)
	}
}
