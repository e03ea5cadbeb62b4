package executor

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
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
	if n := dockertest.Ours(t, cli, backend.LabelSession+"="+id); n != 1 {
		t.Fatalf("%d containers for the session, want 1", n)
	}
	if err := e.Cleanup(tctx(t, time.Minute), "alice", id); err != nil {
		t.Fatal(err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelSession+"="+id); n != 0 {
		t.Errorf("%d containers for the session after cleanup, want 0", n)
	}
	_, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Owner: "alice", Code: "1"})
	if !errors.Is(err, ErrUnknownSession) {
		t.Errorf("call after cleanup: %v, want ErrUnknownSession", err)
	}
}

// Session caps are the executor's bookkeeping: the fake backend (script
// code, no daemon) holds them.
func TestPersistentCaps(t *testing.T) {
	e, _ := newFake(t, func(c *config.Config) {
		c.Sessions.MaxPerOwner = 1
		c.Sessions.MaxTotal = 2
	})
	alice := fakeSession(t, e, "alice", "set x 1")
	if _, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "alice", Code: "print 1"}); !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "max_per_owner") {
		t.Errorf("second session of alice: %v, want ErrTooManySessions naming max_per_owner", err)
	}
	fakeSession(t, e, "bob", "print 1")
	if _, _, err := e.Persistent(tctx(t, time.Minute), "", Request{Owner: "carol", Code: "print 1"}); !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "max_total") {
		t.Errorf("third session: %v, want ErrTooManySessions naming max_total", err)
	}
	// A session cleaned up gives its place back.
	if err := e.Cleanup(tctx(t, time.Minute), "alice", alice); err != nil {
		t.Fatal(err)
	}
	fakeSession(t, e, "carol", "print 1")
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
	if n := dockertest.Settled(t, cli, backend.LabelKind+"="+backend.KindPersistent); n != 0 {
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
	var lerr *FileLimitError
	if _, err := e.ReadFile(ctx, "o", id, "big.bin"); !errors.As(err, &lerr) || lerr.Limit != LimitReadChunk || lerr.Size != 5<<20 || errors.Is(err, ErrInvalidPath) {
		t.Errorf("ReadFile of 5 MiB = %v, want a FileLimitError naming %s", err, LimitReadChunk)
	}
}

// Files larger than one call move in parts: appends build them, reads at
// an offset return them, and each refusal names the limit it hit and
// leaves the file as it was.
func TestSessionFileParts(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) {
		c.Limits.MaxFileBytes = 3 << 20
		c.Docker.WorkspaceSize = 3<<20 + 512<<10
	})
	ctx := tctx(t, 2*time.Minute)
	_, id := persistent(t, e, "", Request{Owner: "o", Code: "1"})
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(i * 7 / 3)
	}
	part := int(e.FileLimits().WriteChunk)
	if err := e.WriteFile(ctx, "o", id, "d/f.bin", want[:part]); err != nil {
		t.Fatal(err)
	}
	for off := part; off < len(want); off += part {
		size, err := e.AppendFile(ctx, "o", id, "d/f.bin", want[off:min(off+part, len(want))])
		if err != nil {
			t.Fatalf("AppendFile at %d: %v", off, err)
		}
		if size != int64(min(off+part, len(want))) {
			t.Errorf("AppendFile at %d: the file is %d bytes, want %d", off, size, min(off+part, len(want)))
		}
	}
	var got []byte
	for off := int64(0); ; {
		c, err := e.ReadFileAt(ctx, "o", id, "d/f.bin", off, 1000000)
		if err != nil {
			t.Fatalf("ReadFileAt(%d): %v", off, err)
		}
		if c.FileSize != int64(len(want)) || c.Offset != off {
			t.Fatalf("ReadFileAt(%d): offset %d of a file of %d bytes, want %d of %d", off, c.Offset, c.FileSize, off, len(want))
		}
		got = append(got, c.Data...)
		off += int64(len(c.Data))
		if !c.More() {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(want))
	}
	if _, err := e.ReadFileAt(ctx, "o", id, "d/f.bin", int64(len(want))+1, 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("ReadFileAt past the end = %v, want ErrInvalidRequest", err)
	}
	// One byte more than limits.max_file_bytes: refused, the file unchanged.
	var lerr *FileLimitError
	if _, err := e.AppendFile(ctx, "o", id, "d/f.bin", []byte("x")); !errors.As(err, &lerr) || lerr.Limit != LimitFile || lerr.Size != int64(len(want))+1 || lerr.Max != 3<<20 {
		t.Errorf("AppendFile past limits.max_file_bytes = %v, want a FileLimitError naming %s", err, LimitFile)
	}
	// More than one call takes.
	if err := e.WriteFile(ctx, "o", id, "g.bin", make([]byte, part+1)); !errors.As(err, &lerr) || lerr.Limit != LimitWriteChunk {
		t.Errorf("WriteFile of %d bytes = %v, want a FileLimitError naming %s", part+1, err, LimitWriteChunk)
	}
	// The 3.5 MiB workspace holds 3 MiB already: 1 MiB more does not fit,
	// and the refused new file is not left behind.
	if _, err := e.AppendFile(ctx, "o", id, "g.bin", want[:part]); !errors.As(err, &lerr) || lerr.Limit != LimitWorkspace || !strings.Contains(err.Error(), "docker.workspace_size") {
		t.Errorf("AppendFile into a full workspace = %v, want a FileLimitError naming %s", err, LimitWorkspace)
	}
	if _, err := e.ReadFileAt(ctx, "o", id, "g.bin", 0, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write left g.bin behind: %v", err)
	}
	if c, err := e.ReadFileAt(ctx, "o", id, "d/f.bin", 0, 1); err != nil || c.FileSize != int64(len(want)) {
		t.Errorf("after the refusals d/f.bin is %d bytes (%v), want %d", c.FileSize, err, len(want))
	}
}
