package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// quotaServer starts the built server over HTTP with JWT auth and extra
// settings, and returns its MCP URL, a token minter and a connect function
// for the go-sdk client (protocol version "" for the client's newest).
func quotaServer(t *testing.T, args ...string) (string, func(sub string) string, func(token, version string) (*sdk.ClientSession, error)) {
	t.Helper()
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, append([]string{"--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path=" + pub}, args...)...)
	token := func(sub string) string { return mint(sub, "python:execute python:sessions") }
	connect := func(tok, version string) (*sdk.ClientSession, error) {
		hc := &http.Client{Transport: bearer{tok}}
		var opts *sdk.ClientSessionOptions
		if version != "" {
			opts = &sdk.ClientSessionOptions{ProtocolVersion: version}
		}
		return sdk.NewClient(&sdk.Implementation{Name: "e2e-quota", Version: "1"}, nil).Connect(context.Background(),
			&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, opts)
	}
	return url, token, connect
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// metricsText returns the server's /metrics text.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitMetric waits until the server's metrics have line.
func waitMetric(t *testing.T, url, line string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(metricsText(t, url), line+"\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the metrics never showed %q:\n%s", line, metricsText(t, url))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkQuotaRefusal checks res is a quota_exceeded result of quota name
// at use of max, naming key.
func checkQuotaRefusal(t *testing.T, what string, res *sdk.CallToolResult, name string, use, max float64, key string) {
	t.Helper()
	sc := structured(t, res)
	q, _ := sc["quota"].(map[string]any)
	if !res.IsError || sc["status"] != "quota_exceeded" || q["quota"] != name || q["use"] != use || q["max"] != max || q["key"] != key {
		t.Errorf("%s: %v %s, want quota_exceeded of %s at %v of %v", what, sc["status"], text(res), name, use, max)
	}
	for _, want := range []string{"quota " + name, key} {
		if !strings.Contains(text(res), want) {
			t.Errorf("%s: the message %q does not say %q", what, text(res), want)
		}
	}
}

// TestQuotaSandboxesPerSubject: with quotas.sandboxes 1, subject A's
// second sandbox (while its first call runs, and while its persistent
// session holds one) is refused with the quota's figures and key, while
// subject B's call runs.
func TestQuotaSandboxesPerSubject(t *testing.T) {
	url, token, connect := quotaServer(t, "--set", "quotas.sandboxes=1")
	// Alice's long call is cancelled: over the protocol with sessions,
	// where a cancellation is bound to its session.
	alice, err := connect(token("alice"), legacyProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := connect(token("bob"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := alice.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "import time\ntime.sleep(120)"}})
		done <- err
	}()
	waitMetric(t, url, `python_docker_mcp_quota_use{quota="sandboxes"} 1`)
	res := callTool(t, alice, "execute-transient", map[string]any{"code": "1"})
	checkQuotaRefusal(t, "alice's second call while her first runs", res, "sandboxes", 1, 1, "quotas.sandboxes")
	if res := callTool(t, bob, "execute-transient", map[string]any{"code": "6*7"}); res.IsError || structured(t, res)["result"] != "42" {
		t.Errorf("bob's call while alice is at her quota: %s", text(res))
	}
	cancel()
	<-done
	waitMetric(t, url, `python_docker_mcp_quota_use{quota="sandboxes"} 0`)

	// A persistent session holds a sandbox between its calls.
	res = callTool(t, alice, "execute-persistent", map[string]any{"code": "x = 1"})
	sid, _ := structured(t, res)["session_id"].(string)
	if res.IsError || sid == "" {
		t.Fatalf("alice's session: %s", text(res))
	}
	checkQuotaRefusal(t, "alice's call while her session holds her sandbox", callTool(t, alice, "execute-transient", map[string]any{"code": "1"}),
		"sandboxes", 1, 1, "quotas.sandboxes")
	checkQuotaRefusal(t, "alice's second session", callTool(t, alice, "execute-persistent", map[string]any{"code": "1"}),
		"sandboxes", 1, 1, "quotas.sandboxes")
	if res := callTool(t, alice, "execute-persistent", map[string]any{"session_id": sid, "code": "x + 1"}); res.IsError || structured(t, res)["result"] != "2" {
		t.Errorf("alice's call in her own session: %s", text(res))
	}
	if res := callTool(t, alice, "cleanup-session", map[string]any{"session_id": sid}); res.IsError {
		t.Fatalf("cleanup-session: %s", text(res))
	}
	if res := callTool(t, alice, "execute-transient", map[string]any{"code": "2"}); res.IsError {
		t.Errorf("alice's call after her session ended: %s", text(res))
	}
	waitMetric(t, url, `python_docker_mcp_quota_refusals_total{quota="sandboxes"} 3`)
}

