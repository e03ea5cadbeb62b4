package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// The go-sdk client (v1.8.0) has no support for tasks (tools/call with
// params.task, tasks/get, tasks/result, tasks/cancel, tasks/list), so
// these tests speak raw JSON-RPC over Streamable HTTP (protocol
// 2025-11-25), one transport session per rawClient.

// rawClient is one Streamable HTTP session of one JWT subject.
type rawClient struct {
	t                   *testing.T
	url, token, session string
	id                  int
}

// connectRaw initializes a transport session with token.
func connectRaw(t *testing.T, url, token string) *rawClient {
	t.Helper()
	c := &rawClient{t: t, url: url, token: token}
	resp, body := post(t, http.MethodPost, url, token, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-tasks","version":"1"}}}`)
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || c.session == "" || !strings.Contains(body, `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) {
		t.Fatalf("initialize: %d %q; want a session and the tasks capability", resp.StatusCode, body)
	}
	post(t, http.MethodPost, url, token, c.session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// close ends the transport session, as a client that goes away.
func (c *rawClient) close() {
	post(c.t, http.MethodDelete, c.url, c.token, c.session, "")
}

// rpc sends one request and returns its result, or its error.
func (c *rawClient) rpc(method string, params any) (result map[string]any, rpcErr map[string]any) {
	c.t.Helper()
	c.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	_, body := post(c.t, http.MethodPost, c.url, c.token, c.session, string(b))
	// A reply may come as server-sent events: the last data line is it.
	if i := strings.LastIndex(body, "data: "); i >= 0 {
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var m struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		c.t.Fatalf("%s: %v: %q", method, err, body)
	}
	return m.Result, m.Error
}

// must is rpc that fails the test on an error.
func (c *rawClient) must(method string, params any) map[string]any {
	c.t.Helper()
	res, e := c.rpc(method, params)
	if e != nil {
		c.t.Fatalf("%s %v: error %v", method, params, e)
	}
	return res
}

// startTask calls tool as a task and returns the task's id.
func (c *rawClient) startTask(tool string, args map[string]any) string {
	c.t.Helper()
	res := c.must("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000}})
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "working" {
		c.t.Fatalf("tools/call %s as a task: %v; want a task at once, working", tool, res)
	}
	return id
}

// waitTask polls tasks/get until cond holds for the task (at most max).
func (c *rawClient) waitTask(id string, max time.Duration, what string, cond func(task map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(max)
	for {
		task := c.must("tasks/get", map[string]any{"taskId": id})
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s: still not %s after %s: %v", id, what, max, task)
		}
		time.Sleep(time.Second)
	}
}

func statusMessage(task map[string]any) string { s, _ := task["statusMessage"].(string); return s }

// TestTasksHTTP runs the built server over HTTP with JWT auth and
// tasks.max_duration 2m: a task that runs 90 s (past docker.timeout,
// 30 s) completes while its client's transport session is gone, and a new
// session of the same subject reads its result; another subject finds
// none of it; tasks/cancel stops a transient task's code (its sandbox is
// removed) and a session's (the session keeps its state);
// tasks.max_per_principal refuses one task too many.
func TestTasksHTTP(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _, pid := startHTTPServer(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub,
		"--set", "tasks.max_duration=2m", "--set", "tasks.max_per_principal=2", "--set", "pool.enabled=false")
	all := "python:execute python:sessions"
	alice := connectRaw(t, url, mint("alice", all))
	bob := connectRaw(t, url, mint("bob", all))

	// A 90 s task: its id comes at once.
	const long = "import time\nfor i in range(9):\n    print('tick', i, flush=True)\n    time.sleep(10)\nprint('done')\n"
	t0 := time.Now()
	long1 := alice.startTask("execute-transient", map[string]any{"code": long, "timeout": 100})
	t.Logf("task created in %s", time.Since(t0).Round(time.Millisecond))
	task := alice.waitTask(long1, time.Minute, "showing its output", func(task map[string]any) bool {
		return strings.Contains(statusMessage(task), "tick 0")
	})
	t.Logf("while it runs, tasks/get says: %v", task)

	// Another subject sees none of it.
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if _, e := bob.rpc(m, map[string]any{"taskId": long1}); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "task not found") {
			t.Errorf("bob's %s on alice's task: %v, want task not found", m, e)
		}
	}
	if res := bob.must("tasks/list", map[string]any{}); len(res["tasks"].([]any)) != 0 {
		t.Errorf("bob's tasks/list: %v, want none", res)
	}

	// Without params.task the same time limit is refused: past
	// docker.timeout only a task may go.
	if res := alice.must("tools/call", map[string]any{"name": "execute-transient", "arguments": map[string]any{"code": "1", "timeout": 100}}); res["isError"] != true ||
		!strings.Contains(fmt.Sprint(res["structuredContent"]), "limits.max") {
		t.Errorf("a call (no task) asking for 100 s: %v, want denied by limits.max", res)
	}

	// tasks/cancel stops a transient task's code: its sandbox goes.
	before := sandboxes(t, cli, pid)
	short := alice.startTask("execute-transient", map[string]any{"code": "import time\nprint('started', flush=True)\ntime.sleep(60)\n", "timeout": 100})
	alice.waitTask(short, time.Minute, "started", func(task map[string]any) bool { return strings.Contains(statusMessage(task), "started") })
	waitSandboxes(t, cli, pid, before+1)
	// A third task is one too many (tasks.max_per_principal 2).
	if _, e := alice.rpc("tools/call", map[string]any{"name": "execute-transient", "arguments": map[string]any{"code": "1"}, "task": map[string]any{}}); e == nil ||
		!strings.Contains(fmt.Sprint(e), "tasks.max_per_principal is 2") {
		t.Errorf("a third running task: %v, want refused naming tasks.max_per_principal", e)
	}
	if c := alice.must("tasks/cancel", map[string]any{"taskId": short}); c["status"] != "cancelled" {
		t.Errorf("tasks/cancel: %v, want cancelled", c)
	}
	deadline := time.Now().Add(30 * time.Second)
	for sandboxes(t, cli, pid) > before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := sandboxes(t, cli, pid); n > before {
		t.Errorf("%d sandboxes after the cancelled task, want %d: its sandbox was not removed", n, before)
	}
	if _, e := alice.rpc("tasks/result", map[string]any{"taskId": short}); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "cancelled") {
		t.Errorf("tasks/result of a cancelled task: %v, want an error saying so", e)
	}
	if _, e := alice.rpc("tasks/cancel", map[string]any{"taskId": short}); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "already ended") {
		t.Errorf("tasks/cancel of an ended task: %v, want an error saying so", e)
	}

	// tasks/cancel stops a session's code; the session keeps its state.
	res := alice.must("tools/call", map[string]any{"name": "execute-persistent", "arguments": map[string]any{"code": "x = 41"}})
	sid, _ := res["structuredContent"].(map[string]any)["session_id"].(string)
	inSession := alice.startTask("execute-persistent", map[string]any{"session_id": sid, "code": "import time\nprint('started', flush=True)\ntime.sleep(60)\n", "timeout": 100})
	alice.waitTask(inSession, time.Minute, "started", func(task map[string]any) bool { return strings.Contains(statusMessage(task), "started") })
	alice.must("tasks/cancel", map[string]any{"taskId": inSession})
	res = alice.must("tools/call", map[string]any{"name": "execute-persistent", "arguments": map[string]any{"session_id": sid, "code": "x + 1"}})
	if sc, _ := res["structuredContent"].(map[string]any); sc["result"] != "42" {
		t.Errorf("the session after its task was cancelled: %v, want x + 1 = 42", res)
	}

	// The client goes away; a new session of alice's finds the task
	// and, once it ends, its result.
	alice.close()
	alice = connectRaw(t, url, mint("alice", all))
	list := alice.must("tasks/list", map[string]any{})
	if !strings.Contains(fmt.Sprint(list), long1) {
		t.Errorf("tasks/list after reconnecting: %v, want task %s", list, long1)
	}
	task = alice.waitTask(long1, 2*time.Minute, "completed", func(task map[string]any) bool { return task["status"] != "working" })
	if task["status"] != "completed" {
		t.Fatalf("the 90 s task ended %v, want completed", task)
	}
	res = alice.must("tasks/result", map[string]any{"taskId": long1})
	sc, _ := res["structuredContent"].(map[string]any)
	text := fmt.Sprint(res["content"])
	if sc["status"] != "ok" || !strings.Contains(text, "tick 8") || !strings.Contains(text, "done") || !strings.Contains(fmt.Sprint(res["_meta"]), long1) {
		t.Errorf("tasks/result: %v, want ok with its output and the related task", res)
	}
	t.Logf("the task took %s, its result read after reconnecting", time.Since(t0).Round(time.Second))
}

// TestTasksModernHTTP: over protocol 2026-07-28 (no transport session at
// all) a task is created, read and its result fetched by separate
// requests, which may each come on a new connection; another subject's
// requests do not find it.
func TestTasksModernHTTP(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub)
	all := "python:execute python:sessions"
	alice, bob := mint("alice", all), mint("bob", all)
	s, body := postModern(t, url, alice, "tools/call", "execute-transient",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"execute-transient","arguments":{"code":"import time\ntime.sleep(15)\nprint('finished')"},"task":{}}}`)
	var created struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &created); s != 200 || err != nil || created.Result.Task.Status != "working" {
		t.Fatalf("tools/call with params.task: %d %s", s, body)
	}
	id := created.Result.Task.TaskID
	req := func(method string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{%s,"taskId":%q}}`, method, modernMeta, id)
	}
	if _, b := postModern(t, url, bob, "tasks/get", "", req("tasks/get")); !strings.Contains(b, "task not found") {
		t.Errorf("bob's tasks/get: %s, want task not found", b)
	}
	http.DefaultClient.CloseIdleConnections()
	result := make(chan string, 1)
	go func() {
		_, b := postModern(t, url, alice, "tasks/result", "", req("tasks/result"))
		result <- b
	}()
	// While tasks/result waits for the task, alice's other requests are
	// answered (it holds none of the principal's analysis slots).
	time.Sleep(500 * time.Millisecond)
	if _, b := postModern(t, url, alice, "tasks/list", "", fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{%s}}`, modernMeta)); !strings.Contains(b, id) {
		t.Errorf("alice's tasks/list: %s, want her task", b)
	}
	if _, b := postModern(t, url, alice, "tools/call", "execute-transient", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{`+modernMeta+`,"name":"execute-transient","arguments":{"code":"print(6*7)"}}}`); !strings.Contains(b, "42") {
		t.Errorf("alice's call while her tasks/result waits: %s", b)
	}
	select {
	case b := <-result:
		t.Fatalf("tasks/result answered before the task's 15 s were over (%.300s): nothing was shown", b)
	default:
	}
	if b := <-result; !strings.Contains(b, "finished") || !strings.Contains(b, `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("alice's tasks/result: %s, want the call's output and the related task", b)
	}
}

