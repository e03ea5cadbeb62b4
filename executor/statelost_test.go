package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// killSession kills the session's container behind the executor's back.
func killSession(t *testing.T, e *Executor, cli *dockertest.Daemon, id string) {
	t.Helper()
	e.sessions.mu.Lock()
	sb := e.sessions.byID[id].sb
	e.sessions.mu.Unlock()
	if err := cli.Kill(context.Background(), sb.id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	if err := cli.Wait(context.Background(), sb.id); err != nil {
		t.Logf("wait for the killed sandbox: %v", err)
	}
}

func TestStateLostNoticedByFileTool(t *testing.T) {
	e, cli := newExec(t, nil)
	res, id := persistent(t, e, "", Request{Owner: "alice", Code: "import json\nx = 1", Imports: []analyze.Import{{Module: "json", Line: 1}}})
	wantStatus(t, res, "ok")
	if got := e.Imported("alice", id, []string{"json", "csv"}); len(got) != 1 || got[0] != "json" {
		t.Errorf("Imported = %v, want [json]", got)
	}
	if got := e.Imported("bob", id, []string{"json"}); len(got) != 0 {
		t.Errorf("Imported for another owner = %v, want none", got)
	}
	killSession(t, e, cli, id)
	// A file tool is the first to notice: it fails or restarts the sandbox.
	_, ferr := e.ListFiles(tctx(t, time.Minute), "alice", id, "")
	t.Logf("list-files after the kill: %v", ferr)

	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "x"})
	if !res.StateLost || res.Status != "error" || res.Error == nil || res.Error.Type != "NameError" {
		t.Fatalf("first call after the loss: status %s, state_lost %v, error %+v; want a NameError with state_lost", res.Status, res.StateLost, res.Error)
	}
	if got := e.Imported("alice", id, []string{"json"}); len(got) != 0 {
		t.Errorf("Imported after the restart = %v, want none", got)
	}
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "y = 2"})
	wantStatus(t, res, "ok")
	if res.StateLost {
		t.Error("the loss was reported twice")
	}
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "y"})
	if res.StateLost || res.Result == nil || *res.Result != "2" {
		t.Errorf("after the restart: state_lost %v, result %v", res.StateLost, res.Result)
	}
}

func TestStateLostReportedOnceWhenTheRunNotices(t *testing.T) {
	e, cli := newExec(t, nil)
	res, id := persistent(t, e, "", Request{Owner: "alice", Code: "x = 1"})
	wantStatus(t, res, "ok")
	killSession(t, e, cli, id)
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "1"})
	if !res.StateLost {
		t.Fatalf("the call that found the sandbox dead: status %s, state_lost false", res.Status)
	}
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "2"})
	if res.StateLost {
		t.Error("state_lost reported again by the call that restarted the sandbox")
	}
}

// A budget too small for the start: the error says what bounded it. The
// bound is the executor's, so a fake backend whose creation takes a
// minute holds it.
func TestStartBoundedByTimeout(t *testing.T) {
	fb := fake.New()
	fb.CreateDelay = time.Minute
	e := newFakeOn(t, fb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.startWithin(ctx, sandboxMeta{Kind: backend.KindTransient, Owner: "alice"}, Limits{Timeout: time.Second, Memory: 256 << 20, CPUs: 1, Pids: 64}, -StartAllowance+time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "start allowance") {
		t.Fatalf("start with a budget of 1 ms: %v, want an error naming the start allowance", err)
	}
}

// Listing a session's files for the server's own use (WorkspaceFiles)
// leaves its idle clock alone; the fake backend holds this bookkeeping.
func TestWorkspaceFilesIsNotUse(t *testing.T) {
	e, _ := newFake(t, nil)
	id := fakeSession(t, e, "alice", "set x 1")
	if err := e.WriteFile(tctx(t, time.Minute), "alice", id, "a.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	before := e.Sessions("alice")[0].LastUsed
	files, err := e.WorkspaceFiles(tctx(t, time.Minute), "alice", id)
	if err != nil || len(files) != 1 || files[0].Path != "a.txt" {
		t.Fatalf("WorkspaceFiles = %+v, %v", files, err)
	}
	if after := e.Sessions("alice")[0].LastUsed; !after.Equal(before) {
		t.Errorf("listing moved last_used from %v to %v", before, after)
	}
	if files, err := e.WorkspaceFiles(tctx(t, time.Minute), "bob", id); files != nil || err != nil {
		t.Errorf("another owner's listing = %v, %v; want nothing", files, err)
	}
}

func TestImportedCountsThePoolsPreload(t *testing.T) {
	e, _ := newExec(t, func(c *config.Config) {
		c.Pool.Enabled, c.Pool.Size, c.Pool.Preload = true, 1, []string{"json.decoder"}
	})
	deadline := time.Now().Add(60 * time.Second)
	for e.spool().IdleCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	res, id := persistent(t, e, "", Request{Owner: "alice", Code: "1"})
	wantStatus(t, res, "ok")
	if got := e.Imported("alice", id, []string{"json", "csv"}); len(got) != 1 || got[0] != "json" {
		t.Errorf("Imported in a pooled session = %v, want [json] (preloaded)", got)
	}
}