// TestQuotaOutputsPerSubject: subject A's flood of cut outputs evicts only
// A's own kept outputs; B's stays readable. The store (1 MiB) is smaller
// than A's flood (1.5 MB), so a shared budget would lose B's.
func TestQuotaOutputsPerSubject(t *testing.T) {
	_, token, connect := quotaServer(t, "--set", "quotas.output_bytes=512k", "--set", "outputs.max_total_bytes=1m")
	alice, err := connect(token("alice"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := connect(token("bob"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	kept := func(cs *sdk.ClientSession, who string, c byte) string {
		t.Helper()
		res := callTool(t, cs, "execute-transient", map[string]any{"code": "print('" + string(c) + "' * 300000)"})
		uri, _ := structured(t, res)["stdout_uri"].(string)
		if res.IsError || uri == "" {
			t.Fatalf("%s's output was not kept: %s", who, text(res))
		}
		return uri
	}
	read := func(cs *sdk.ClientSession, uri string) (string, error) {
		rr, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return rr.Contents[0].Text, nil
	}
	bobs := kept(bob, "bob", 'b')
	var alices []string
	for range 5 {
		alices = append(alices, kept(alice, "alice", 'a'))
	}
	if got, err := read(bob, bobs); err != nil || got != strings.Repeat("b", 300000)+"\n" {
		t.Errorf("bob's kept output after alice's flood: %v (%d bytes)", err, len(got))
	}
	if _, err := read(alice, alices[4]); err != nil {
		t.Errorf("alice's newest output: %v", err)
	}
	if _, err := read(alice, alices[0]); err == nil {
		t.Error("alice's oldest output outlived her quota")
	}
}

const initializeLegacy = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + legacyProtocol + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestQuotaTransportSessionsPerSubject: past quotas.transport_sessions,
// subject A's initialize is refused with a JSON-RPC error naming the
// quota, its use and key, while B still initializes; ending one of A's
// sessions lets A initialize again.
func TestQuotaTransportSessionsPerSubject(t *testing.T) {
	url, token, connect := quotaServer(t, "--set", "quotas.transport_sessions=3")
	alice, bob := token("alice"), token("bob")
	var ids []string
	for i := range 3 {
		resp, body := post(t, "POST", url, alice, "", initializeLegacy)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || id == "" {
			t.Fatalf("alice's initialize %d: %d %s", i, resp.StatusCode, body)
		}
		ids = append(ids, id)
	}
	for range 20 { // a flood: each refused, none counted
		resp, body := post(t, "POST", url, alice, "", initializeLegacy)
		var reply struct {
			ID    int `json:"id"`
			Error struct {
				Code    int            `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &reply); err != nil || resp.Header.Get("Mcp-Session-Id") != "" || reply.ID != 1 || reply.Error.Code != quotaErrorCode ||
			reply.Error.Data["quota"] != "transport_sessions" || reply.Error.Data["use"] != 3.0 || reply.Error.Data["max"] != 3.0 ||
			!strings.Contains(reply.Error.Message, "quotas.transport_sessions") {
			t.Fatalf("alice's initialize past her quota: %d %s", resp.StatusCode, body)
		}
	}
	// The go-sdk client shows the message.
	if _, err := connect(alice, legacyProtocol); err == nil || !strings.Contains(err.Error(), "quota transport_sessions") || !strings.Contains(err.Error(), "quotas.transport_sessions") {
		t.Errorf("alice's client past her quota: %v", err)
	}
	b, err := connect(bob, legacyProtocol)
	if err != nil {
		t.Fatalf("bob initializes while alice is at her quota: %v", err)
	}
	defer b.Close()
	if res := callTool(t, b, "list-sessions", map[string]any{}); res.IsError {
		t.Errorf("bob's session: %s", text(res))
	}
	if resp, body := post(t, "DELETE", url, alice, ids[0], ""); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE alice's session: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, "POST", url, alice, "", initializeLegacy); resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("alice's initialize after ending a session: %d %s", resp.StatusCode, body)
	}
	waitMetric(t, url, `python_docker_mcp_quota_refusals_total{quota="transport_sessions"} 21`)
}

// TestQuotaInflightBytesPerSubject: while subject A's large request is in
// flight, A's next one past quotas.inflight_bytes is refused with a
// JSON-RPC error naming the quota, while B's request of the same size is
// answered.
func TestQuotaInflightBytesPerSubject(t *testing.T) {
	url, token, _ := quotaServer(t, "--set", "server.max_body_bytes=64k", "--set", "quotas.inflight_bytes=100k")
	alice, bob := token("alice"), token("bob")
	session := func(tok string) string {
		t.Helper()
		resp, body := post(t, "POST", url, tok, "", initializeLegacy)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || id == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		post(t, "POST", url, tok, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return id
	}
	call := func(id int, code string) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": "execute-transient", "arguments": map[string]any{"code": code}}})
		return string(b)
	}
	pad := "# " + strings.Repeat("x", 60000) + "\n"
	as, bs := session(alice), session(bob)
	long := call(7, pad+"import time\ntime.sleep(120)")
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, "POST", url, alice, as, long)
	}()
	waitMetric(t, url, `python_docker_mcp_quota_use{quota="inflight_bytes"} `+strconv.Itoa(len(long)))

	resp, body := post(t, "POST", url, alice, as, call(8, pad+"1"))
	var reply struct {
		ID    int `json:"id"`
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil || reply.ID != 8 || reply.Error.Code != quotaErrorCode ||
		reply.Error.Data["quota"] != "inflight_bytes" || reply.Error.Data["use"] != float64(len(long)) || reply.Error.Data["max"] != float64(100<<10) ||
		!strings.Contains(reply.Error.Message, "quotas.inflight_bytes") {
		t.Errorf("alice's second large request: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, "POST", url, bob, bs, call(8, pad+"6*7")); resp.StatusCode != 200 || !strings.Contains(body, `result: 42`) {
		t.Errorf("bob's request while alice is at her quota: %d %.300s", resp.StatusCode, body)
	}
	post(t, "POST", url, alice, as, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	<-done
	waitMetric(t, url, `python_docker_mcp_quota_use{quota="inflight_bytes"} 0`)
	waitMetric(t, url, `python_docker_mcp_quota_refusals_total{quota="inflight_bytes"} 1`)
}

// TestTransportSessionFloodMemory: one subject sends 5,000 initialize
// requests of a protocol version with sessions, 8 at a time; past
// quotas.transport_sessions (64 by default) each is refused, so the server
// keeps no state for them and its peak RSS (VmHWM) stays bounded. The
// figure is logged (go test -v); README.md of this directory quotes it.
func TestTransportSessionFloodMemory(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _, pid := startHTTPServer(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub)
	tok := mint("flood", "python:execute python:sessions")
	before := vmHWM(t, pid)
	const n, workers = 5000, 8
	var issued, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / workers {
				resp, body := post(t, "POST", url, tok, "", initializeLegacy)
				switch {
				case resp.Header.Get("Mcp-Session-Id") != "":
					issued.Add(1)
				case strings.Contains(body, "quotas.transport_sessions"):
					refused.Add(1)
				default:
					t.Errorf("worker %d: initialize answered %d %s", w, resp.StatusCode, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	after := vmHWM(t, pid)
	t.Logf("%d initialize requests: %d sessions issued, %d refused; server VmHWM %d MiB before, %d MiB after",
		n, issued.Load(), refused.Load(), before>>20, after>>20)
	if issued.Load() != 64 {
		t.Errorf("%d sessions issued to one subject, want the default quota 64", issued.Load())
	}
	if after > 256<<20 {
		t.Errorf("server VmHWM %d MiB after the flood, want under 256 MiB", after>>20)
	}
}
