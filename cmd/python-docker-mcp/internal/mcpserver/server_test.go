package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

var update = flag.Bool("update", false, "rewrite the replies of the transcripts in testdata")

// scriptedExec is a fake executor: it records requests and answers with
// what the test scripted. Unit tests of the tool layer only; the real
// executor is exercised end to end in the command's tests.
type scriptedExec struct {
	mu       sync.Mutex
	requests []executor.Request
	result   executor.Result
	err      error
	block    bool          // wait for ctx to end, then report what ended it
	gate     chan struct{} // non-nil: each run waits for it to close
	ended    chan error
	files    map[string][]byte
	imported map[string]bool // what Imported reports
}

func (f *scriptedExec) run(ctx context.Context, req executor.Request) (*executor.Result, error) {
	if req.Progress != nil {
		req.Progress("starting a sandbox")
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	res, err, block, gate := f.result, f.err, f.block, f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if block {
		<-ctx.Done()
		f.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func (f *scriptedExec) Transient(ctx context.Context, req executor.Request) (*executor.Result, error) {
	return f.run(ctx, req)
}

func (f *scriptedExec) Persistent(ctx context.Context, id string, req executor.Request) (*executor.Result, string, error) {
	if id != "" && id != "s1" {
		return nil, "", executor.ErrUnknownSession
	}
	res, err := f.run(ctx, req)
	if res != nil {
		res.SessionID = "s1"
	}
	return res, "s1", err
}

func (f *scriptedExec) Cleanup(ctx context.Context, owner, id string) error {
	if id != "s1" {
		return executor.ErrUnknownSession
	}
	return nil
}

func (f *scriptedExec) Sessions(owner string) []executor.SessionInfo {
	now := time.Now()
	return []executor.SessionInfo{{ID: "s1", Owner: owner, Created: now.Add(-time.Minute), LastUsed: now, Expires: now.Add(30 * time.Minute)}}
}

func (f *scriptedExec) ReadFile(ctx context.Context, owner, id, p string) ([]byte, error) {
	if id != "s1" {
		return nil, executor.ErrUnknownSession
	}
	d, ok := f.files[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return d, nil
}

func (f *scriptedExec) WriteFile(ctx context.Context, owner, id, p string, data []byte) error {
	if id != "s1" {
		return executor.ErrUnknownSession
	}
	if strings.Contains(p, "..") {
		return executor.ErrInvalidPath
	}
	f.files[p] = data
	return nil
}

func (f *scriptedExec) ReadFileAt(ctx context.Context, owner, id, p string, offset, length int64) (executor.FileChunk, error) {
	d, err := f.ReadFile(ctx, owner, id, p)
	if err != nil {
		return executor.FileChunk{}, err
	}
	if offset > int64(len(d)) {
		return executor.FileChunk{}, executor.ErrInvalidRequest
	}
	end := int64(len(d))
	if length > 0 {
		end = min(end, offset+length)
	}
	return executor.FileChunk{Data: d[offset:end], Offset: offset, FileSize: int64(len(d))}, nil
}

func (f *scriptedExec) AppendFile(ctx context.Context, owner, id, p string, data []byte) (int64, error) {
	if err := f.WriteFile(ctx, owner, id, p, append(append([]byte{}, f.files[p]...), data...)); err != nil {
		return 0, err
	}
	return int64(len(f.files[p])), nil
}

func (f *scriptedExec) ListFiles(ctx context.Context, owner, id, p string) ([]executor.FileInfo, error) {
	var out []executor.FileInfo
	for name, d := range f.files {
		out = append(out, executor.FileInfo{Path: name, Size: int64(len(d))})
	}
	return out, nil
}

func (f *scriptedExec) WorkspaceFiles(ctx context.Context, owner, id string) ([]executor.FileInfo, error) {
	return f.ListFiles(ctx, owner, id, ".")
}

func (f *scriptedExec) Imported(owner, id string, modules []string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range modules {
		if f.imported[m] {
			out = append(out, m)
		}
	}
	return out
}

// slowImage pretends the image is being built: two progress lines, then ready.
type slowImage struct{}

func (slowImage) Wait(ctx context.Context, progress image.Progress) error {
	progress("debootstrap: retrieving packages")
	progress("importing into Docker")
	return nil
}

type harness struct {
	exec    *scriptedExec
	session *sdk.ClientSession
	mu      sync.Mutex
	prog    []string
	logs    []string
}

// start serves the tool layer over an in-process pipe and connects the
// official go-sdk client to it.
func start(t *testing.T, cfg config.Config, protocol string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{exec: &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1), files: map[string][]byte{}}}
	srv := newServer(t, cfg, Deps{Exec: h.exec, Image: slowImage{}})

	cr, sw := io.Pipe() // server -> client
	sr, cw := io.Pipe() // client -> server
	stdio := server.NewStdioServer(srv.MCP())
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		return auth.WithPrincipal(ctx, auth.Principal{Sub: "tester", Scopes: []string{"python:execute", "python:sessions"}})
	})
	go stdio.Listen(ctx, sr, sw)

	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.prog = append(h.prog, r.Params.Message)
			h.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			h.mu.Lock()
			h.logs = append(h.logs, string(b))
			h.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: cr, Writer: cw}, &sdk.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	h.session = cs
	return h
}

