package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// waitSandboxes waits until the server process pid runs at least n sandboxes.
func waitSandboxes(t *testing.T, cli *client.Client, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for sandboxes(t, cli, pid) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sandbox(es) running, want %d", sandboxes(t, cli, pid), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSandboxesGone waits until the running server pid has no sandbox
// (holders of network namespaces stay while it runs).
func waitSandboxesGone(t *testing.T, cli *client.Client, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for sandboxes(t, cli, pid) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d sandbox(es) left", what, sandboxes(t, cli, pid))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStdioClientGone kills the client's side of the stdio pipes while
// calls run (transient and new persistent sessions): a closed stdout is
// the end of the client, like EOF on stdin, not a SIGPIPE death. The
// server cancels the calls, removes every sandbox and volume, and exits 0.
func TestStdioClientGone(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	for _, c := range []struct {
		name       string
		closeStdin bool
	}{
		{"stdin and stdout closed", true},
		{"stdout closed", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := serverCommand("--set", "pool.enabled=false")
			cmd.Env = serverEnv(t)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				select {
				case <-exited:
				default:
					cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("server stderr:\n%s", stderr.String())
				}
			})
			out := bufio.NewReader(stdout)
			send := func(s string) { fmt.Fprintln(stdin, s) }
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + legacyProtocol + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			if l, err := out.ReadString('\n'); err != nil || !strings.Contains(l, `"id":1`) {
				t.Fatalf("initialize reply: %q %v", l, err)
			}
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for i, tool := range []string{"execute-transient", "execute-transient", "execute-persistent", "execute-persistent"} {
				send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"code":"import time\ntime.sleep(120)"}}}`, 10+i, tool))
			}
			waitSandboxes(t, cli, cmd.Process.Pid, 4)
			if n := len(packageVolumes(t, cli, cmd.Process.Pid)); n == 0 {
				t.Fatal("the new sessions have no package volume: the test would not see one left behind")
			}

			stdout.Close() // the client's end: the server's next write fails
			if c.closeStdin {
				stdin.Close()
			} else {
				send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`) // its reply is a write to the closed pipe
			}
			select {
			case err := <-exited:
				exited <- err // for the cleanup
				if err != nil {
					t.Fatalf("the server ended with %v, want exit status 0", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the server did not stop after its client went away")
			}
			waitNoSandboxes(t, cli, cmd.Process.Pid, "after the client went away")
			waitNoVolumes(t, cli, cmd.Process.Pid, "after the client went away")
			if !strings.Contains(stderr.String(), "client is gone") && !c.closeStdin {
				t.Errorf("the log does not say why the server stopped:\n%s", stderr.String())
			}
		})
	}
}

// postCtx is post with a context; a cancelled ctx is a client that
// disconnects before the reply.
func postCtx(ctx context.Context, url, session, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
	req.Header.Set("Mcp-Session-Id", session)
	return http.DefaultClient.Do(req)
}

// TestHTTPDisconnectedCallLeavesNoSession: a call that creates a session,
// whose client disconnects before the reply, removes the session (its id
// was never read, so nobody could use or end it) with its sandbox and
// volume while the server keeps running.
func TestHTTPDisconnectedCallLeavesNoSession(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, _, pid := startHTTPServer(t, cli, "--set", "pool.enabled=false")
	resp, body := post(t, "POST", url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyProtocol+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, id, body)
	}
	post(t, "POST", url, "", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// The call asks for progress, so its reply is an event stream that
	// says "running" once the session exists and its code was sent.
	ctx, disconnect := context.WithCancel(context.Background())
	defer disconnect()
	resp, err := postCtx(ctx, url, id, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"execute-persistent","arguments":{"code":"import time\ntime.sleep(120)"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	events := bufio.NewReader(resp.Body)
	for {
		l, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the call's stream ended before its code ran: %v", err)
		}
		if strings.Contains(l, `"message":"running"`) {
			break
		}
	}
	if len(packageVolumes(t, cli, pid)) == 0 {
		t.Fatal("the new session has no package volume: the test would not see one left behind")
	}
	disconnect()
	resp.Body.Close()
	waitSandboxesGone(t, cli, pid, "after the client disconnected")
	waitNoVolumes(t, cli, pid, "after the client disconnected")
	_, body = post(t, "POST", url, "", id, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list-sessions","arguments":{}}}`)
	if !strings.Contains(body, "no sessions") {
		t.Errorf("list-sessions after the disconnected call: %s, want no sessions", body)
	}
}

// TestHTTPCancellationEveryProtocol cancels a long call from the official
// go-sdk client at its default protocol version (2026-07-28, which sends
// notifications/cancelled without _meta) and at 2025-11-25: the call ends
// early, its sandbox goes, and the same client's later calls work.
func TestHTTPCancellationEveryProtocol(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, log, pid := startHTTPServer(t, cli, "--set", "pool.enabled=false")
	for _, protocol := range []string{"", legacyProtocol} {
		name := protocol
		if name == "" {
			name = "client default"
		}
		t.Run(name, func(t *testing.T) {
			c := &mcpClient{stderr: log}
			cs, err := newSDKClient(c).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: protocol})
			if err != nil {
				t.Fatalf("connect over HTTP: %v", err)
			}
			c.cs = cs
			defer cs.Close()
			t.Logf("protocol %s", cs.InitializeResult().ProtocolVersion)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "import time\ntime.sleep(120)"}})
				done <- err
			}()
			waitSandboxes(t, cli, pid, 1)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled call: %v, want context.Canceled", err)
			}
			waitSandboxesGone(t, cli, pid, "after the cancellation")
			for i := range 2 {
				if res := c.call(t, "execute-transient", map[string]any{"code": "print(2)"}); res.IsError || !strings.Contains(text(res), "2") {
					t.Errorf("call %d after the cancellation: %q", i+1, text(res))
				}
			}
		})
	}
}

