package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/tools/txtar"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// binary is the server built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pdm-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "python-docker-mcp")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the server: %v\n%s", err, out)
		os.Exit(1)
	}
	// PDM_E2E_BINARY runs the suite against another build of the server,
	// to measure an older one or to see a new test fail on it.
	if b := os.Getenv("PDM_E2E_BINARY"); b != "" {
		binary = b
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serverEnv is a clean environment: no user config, a temp HOME.
func serverEnv(t testing.TB, extra ...string) []string {
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for _, k := range []string{"DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

type mcpClient struct {
	cs     *sdk.ClientSession
	pid    int // the server process
	mu     sync.Mutex
	prog   []string
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newSDKClient(c *mcpClient) *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.prog = append(c.prog, r.Params.Message)
			c.mu.Unlock()
		},
	})
}

// stdioClient starts the built server over stdio with the official go-sdk
// client's CommandTransport.
func stdioClient(t *testing.T, protocol string, args []string, env ...string) *mcpClient {
	t.Helper()
	cmd := serverCommand(args...)
	cmd.Env = serverEnv(t, env...)
	c := &mcpClient{stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := newSDKClient(c).Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, &sdk.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr:\n%s", err, c.stderr.String())
	}
	c.cs = cs
	c.pid = cmd.Process.Pid
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", c.stderr.String())
		}
	})
	return c
}