// TestTasksStdio: over stdio a task's id comes at once, tasks/get shows
// its output while it runs, tasks/result gives its result.
func TestTasksStdio(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	cmd := serverCommand()
	cmd.Env = serverEnv(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	replies := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				replies <- m
			}
		}
		close(replies)
	}()
	rpc := func(id int, method string, params any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		stdin.Write(append(b, '\n'))
		select {
		case m := <-replies:
			if m["id"] != float64(id) {
				t.Fatalf("%s: the reply to %v came, want %d: %v", method, m["id"], id, m)
			}
			return m
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: no reply", method)
		}
		return nil
	}
	rpc(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	// The tools that run as tasks say so (the go-sdk client's Tool has no
	// field for it: read on the wire).
	tools, _ := json.Marshal(rpc(50, "tools/list", map[string]any{}))
	if n := strings.Count(string(tools), `"execution":{"taskSupport":"optional"}`); n != 3 {
		t.Errorf("tools/list: %d tools with taskSupport optional, want 3 (the execute tools and install-package)", n)
	}
	m := rpc(2, "tools/call", map[string]any{"name": "execute-transient", "task": map[string]any{},
		"arguments": map[string]any{"code": "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(1)\n"}})
	id, _ := m["result"].(map[string]any)["task"].(map[string]any)["taskId"].(string)
	if id == "" {
		t.Fatalf("tools/call with params.task: %v", m)
	}
	seen := false
	for i := 3; i < 40 && !seen; i++ {
		got := rpc(i, "tasks/get", map[string]any{"taskId": id})["result"].(map[string]any)
		seen = got["status"] == "working" && strings.Contains(fmt.Sprint(got["statusMessage"]), "step 0")
		time.Sleep(200 * time.Millisecond)
	}
	if !seen {
		t.Errorf("tasks/get never showed the output so far while the task worked")
	}
	res := rpc(100, "tasks/result", map[string]any{"taskId": id})
	if !strings.Contains(fmt.Sprint(res["result"]), "step 2") {
		t.Errorf("tasks/result: %v, want the output", res)
	}
}
