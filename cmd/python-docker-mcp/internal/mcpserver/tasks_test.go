package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// taskCall sends one task request as sub and decodes the reply.
func taskCall(t *testing.T, srv *Server, sub, method string, params any) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Sub: sub, Scopes: []string{"python:execute", "python:sessions"}})
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if !IsTaskRequest(msg) {
		t.Fatalf("IsTaskRequest(%s) = false", msg)
	}
	var r struct {
		ID     int            `json:"id"`
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(srv.HandleTask(ctx, msg), &r); err != nil || r.ID != 7 {
		t.Fatalf("%s: reply %v id %d", method, err, r.ID)
	}
	return r.Result, r.Error
}

// TestTasksUnit: a task runs the call and keeps its result for the ttl
// (the client's when smaller than tasks.ttl), then is gone; another
// principal never sees it; a tool that runs no task is refused; the
// call is judged as a task (its time limit may pass docker.timeout).
func TestTasksUnit(t *testing.T) {
	cfg := config.Default()
	cfg.Tasks.TTL = config.Duration(time.Hour)
	exec := &scriptedExec{result: executor.Result{Status: "ok", Stdout: "hi\n"}, ended: make(chan error, 1)}
	srv := newServer(t, cfg, Deps{Exec: exec, Image: slowImage{}})

	res, e := taskCall(t, srv, "alice", "tools/call", map[string]any{"name": "execute-transient", "arguments": map[string]any{"code": "print('hi')", "timeout": 600}, "task": map[string]any{"ttl": 300}})
	if e != nil {
		t.Fatalf("create: %v", e)
	}
	id := res["task"].(map[string]any)["taskId"].(string)
	if ttl := res["task"].(map[string]any)["ttl"]; ttl != float64(300) {
		t.Errorf("ttl %v, want the client's 300 ms (below tasks.ttl)", ttl)
	}
	res, e = taskCall(t, srv, "alice", "tasks/result", map[string]any{"taskId": id})
	if e != nil || !strings.Contains(fmt.Sprint(res["content"]), "hi") || !strings.Contains(fmt.Sprint(res["_meta"]), id) {
		t.Fatalf("tasks/result: %v %v", res, e)
	}
	exec.mu.Lock()
	got := exec.requests[0]
	exec.mu.Unlock()
	if got.Limits.Timeout != 600*time.Second || got.MaxTimeout != cfg.Tasks.MaxDuration.D() {
		t.Errorf("the task's call: timeout %s, max %s; want 10m0s within tasks.max_duration %s", got.Limits.Timeout, got.MaxTimeout, cfg.Tasks.MaxDuration)
	}
	if _, e := taskCall(t, srv, "bob", "tasks/get", map[string]any{"taskId": id}); e == nil {
		t.Errorf("bob's tasks/get of alice's task: no error")
	}
	if res, _ := taskCall(t, srv, "bob", "tasks/list", map[string]any{}); len(res["tasks"].([]any)) != 0 {
		t.Errorf("bob's tasks/list: %v", res)
	}
	if res, e := taskCall(t, srv, "alice", "tasks/get", map[string]any{"taskId": id}); e != nil || res["status"] != "completed" {
		t.Errorf("tasks/get: %v %v, want completed", res, e)
	}
	time.Sleep(400 * time.Millisecond)
	if _, e := taskCall(t, srv, "alice", "tasks/get", map[string]any{"taskId": id}); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "task not found") {
		t.Errorf("tasks/get after the ttl: %v, want task not found", e)
	}
	if _, e := taskCall(t, srv, "alice", "tools/call", map[string]any{"name": "list-sessions", "arguments": map[string]any{}, "task": map[string]any{}}); e == nil ||
		!strings.Contains(fmt.Sprint(e["message"]), "does not run as a task") {
		t.Errorf("list-sessions as a task: %v, want refused", e)
	}
}

// TestInstallAsTask: install-package runs as a task too; its result is the
// install's, the policy having judged the package as for a plain call.
func TestInstallAsTask(t *testing.T) {
	cfg := config.Default()
	inst := &countingInstaller{count: map[string]int{}}
	exec := &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1)}
	srv := newServer(t, cfg, Deps{Exec: exec, Installer: inst, Image: slowImage{}})
	res, e := taskCall(t, srv, "alice", "tools/call", map[string]any{"name": "install-package", "arguments": map[string]any{"package_name": "tabulate"}, "task": map[string]any{}})
	if e != nil {
		t.Fatalf("create: %v", e)
	}
	id := res["task"].(map[string]any)["taskId"].(string)
	res, e = taskCall(t, srv, "alice", "tasks/result", map[string]any{"taskId": id})
	if e != nil || res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "tabulate") {
		t.Fatalf("tasks/result of install-package: %v %v", res, e)
	}
	inst.mu.Lock()
	n := len(inst.reqs)
	inst.mu.Unlock()
	if n != 1 {
		t.Errorf("%d installs reached the installer, want 1", n)
	}
}

// TestTaskLimitAndCancel: with tasks.max_per_principal 1, a second running
// task is refused (another principal's is not counted); tasks/cancel ends
// the first, its call's context is cancelled, and a new task may start.
func TestTaskLimitAndCancel(t *testing.T) {
	cfg := config.Default()
	cfg.Tasks.MaxPerPrincipal = 1
	exec := &scriptedExec{result: executor.Result{Status: "ok"}, block: true, ended: make(chan error, 4)}
	srv := newServer(t, cfg, Deps{Exec: exec, Image: slowImage{}})
	start := func(sub string) (string, map[string]any) {
		res, e := taskCall(t, srv, sub, "tools/call", map[string]any{"name": "execute-transient", "arguments": map[string]any{"code": "1"}, "task": map[string]any{}})
		if e != nil {
			return "", e
		}
		return res["task"].(map[string]any)["taskId"].(string), nil
	}
	first, e := start("alice")
	if e != nil {
		t.Fatal(e)
	}
	if _, e := start("alice"); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "tasks.max_per_principal is 1") {
		t.Errorf("a second task: %v, want refused naming tasks.max_per_principal", e)
	}
	if _, e := start("bob"); e != nil {
		t.Errorf("bob's first task: %v", e)
	}
	// The task runs in the background: cancel it once its call has reached
	// the executor (on a loaded machine it may not have yet).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		exec.mu.Lock()
		reached := slices.ContainsFunc(exec.requests, func(r executor.Request) bool { return r.Owner == "alice" })
		exec.mu.Unlock()
		if reached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's task never reached the executor")
		}
	}
	if res, e := taskCall(t, srv, "alice", "tasks/cancel", map[string]any{"taskId": first}); e != nil || res["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v %v", res, e)
	}
	select {
	case err := <-exec.ended:
		if err != context.Canceled {
			t.Errorf("the call ended with %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled task's call did not end")
	}
	if _, e := start("alice"); e != nil {
		t.Errorf("a task after the first was cancelled: %v", e)
	}
}
