package executor

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

func persistent(t *testing.T, e *Executor, id string, req Request) (*Result, string) {
	t.Helper()
	res, sid, err := e.Persistent(tctx(t, 2*time.Minute), id, req)
	if err != nil {
		t.Fatalf("Persistent(%q, %.80q): %v", id, req.Code, err)
	}
	return res, sid
}

func TestPersistentSession(t *testing.T) {
	e, cli := newExec(t, nil)
	res, id := persistent(t, e, "", Request{Owner: "alice", Code: "import pandas as pd\ndef double(x):\n    return 2 * x\n",
		Imports: []analyze.Import{{Module: "pandas", Alias: "pd", Line: 1}}})
	wantStatus(t, res, "ok")
	if len(id) != 32 || res.SessionID != id {
		t.Fatalf("session id %q (result %q), want 32 hex digits (128 bits)", id, res.SessionID)
	}
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "int(pd.Series([1, 2]).map(double).sum())"})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "6" {
		t.Errorf("call 2 result %v, want 6", res.Result)
	}
	infos := e.Sessions("alice")
	if len(infos) != 1 || infos[0].ID != id || infos[0].Busy || !infos[0].Expires.After(time.Now()) {
		t.Errorf("Sessions(alice) = %+v", infos)
	}
	if got := e.Sessions("bob"); len(got) != 0 {
		t.Errorf("Sessions(bob) = %+v, want none", got)
	}
	if _, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Owner: "bob", Code: "1"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob using alice's session: %v, want ErrUnknownSession", err)
	}
	if err := e.Cleanup(tctx(t, time.Minute), "bob", id); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob cleaning alice's session: %v, want ErrUnknownSession", err)
	}
	if n := ourContainers(t, cli, LabelSession+"="+id); n != 1 {
		t.Fatalf("%d containers for the session, want 1", n)
	}
	if err := e.Cleanup(tctx(t, time.Minute), "alice", id); err != nil {
		t.Fatal(err)
	}
	if n := ourContainers(t, cli, LabelSession+"="+id); n != 0 {
		t.Errorf("%d containers for the session after cleanup, want 0", n)
	}
	_, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Owner: "alice", Code: "1"})
	if !errors.Is(err, ErrUnknownSession) {
		t.Errorf("call after cleanup: %v, want ErrUnknownSession", err)
	}
}

func TestPersistentCaps(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) {
		c.Sessions.MaxPerOwner = 1
		c.Sessions.MaxTotal = 2
	})
	persistent(t, e, "", Request{Owner: "alice", Code: "x = 1"})
	if _, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "alice", Code: "1"}); !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "max_per_owner") {
		t.Errorf("second session of alice: %v, want ErrTooManySessions naming max_per_owner", err)
	}
	persistent(t, e, "", Request{Owner: "bob", Code: "1"})
	if _, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "carol", Code: "1"}); !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "max_total") {
		t.Errorf("third session: %v, want ErrTooManySessions naming max_total", err)
	}
}

func TestPersistentExpiry(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(2 * time.Second) })
	_, a := persistent(t, e, "", Request{Owner: "alice", Code: "x = 1"})
	// A call longer than the idle TTL does not expire mid-call.
	res, _ := persistent(t, e, a, Request{Owner: "alice", Code: "import time\ntime.sleep(2.5)\nx", Imports: imports("time", 1)})
	wantStatus(t, res, "ok")
	time.Sleep(2500 * time.Millisecond)
	_, _, err := e.Persistent(tctx(t, time.Minute), a, Request{Owner: "alice", Code: "x"})
	if !errors.Is(err, ErrExpiredSession) {
		t.Errorf("call after the idle TTL: %v, want ErrExpiredSession", err)
	}
	if _, _, err := e.Persistent(tctx(t, time.Minute), a, Request{Owner: "bob", Code: "x"}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("bob asking for alice's expired session: %v, want ErrUnknownSession", err)
	}
	if n := settled(t, cli, LabelKind+"="+KindPersistent); n != 0 {
		t.Errorf("%d session containers after expiry, want 0", n)
	}
}