func (h *harness) call(t *testing.T, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := h.session.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func textOf(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structuredOf(t *testing.T, r *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func TestDenialNeverReachesExecutor(t *testing.T) {
	cfg := config.Default()
	cfg.BlockedModules = []string{"os", "subprocess"}
	h := start(t, cfg, "")
	for _, tc := range []struct {
		name, code, rule string
		line             float64
	}{
		{"blocked import", "x = 1\nimport os\n", "", 2},
		{"blocked submodule", "import json\nfrom os import path\n", "", 2},
		{"fstring dynamic import", "print(f\"{__import__('subprocess')}\")\n", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.call(t, ToolExecuteTransient, map[string]any{"code": tc.code})
			if !res.IsError {
				t.Fatalf("not an error: %s", textOf(res))
			}
			sc := structuredOf(t, res)
			if sc["status"] != "denied" {
				t.Errorf("status = %v, want denied", sc["status"])
			}
			vs, _ := sc["violations"].([]any)
			if len(vs) == 0 {
				t.Fatalf("no violations in %v", sc)
			}
			v := vs[0].(map[string]any)
			if v["line"] != tc.line {
				t.Errorf("violation line = %v, want %v (%v)", v["line"], tc.line, v)
			}
			if tc.rule != "" && v["rule"] != tc.rule {
				t.Errorf("violation rule = %v, want %v", v["rule"], tc.rule)
			}
			if !strings.Contains(textOf(res), "denied") {
				t.Errorf("text %q does not say denied", textOf(res))
			}
		})
	}
	if n := len(h.exec.requests); n != 0 {
		t.Errorf("executor called %d times for denied code", n)
	}
}

// TestSyntaxErrorWithoutParser: an executor that cannot ask CPython (not a
// Parser) leaves the static step's message, shown as CPython shows one:
// status syntax_error, line, column, the source line with a caret; nothing
// runs.
func TestSyntaxErrorWithoutParser(t *testing.T) {
	h := start(t, config.Default(), "")
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "x = 1\ny = (2,\n"})
	if !res.IsError {
		t.Fatalf("not an error: %s", textOf(res))
	}
	sc := structuredOf(t, res)
	e, _ := sc["error"].(map[string]any)
	if sc["status"] != "syntax_error" || e == nil || e["type"] != "SyntaxError" || e["line"] != 2.0 || e["col"] != 5.0 {
		t.Fatalf("structured content %v; want status syntax_error, a SyntaxError at 2:5", sc)
	}
	want := "  File \"<cell>\", line 2\n    y = (2,\n        ^\nSyntaxError: '(' was never closed"
	if e["traceback"] != want || !strings.Contains(textOf(res), want) {
		t.Errorf("traceback %q, text %q; want both to show %q", e["traceback"], textOf(res), want)
	}
	if n := len(h.exec.requests); n != 0 {
		t.Errorf("executor called %d times for code that does not parse", n)
	}
}

// parsingExec is a Parser with a scripted answer.
type parsingExec struct {
	*scriptedExec
	se  *executor.SyntaxError
	err error
}

func (p parsingExec) Parse(ctx context.Context, req executor.Request) (*executor.SyntaxError, error) {
	return p.se, p.err
}