// postModern sends one raw request of protocol 2026-07-28 (no session) with
// token and returns the status and body.
func postModern(t *testing.T, url, token, method, name, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
	if err != nil {
		t.Errorf("%s: %v", method, err)
		return 0, ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func modernSleep(id int, seconds int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":"execute-transient","arguments":{"code":"import time\ntime.sleep(%d)\nprint('finished')"}}}`, id, modernMeta, seconds)
}

func modernCancel(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{%s,"requestId":%d}}`, modernMeta, id)
}

// TestHTTPCancelIsPerPrincipal: over protocol 2026-07-28 (no sessions) two
// JWT subjects use the same request id. Bob's notifications/cancelled for
// that id does nothing to Alice's call, which completes; Alice's own
// cancellation ends her call without a reply and removes its sandbox.
func TestHTTPCancelIsPerPrincipal(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	url, _, pid := startHTTPServer(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub,
		"--set", "pool.enabled=false", "--set", "policy.decision_log="+dlog)
	all := "python:execute python:sessions"
	alice, bob := mint("alice", all), mint("bob", all)

	type reply struct {
		status int
		body   string
	}
	done := make(chan reply, 1)
	go func() {
		s, b := postModern(t, url, alice, "tools/call", "execute-transient", modernSleep(7, 10))
		done <- reply{s, b}
	}()
	waitLine(t, dlog, `"tool":"execute-transient"`, `"allow":true`, `"alice"`)
	if s, b := postModern(t, url, bob, "notifications/cancelled", "", modernCancel(7)); s != http.StatusAccepted {
		t.Fatalf("bob's notifications/cancelled: %d %s, want 202", s, b)
	}
	select {
	case r := <-done:
		t.Fatalf("alice's call ended before bob's cancellation was answered (%d %.300s): nothing was shown", r.status, r.body)
	default:
	}
	r := <-done
	if r.status != 200 || !strings.Contains(r.body, `"id":7`) || !strings.Contains(r.body, `finished`) || strings.Contains(r.body, `"isError":true`) {
		t.Fatalf("alice's call after bob cancelled its id: %d %.500s, want it completed", r.status, r.body)
	}
	// The first call's sandbox must be gone before the second starts: on a
	// loaded machine its removal can lag, and waitSandboxes below would
	// count it and cancel before the second call is in flight.
	waitSandboxesGone(t, cli, pid, "after alice's first call")

	go func() {
		s, b := postModern(t, url, alice, "tools/call", "execute-transient", modernSleep(8, 120))
		done <- reply{s, b}
	}()
	waitSandboxes(t, cli, pid, 1)
	if s, b := postModern(t, url, alice, "notifications/cancelled", "", modernCancel(8)); s != http.StatusAccepted {
		t.Fatalf("alice's notifications/cancelled: %d %s, want 202", s, b)
	}
	select {
	case r = <-done:
	case <-time.After(100 * time.Second):
		t.Fatal("alice's cancelled call did not end")
	}
	if strings.Contains(r.body, `"id":8`) || strings.Contains(r.body, "finished") {
		t.Errorf("alice's cancelled call got a reply: %d %s", r.status, r.body)
	}
	waitSandboxesGone(t, cli, pid, "after alice's cancellation")
}