func (c *mcpClient) call(t *testing.T, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, r *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// containers counts the containers of the server process pid (other
// tests' and other servers' may exist at the same time); holders of
// network namespaces, and the container that fills the interpreter tree
// volume (created and removed at once), only when withHolders.
func containers(t testing.TB, cli *client.Client, pid int, withHolders bool) int {
	t.Helper()
	f := make(client.Filters).Add("label", backend.LabelKind).Add("label", fmt.Sprintf("%s=%d", backend.LabelPID, pid))
	l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range l.Items {
		if k := c.Labels[backend.LabelKind]; withHolders || (k != backend.KindNetwork && k != backend.KindTree) {
			n++
		}
	}
	return n
}

// sandboxes counts the sandboxes of the server process pid: a holder of a
// network namespace outlives the sandbox that leased it, idle for the next.
func sandboxes(t *testing.T, cli *client.Client, pid int) int {
	return containers(t, cli, pid, false)
}

// waitNoSandboxes waits until no container of the server process pid is
// left, holders included (they go with the server).
func waitNoSandboxes(t testing.TB, cli *client.Client, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for containers(t, cli, pid, true) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d container(s) left behind", what, containers(t, cli, pid, true))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exercise runs every tool end to end against real Docker.
func exercise(t *testing.T, c *mcpClient) {
	// tools/list matches the tool layer's transcript of it.
	lt, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(lt.Tools, "", "  ")
	// The servers here run with blocked_modules=socket, which the code
	// description states; the transcript is of the defaults.
	const blocked = " These modules may not be imported: socket."
	if n := strings.Count(string(got), blocked); n != 2 {
		t.Errorf("the code descriptions state blocked_modules %d times, want 2 (both execute tools)", n)
	}
	got = []byte(strings.ReplaceAll(string(got), blocked, ""))
	var gotTools any
	if err := json.Unmarshal(got, &gotTools); err != nil {
		t.Fatal(err)
	}
	// The go-sdk client (v1.8.0) has no field for a tool's execution
	// (taskSupport), so its Tool drops it: the transcript's is left out.
	want := transcriptTools(t)
	for _, tool := range want.([]any) {
		delete(tool.(map[string]any), "execution")
	}
	if diff := cmp.Diff(want, gotTools); diff != "" {
		t.Errorf("tools/list over the wire differs from the tool layer's transcript (-want +got):\n%s", diff)
	}

	t.Run("print", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "print(1)"})
		if res.IsError || structured(t, res)["stdout_bytes"] != float64(2) || !strings.Contains(text(res), "--- stdout ---\n1") {
			t.Fatalf("print(1): %q", text(res))
		}
	})
	t.Run("state", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "x + 1", "state": map[string]any{"x": 41}})
		sc := structured(t, res)
		st, _ := sc["state"].(map[string]any)
		if res.IsError || sc["result"] != "42" || st["x"] != float64(41) {
			t.Fatalf("state: %q %v", text(res), sc)
		}
	})
	t.Run("denial", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "import json\nimport socket\n"})
		sc := structured(t, res)
		vs, _ := sc["violations"].([]any)
		if !res.IsError || sc["status"] != "denied" || len(vs) != 1 || vs[0].(map[string]any)["line"] != float64(2) {
			t.Fatalf("denial: %q %v", text(res), sc)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		res := c.call(t, "execute-transient", map[string]any{"code": "while True: pass", "timeout": 2})
		if !res.IsError || structured(t, res)["status"] != "timeout" {
			t.Fatalf("timeout: %q", text(res))
		}
		t.Logf("timeout of 2 s reported after %v", time.Since(start))
	})
	t.Run("figure", func(t *testing.T) {
		res := c.call(t, "execute-transient", map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"})
		var pngs int
		for _, ct := range res.Content {
			if ic, ok := ct.(*sdk.ImageContent); ok && ic.MIMEType == "image/png" && strings.HasPrefix(string(ic.Data), "\x89PNG") {
				pngs++
			}
		}
		if res.IsError || pngs != 1 {
			t.Fatalf("figure: %d PNGs, %q", pngs, text(res))
		}
	})
	t.Run("session and files", func(t *testing.T) {
		res := c.call(t, "execute-persistent", map[string]any{"code": "import pandas as pd\ndef double(v):\n    return 2 * v\n"})
		id, _ := structured(t, res)["session_id"].(string)
		if res.IsError || len(id) != 32 {
			t.Fatalf("new session: %q", text(res))
		}
		if r := c.call(t, "write-file", map[string]any{"session_id": id, "path": "in/data.csv", "content": "a,b\n1,2\n3,4\n"}); r.IsError {
			t.Fatalf("write-file: %q", text(r))
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "df = pd.read_csv('in/data.csv')\ndf.to_csv('out.csv', index=False)\ndouble(int(df['b'].sum()))"})
		if res.IsError || structured(t, res)["result"] != "12" {
			t.Fatalf("second call: %q", text(res))
		}
		var link string
		for _, ct := range res.Content {
			if rl, ok := ct.(*sdk.ResourceLink); ok {
				link = rl.URI
			}
		}
		if link != "sandbox://"+id+"/out.csv" {
			t.Errorf("resource link = %q, want sandbox://%s/out.csv", link, id)
		}
		rr, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "sandbox://" + id + "/out.csv"})
		if err != nil || len(rr.Contents) != 1 || !strings.HasPrefix(rr.Contents[0].Text, "a,b") {
			t.Errorf("resources/read: %v %+v", err, rr)
		}
		if r := c.call(t, "list-files", map[string]any{"session_id": id}); r.IsError || !strings.Contains(text(r), "out.csv") {
			t.Errorf("list-files: %q", text(r))
		}
		if r := c.call(t, "read-file", map[string]any{"session_id": id, "path": "/etc/passwd"}); !r.IsError {
			t.Errorf("read-file outside /workspace was allowed: %q", text(r))
		}
		if r := c.call(t, "list-sessions", map[string]any{}); r.IsError || !strings.Contains(text(r), id) {
			t.Errorf("list-sessions: %q", text(r))
		}
		if r := c.call(t, "cleanup-session", map[string]any{"session_id": id}); r.IsError {
			t.Fatalf("cleanup: %q", text(r))
		}
		if r := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "1"}); !r.IsError || !strings.Contains(text(r), "unknown session") {
			t.Errorf("after cleanup: %q", text(r))
		}
	})
	t.Run("install", func(t *testing.T) {
		// This server has no package source (install_e2e_test.go installs
		// from a wheelhouse): a valid request says so; a bad one is refused.
		res := c.call(t, "install-package", map[string]any{"package_name": "tabulate"})
		if !res.IsError || !strings.Contains(text(res), "no package source is configured") {
			t.Errorf("install-package without a source: %q", text(res))
		}
		res = c.call(t, "install-package", map[string]any{"package_name": "tabulate; rm -rf /"})
		if !res.IsError || structured(t, res)["status"] != "invalid" {
			t.Errorf("install-package with an injection: %q", text(res))
		}
	})
}

func TestStdio(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) {
			c := stdioClient(t, protocol, []string{"--set", "blocked_modules=socket"})
			if got := c.cs.InitializeResult().ProtocolVersion; got != protocol {
				t.Errorf("negotiated protocol %q, want %q", got, protocol)
			}
			exercise(t, c)
			c.cs.Close()
			waitNoSandboxes(t, cli, c.pid, "after the stdio client closed")
		})
	}
}