// TestSyntaxErrorParserAnswers: CPython's answer replaces the static
// step's; when CPython parses the code it is denied (the gate cannot judge
// it); when the sandbox fails, the static step's message says so.
func TestSyntaxErrorParserAnswers(t *testing.T) {
	cfg := config.Default()
	eng, err := policy.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	aerr := &analyze.Error{Line: 1, Col: 5, Kind: "syntax", Msg: "'(' was never closed"}
	cpy := &executor.SyntaxError{Type: "SyntaxError", Message: "invalid syntax", Line: 1, Col: 7,
		Detail: "  File \"<cell>\", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax\n"}
	for _, tc := range []struct {
		name, status, text string
		p                  parsingExec
	}{
		{"cpython", "syntax_error", "line 1, col 7)\n  File \"<cell>\", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax", parsingExec{se: cpy}},
		{"cpython parses", "denied", "static checker cannot parse this code ('(' was never closed), although CPython can", parsingExec{}},
		{"no sandbox", "syntax_error", "SyntaxError: '(' was never closed\n(CPython's check was not available, so this is the static checker's message: no docker)", parsingExec{err: errors.New("no docker")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.scriptedExec = &scriptedExec{}
			srv := New(Deps{Config: func() config.Config { return cfg }, Gate: policy.NewGate(eng), Exec: tc.p, Version: "test"})
			res := srv.syntaxError(context.Background(), ToolExecuteTransient, "def f(:\n", aerr, policy.Input{}, func(string) {})
			sc, _ := res.StructuredContent.(runOut)
			if !res.IsError || sc.Status != tc.status {
				t.Errorf("isError %v, status %q; want an error with status %q", res.IsError, sc.Status, tc.status)
			}
			if got := res.Content[0].(mcp.TextContent).Text; !strings.Contains(got, tc.text) {
				t.Errorf("text %q does not contain %q", got, tc.text)
			}
		})
	}
}

func TestAllowedRunCarriesFactsAndRules(t *testing.T) {
	cfg := config.Default()
	cfg.BlockedModules = []string{"socket"}
	h := start(t, cfg, "")
	r := "42"
	h.exec.result = executor.Result{Status: "ok", Stdout: "hi\n", Result: &r, State: json.RawMessage(`{"x":41}`),
		DroppedState: []executor.Dropped{{Name: "f", Type: "function"}},
		Images:       []executor.Image{{PNG: []byte("\x89PNG fake")}}}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "import json\nx + 1", "state": map[string]any{"x": 41}, "timeout": 5})
	if res.IsError {
		t.Fatalf("error: %s", textOf(res))
	}
	if len(h.exec.requests) != 1 {
		t.Fatalf("executor called %d times, want 1", len(h.exec.requests))
	}
	req := h.exec.requests[0]
	if len(req.Imports) != 1 || req.Imports[0].Module != "json" {
		t.Errorf("imports handed to the runner = %+v, want json", req.Imports)
	}
	if diff := cmp.Diff([]string{"_socket", "socket"}, req.Modules.Blocked); diff != "" {
		t.Errorf("blocked modules for the import guard (-want +got):\n%s", diff)
	}
	if req.Limits.Timeout != 5*time.Second {
		t.Errorf("timeout = %v, want 5s", req.Limits.Timeout)
	}
	if string(req.State) != `{"x":41}` {
		t.Errorf("state = %s", req.State)
	}
	if req.Owner != "tester" {
		t.Errorf("owner = %q, want the principal's subject", req.Owner)
	}
	sc := structuredOf(t, res)
	if sc["result"] != "42" || sc["stdout_bytes"] != float64(3) || sc["stdout"] != nil || sc["images"] != float64(1) {
		t.Errorf("structured = %v", sc)
	}
	txt := textOf(res)
	for _, want := range []string{"hi", "result: 42", "f (function)", "1 figure"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text %q lacks %q", txt, want)
		}
	}
	var images int
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok && ic.MIMEType == "image/png" {
			images++
		}
	}
	if images != 1 {
		t.Errorf("image contents = %d, want 1", images)
	}
}