func TestPersistentConcurrentCallsWait(t *testing.T) {
	e, _ := newExec(t, nil)
	_, id := persistent(t, e, "", Request{Owner: "o", Code: "import time\nx = 0", Imports: imports("time", 1)})
	var wg sync.WaitGroup
	results := make([]*Result, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[0], _, _ = e.Persistent(context.Background(), id, Request{Owner: "o", Code: "time.sleep(1)\nx = 1"})
	}()
	time.Sleep(200 * time.Millisecond)
	if infos := e.Sessions("o"); len(infos) != 1 || !infos[0].Busy {
		t.Errorf("session should be busy during a call: %+v", infos)
	}
	var progress []string
	res, _ := persistent(t, e, id, Request{Owner: "o", Code: "x", Progress: func(m string) { progress = append(progress, m) }})
	wg.Wait()
	if diff := cmp.Diff([]string{"waiting for the session's running call", "running"}, progress); diff != "" {
		t.Errorf("progress of a waiting call (-want +got):\n%s", diff)
	}
	if results[0] == nil || results[0].Status != "ok" || res.Result == nil || *res.Result != "1" {
		t.Errorf("second call should wait for the first and see x = 1; got %v", res.Result)
	}
	// A waiting call honours its ctx.
	go e.Persistent(context.Background(), id, Request{Owner: "o", Code: "time.sleep(1)"})
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := e.Persistent(ctx, id, Request{Owner: "o", Code: "1"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call with an expiring ctx: %v, want context.DeadlineExceeded", err)
	}
}

func TestSessionFiles(t *testing.T) {
	e, _ := newExec(t, nil)
	_, id := persistent(t, e, "", Request{Owner: "o", Code: "import os\nos.symlink('/etc/passwd', 'link')", Imports: imports("os", 1)})
	ctx := tctx(t, time.Minute)
	if err := e.WriteFile(ctx, "o", id, "data/in.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	res, _ := persistent(t, e, id, Request{Owner: "o", Code: "open('out.txt', 'w').write(open('data/in.txt').read().upper())"})
	wantStatus(t, res, "ok")
	if diff := cmp.Diff([]string{"out.txt"}, res.Files); diff != "" {
		t.Errorf("files the run changed (-want +got):\n%s", diff)
	}
	got, err := e.ReadFile(ctx, "o", id, "/workspace/out.txt")
	if err != nil || string(got) != "HELLO" {
		t.Errorf("ReadFile(out.txt) = %q, %v; want HELLO", got, err)
	}
	list, err := e.ListFiles(ctx, "o", id, "")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range list {
		paths = append(paths, f.Path)
	}
	if diff := cmp.Diff([]string{"data", "data/in.txt", "link", "out.txt"}, paths); diff != "" {
		t.Errorf("ListFiles (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"../etc/passwd", "/etc/passwd", "link", "data/../../etc/passwd"} {
		if _, err := e.ReadFile(ctx, "o", id, bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ReadFile(%q) = %v, want ErrInvalidPath", bad, err)
		}
		if err := e.WriteFile(ctx, "o", id, bad, []byte("x")); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalidPath", bad, err)
		}
	}
	if _, err := e.ReadFile(ctx, "o", id, "missing.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := e.ReadFile(ctx, "other", id, "out.txt"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("ReadFile by another owner = %v, want ErrUnknownSession", err)
	}
	if err := e.WriteFile(ctx, "o", id, "big", make([]byte, 2<<20)); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("WriteFile of 2 MiB = %v, want ErrLimitExceeded", err)
	}
	// Reads are capped at outputs.max_stream_bytes (4 MiB by default).
	res, _ = persistent(t, e, id, Request{Owner: "o", Code: "open('big.bin', 'wb').write(b'x' * (5 << 20))"})
	wantStatus(t, res, "ok")
	if _, err := e.ReadFile(ctx, "o", id, "big.bin"); !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), "maximum") {
		t.Errorf("ReadFile of 5 MiB = %v, want a size error", err)
	}
}