func TestStdioCancellation(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	// Without the pool the run's sandbox is the server's only container, so
	// its coming and going can be watched. (Pooled or not, a cancelled
	// transient run kills and removes its sandbox the same way.)
	c := stdioClient(t, "", []string{"--set", "pool.enabled=false"})
	before := sandboxes(t, cli, c.pid)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "import time\ntime.sleep(120)"}})
		done <- err
	}()
	// Wait until the run's sandbox exists, then cancel.
	deadline := time.Now().Add(60 * time.Second)
	for sandboxes(t, cli, c.pid) <= before {
		if time.Now().After(deadline) {
			t.Fatal("the run's sandbox never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	deadline = time.Now().Add(20 * time.Second)
	for sandboxes(t, cli, c.pid) > before {
		if time.Now().After(deadline) {
			t.Fatalf("cancelled run left its sandbox: %d > %d", sandboxes(t, cli, c.pid), before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The server is still fine.
	if res := c.call(t, "execute-transient", map[string]any{"code": "print(2)"}); res.IsError {
		t.Errorf("after cancellation: %q", text(res))
	}
}

var urlLine = regexp.MustCompile(`url=(http://\S+)`)

// startHTTP starts the built server on a free loopback port with args and
// returns its /mcp URL and its log. At the test's end the server gets
// SIGINT and must leave no sandbox behind.
func startHTTP(t testing.TB, cli *client.Client, args ...string) (string, *lockedBuffer) {
	t.Helper()
	url, log, _ := startHTTPServer(t, cli, args...)
	return url, log
}

// startHTTPServer is startHTTP that also returns the server's process id.
func startHTTPServer(t testing.TB, cli *client.Client, args ...string) (string, *lockedBuffer, int) {
	t.Helper()
	cmd := serverCommand(append([]string{"--transport", "http", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = serverEnv(t)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		waitNoSandboxes(t, cli, cmd.Process.Pid, "after the HTTP server stopped")
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	select {
	case url := <-urlc:
		return url, log, cmd.Process.Pid
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start:\n%s", log.String())
	}
	return "", nil, 0
}

// TestHTTP serves Streamable HTTP (auth off on loopback) and drives it with
// the go-sdk client.
func TestHTTP(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, log := startHTTP(t, cli, "--set", "blocked_modules=socket")
	health, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz")
	if err != nil || health.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, health)
	}
	health.Body.Close()
	big, err := http.Post(url, "application/json", strings.NewReader(strings.Repeat("x", 5<<20)))
	if err != nil || big.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("5 MiB body: %v %v, want 413", err, big)
	}
	if big != nil {
		io.Copy(io.Discard, big.Body)
		big.Body.Close()
	}
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) {
			c := &mcpClient{stderr: log}
			cs, err := newSDKClient(c).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, &sdk.ClientSessionOptions{ProtocolVersion: protocol})
			if err != nil {
				t.Fatalf("connect over HTTP: %v", err)
			}
			c.cs = cs
			defer cs.Close()
			exercise(t, c)
		})
	}
}

// TestServesWhileImageBuilds checks the README's first command on a machine
// without the image: MCP answers at once while the image builds in the
// background, and the image exists afterwards. It builds a small image
// (python3 only) under its own tag so the default one is left alone.
func TestServesWhileImageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds an image with debootstrap")
	}
	cli := dockertest.Require(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("building images needs root")
		}
		t.Skip("building images needs root")
	}
	ref := image.ManagedRepository + ":e2e-build"
	cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	var builtID string
	// Registered before the client, so it runs after the server has exited
	// and removed its containers: the image must then go, not stay behind
	// untagged.
	t.Cleanup(func() {
		if builtID == "" {
			cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
			return
		}
		if _, err := cli.ImageRemove(context.Background(), builtID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove the built image %s: %v", builtID, err)
		}
		if _, err := cli.ImageInspect(context.Background(), builtID); err == nil {
			t.Errorf("the built image %s is still there after the server exited", builtID)
		}
	})
	start := time.Now()
	c := stdioClient(t, "", []string{"--image", ref, "--set", "image.packages=python3", "--set", "pool.enabled=false"})
	if _, err := c.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	answered := time.Since(start)
	if _, err := cli.ImageInspect(context.Background(), ref); err == nil {
		t.Fatalf("the image already exists after initialize and tools/list (%v): MCP waited for the build", answered)
	}
	t.Logf("initialize + tools/list answered after %v while the image was building", answered)
	// A tool call waits for the image (with progress) and then runs.
	params := &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "print('built')"}}
	params.SetProgressToken("build")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(text(res), "built") {
		t.Fatalf("first call after the build: %q", text(res))
	}
	built, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatalf("image not there after the build: %v", err)
	}
	builtID = built.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.prog) == 0 || !strings.Contains(c.prog[0], "sandbox image") {
		t.Errorf("progress while waiting for the image: %q", c.prog)
	}
}

// transcriptTools is the tools/list reply recorded in the tool layer's
// transcript of a client connecting with the default configuration.
func transcriptTools(t *testing.T) any {
	t.Helper()
	const file = "internal/mcpserver/testdata/initialize.txtar"
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name != "reply tools/list" {
			continue
		}
		var reply struct {
			Result struct {
				Tools any `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(f.Data, &reply); err != nil {
			t.Fatalf("%s: reply tools/list: %v", file, err)
		}
		return reply.Result.Tools
	}
	t.Fatalf("%s has no reply tools/list", file)
	return nil
}