// The decision's capabilities reach the executor, for both execute tools:
// derived from the configuration and tightened by operator Rego per
// principal.
func TestCapabilitiesReachExecutor(t *testing.T) {
	dir := t.TempDir()
	rego := "package pydocker.rules.op\n\ncapability_denied contains \"sockets.inet6\" if input.principal.sub == \"tester\"\n"
	if err := os.WriteFile(filepath.Join(dir, "op.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.BlockedModules = []string{"subprocess", "ctypes"}
	cfg.Policy.Paths = []string{dir}
	h := start(t, cfg, "")
	for _, tool := range []string{ToolExecuteTransient, ToolExecutePersistent} {
		if res := h.call(t, tool, map[string]any{"code": "print(1)"}); res.IsError {
			t.Fatalf("%s: error: %s", tool, textOf(res))
		}
	}
	if len(h.exec.requests) != 2 {
		t.Fatalf("executor called %d times, want 2", len(h.exec.requests))
	}
	want := &executor.Capabilities{Processes: false, Sockets: []string{"inet", "unix"}, PTY: true, NativeCode: false}
	for i, req := range h.exec.requests {
		if diff := cmp.Diff(want, req.Capabilities); diff != "" {
			t.Errorf("request %d: capabilities (-want +got):\n%s", i, diff)
		}
	}
}

func TestLimitAboveMaximumIsDenied(t *testing.T) {
	h := start(t, config.Default(), "")
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "print(1)", "timeout": 3600})
	if !res.IsError || !strings.Contains(textOf(res), "30") {
		t.Errorf("timeout above the maximum: got %q, want a denial naming the maximum 30", textOf(res))
	}
	if len(h.exec.requests) != 0 {
		t.Error("executor called")
	}
}

func TestExecutorStatusIsError(t *testing.T) {
	h := start(t, config.Default(), "")
	h.exec.result = executor.Result{Status: "timeout", DurationMS: 1000}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "while True: pass"})
	if !res.IsError || structuredOf(t, res)["status"] != "timeout" || !strings.Contains(textOf(res), "time limit") {
		t.Errorf("timeout: isError %v, %q", res.IsError, textOf(res))
	}
}

func TestPersistentAndSessions(t *testing.T) {
	h := start(t, config.Default(), "")
	h.exec.result = executor.Result{Status: "ok", Files: []string{"out.csv"}}
	res := h.call(t, ToolExecutePersistent, map[string]any{"code": "open('out.csv','w').write('a')"})
	if res.IsError || structuredOf(t, res)["session_id"] != "s1" {
		t.Fatalf("persistent: %q %v", textOf(res), structuredOf(t, res))
	}
	var links []string
	for _, c := range res.Content {
		if rl, ok := c.(*sdk.ResourceLink); ok {
			links = append(links, rl.URI)
		}
	}
	if diff := cmp.Diff([]string{"sandbox://s1/out.csv"}, links); diff != "" {
		t.Errorf("resource links (-want +got):\n%s", diff)
	}

	res = h.call(t, ToolExecutePersistent, map[string]any{"code": "1", "session_id": "nope"})
	if !res.IsError || !strings.Contains(textOf(res), "unknown session") {
		t.Errorf("unknown session: %q", textOf(res))
	}
	res = h.call(t, ToolListSessions, map[string]any{})
	if res.IsError || !strings.Contains(textOf(res), "s1") {
		t.Errorf("list-sessions: %q", textOf(res))
	}
	res = h.call(t, ToolWriteFile, map[string]any{"session_id": "s1", "path": "data.txt", "content": "aGVsbG8=", "encoding": "base64"})
	if res.IsError {
		t.Fatalf("write-file: %q", textOf(res))
	}
	if got := string(h.exec.files["data.txt"]); got != "hello" {
		t.Errorf("written %q, want hello (base64 decoded)", got)
	}
	res = h.call(t, ToolReadFile, map[string]any{"session_id": "s1", "path": "data.txt"})
	if res.IsError || textOf(res) != "hello" {
		t.Errorf("read-file: %q", textOf(res))
	}
	rr, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "sandbox://s1/data.txt"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello" {
		t.Errorf("resources/read: %v %+v", err, rr)
	}
	res = h.call(t, ToolWriteFile, map[string]any{"session_id": "s1", "path": "../etc/x", "content": "x"})
	if !res.IsError || !strings.Contains(textOf(res), "/workspace") {
		t.Errorf("path escape: %q", textOf(res))
	}
	res = h.call(t, ToolCleanupSession, map[string]any{"session_id": "s1"})
	if res.IsError {
		t.Errorf("cleanup: %q", textOf(res))
	}
}

func TestInstallNotAvailable(t *testing.T) {
	h := start(t, config.Default(), "")
	res := h.call(t, ToolInstallPackage, map[string]any{"package_name": "tabulate"})
	if !res.IsError || !strings.Contains(textOf(res), "not available") {
		t.Errorf("install-package: %q", textOf(res))
	}
}

func TestProgressAndLogging(t *testing.T) {
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) { testProgressAndLogging(t, protocol) })
	}
}

func testProgressAndLogging(t *testing.T, protocol string) {
	h := start(t, config.Default(), protocol)
	params := &sdk.CallToolParams{Name: ToolExecuteTransient, Arguments: map[string]any{"code": "print(1)"}}
	if protocol < "2026-07-28" {
		if err := h.session.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
	} else {
		params.Meta = sdk.Meta{sdk.MetaKeyLogLevel: "debug"}
	}
	params.SetProgressToken("p1")
	if _, err := h.session.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		n, l := len(h.prog), len(h.logs)
		h.mu.Unlock()
		if n >= 3 && l >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress %v, logs %v: want the image lines, the sandbox line and a log", h.prog, h.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !strings.Contains(h.prog[0], "sandbox image") {
		t.Errorf("first progress %q does not say it waits for the image", h.prog[0])
	}
}

func TestCancellationReachesExecutor(t *testing.T) {
	h := start(t, config.Default(), "")
	h.exec.block = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.session.CallTool(ctx, &sdk.CallToolParams{Name: ToolExecuteTransient, Arguments: map[string]any{"code": "import time\ntime.sleep(60)"}})
		done <- err
	}()
	for {
		h.exec.mu.Lock()
		n := len(h.exec.requests)
		h.exec.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-h.exec.ended:
		if err == nil {
			t.Error("executor context ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the call did not cancel the executor's context")
	}
	<-done
}

// countingParser is a Parser that counts its calls.
type countingParser struct {
	*scriptedExec
	calls *int
}

func (p countingParser) Parse(ctx context.Context, req executor.Request) (*executor.SyntaxError, error) {
	*p.calls++
	return &executor.SyntaxError{Type: "SyntaxError", Message: "invalid syntax", Line: 1, Col: 7}, nil
}

// TestSyntaxErrorNeedsAnAllowingPolicy: code that does not parse reaches a
// sandbox (for CPython's message) only when the policy would let the caller
// run code at all; otherwise the call is denied and no sandbox is used.
func TestSyntaxErrorNeedsAnAllowingPolicy(t *testing.T) {
	cfg := config.Default()
	calls := 0
	srv := newServer(t, cfg, Deps{Exec: countingParser{&scriptedExec{}, &calls}})
	over := policy.Input{LimitsRequested: policy.Limits{Timeout: 1e6}} // above docker.timeout: denied
	_, _, res := srv.gate(context.Background(), ToolExecuteTransient, "def f(:\n", over, func(string) {})
	if sc, _ := res.StructuredContent.(runOut); res == nil || sc.Status != "denied" || calls != 0 {
		t.Errorf("syntax error with a denying policy: status %q, %d parse calls; want denied and none", sc.Status, calls)
	}
	_, _, res = srv.gate(context.Background(), ToolExecuteTransient, "def f(:\n", policy.Input{}, func(string) {})
	if sc, _ := res.StructuredContent.(runOut); res == nil || sc.Status != "syntax_error" || calls != 1 {
		t.Errorf("syntax error with an allowing policy: status %q, %d parse calls; want syntax_error and one", sc.Status, calls)
	}
}

// newServer is the tool layer deciding with cfg's policy: d's Config, Gate
// and Version are filled in where unset.
func newServer(tb testing.TB, cfg config.Config, d Deps) *Server {
	tb.Helper()
	if d.Config == nil {
		d.Config = func() config.Config { return cfg }
	}
	if d.Gate == nil {
		eng, err := policy.Load(context.Background(), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		d.Gate = policy.NewGate(eng)
	}
	if d.Version == "" {
		d.Version = "test"
	}
	return New(d)
}
