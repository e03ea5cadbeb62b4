package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// legacyProtocol is the newest protocol version with Mcp-Session-Id.
const legacyProtocol = "2025-11-25"

// testKeys writes an RSA public key for auth.public_key_path and returns
// its path and a function minting tokens for a subject and scopes.
func testKeys(t testing.TB) (string, func(sub, scope string) string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pub := filepath.Join(t.TempDir(), "key.pub.pem")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	return pub, func(sub, scope string) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
			"iss": "https://idp.test", "aud": "mcp-pyexec", "sub": sub, "scope": scope,
			"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// post sends one raw Streamable HTTP request (protocol 2025-11-25) and
// returns the response and its body.
func post(t *testing.T, method, url, token, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// TestHTTPSessions checks the Streamable HTTP session rules with the
// go-sdk client and raw requests: an id works only for the subject whose
// token initialized it, a request without one gets 400, one the server
// never issued 404, and after DELETE the id gets 404.
func TestHTTPSessions(t *testing.T) {
	cli := dockertest.Require(t)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub)
	all := "python:execute python:sessions"
	aliceTok, bobTok := mint("alice", all), mint("bob", all)

	hc := &http.Client{Transport: bearer{aliceTok}}
	alice, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-sessions", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatalf("alice connects: %v", err)
	}
	defer alice.Close()
	id := alice.ID()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("session id %q, want 32 hex digits", id)
	}
	if _, err := alice.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("alice lists tools: %v", err)
	}

	for _, c := range []struct {
		name, method, token, session string
		want                         int
	}{
		{"alice with her id", "POST", aliceTok, id, 200},
		{"no id", "POST", aliceTok, "", 400},
		{"GET without id", "GET", aliceTok, "", 400},
		{"DELETE without id", "DELETE", aliceTok, "", 400},
		{"an id never issued", "POST", aliceTok, "0123456789abcdef0123456789abcdef", 404},
		{"bob with alice's id", "POST", bobTok, id, 404},
		{"bob deletes alice's session", "DELETE", bobTok, id, 404},
		{"alice's id still works", "POST", aliceTok, id, 200},
	} {
		resp, body := post(t, c.method, url, c.token, c.session, toolsList)
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d (%s), want %d", c.name, resp.StatusCode, strings.TrimSpace(body), c.want)
		}
	}
	if _, err := alice.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("alice's session after bob's attempts: %v", err)
	}

	if resp, body := post(t, "DELETE", url, aliceTok, id, ""); resp.StatusCode != 200 {
		t.Fatalf("alice deletes her session: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, "POST", url, aliceTok, id, toolsList); resp.StatusCode != 404 {
		t.Errorf("after DELETE: status %d (%s), want 404", resp.StatusCode, body)
	}
	if _, err := alice.ListTools(context.Background(), nil); err == nil {
		t.Errorf("the go-sdk client still works on a deleted session")
	}
}

// waitLine polls path until a line contains every one of subs and returns it.
func waitLine(t *testing.T, path string, subs ...string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			ok := line != ""
			for _, s := range subs {
				ok = ok && strings.Contains(line, s)
			}
			if ok {
				return line
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no line with %q in %s", subs, path)
	return ""
}

const sleepCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute-transient","arguments":{"code":"import time\ntime.sleep(60)"}}}`
const cancelCall = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"changed my mind"}}`

// TestHTTPCancelledCallGetsNoReply cancels a running call with
// notifications/cancelled: its POST ends without a JSON-RPC reply, the
// sandbox goes, and the decision log records the outcome "cancelled".
func TestHTTPCancelledCallGetsNoReply(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	url, _ := startHTTP(t, cli, "--set", "policy.decision_log="+dlog, "--set", "pool.enabled=false")
	resp, body := post(t, "POST", url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyProtocol+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, id, body)
	}
	post(t, "POST", url, "", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	type reply struct {
		status int
		body   string
	}
	done := make(chan reply, 1)
	go func() {
		resp, body := post(t, "POST", url, "", id, sleepCall)
		done <- reply{resp.StatusCode, body}
	}()
	// The decision is logged before the sandbox starts: the call is in flight.
	waitLine(t, dlog, `"tool":"execute-transient"`, `"allow":true`)
	if resp, body := post(t, "POST", url, "", id, cancelCall); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, body)
	}
	var r reply
	select {
	case r = <-done:
	case <-time.After(50 * time.Second):
		t.Fatal("the cancelled call's POST did not end")
	}
	t.Logf("cancelled call: HTTP %d, body %q", r.status, r.body)
	if strings.Contains(r.body, `"id":7`) || strings.Contains(r.body, `"result"`) {
		t.Errorf("cancelled call got a reply: %d %s", r.status, r.body)
	}
	line := waitLine(t, dlog, `"event":"outcome"`)
	var o map[string]any
	json.Unmarshal([]byte(line), &o)
	if o["outcome"] != "cancelled" || o["cancelled"] != true || o["mcp_session"] != id || o["tool"] != "execute-transient" {
		t.Errorf("outcome line %s, want outcome cancelled for session %s", line, id)
	}
	// The session still works.
	if resp, body := post(t, "POST", url, "", id, toolsList); resp.StatusCode != 200 || !strings.Contains(body, "execute-transient") {
		t.Errorf("tools/list after the cancellation: %d %.200s", resp.StatusCode, body)
	}
}

// TestStdioCancelledCallGetsNoReply does the same over stdio with raw
// JSON-RPC lines: everything the server writes until it exits is read, and
// nothing answers the cancelled request.
func TestStdioCancelledCallGetsNoReply(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	stdin, lines, _ := rawServer(t, "--set", "policy.decision_log="+dlog, "--set", "pool.enabled=false")
	send := func(s string) { fmt.Fprintln(stdin, s) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + legacyProtocol + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if l := <-lines; !strings.Contains(l, `"id":1`) {
		t.Fatalf("initialize reply: %s", l)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(sleepCall)
	waitLine(t, dlog, `"tool":"execute-transient"`, `"allow":true`)
	send(cancelCall)
	waitLine(t, dlog, `"event":"outcome"`, `"outcome":"cancelled"`)
	send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	stdin.Close() // the server exits once it has answered
	var all []string
	for l := range lines {
		all = append(all, l)
	}
	got := strings.Join(all, "\n")
	if !strings.Contains(got, `"id":8`) {
		t.Errorf("no reply to the ping after the cancellation:\n%s", got)
	}
	if strings.Contains(got, `"id":7`) {
		t.Errorf("the cancelled request got a reply:\n%s", got)
	}
}

var metricsURL = regexp.MustCompile(`serving Prometheus metrics"? url=(\S+)`)

// waitLog waits for the server's stderr to show a line matching re (the
// log is copied from the server's pipe by another goroutine, so a line
// written before the handshake may arrive after it) and returns the match.
func waitLog(t *testing.T, stderr *lockedBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s in the log:\n%s", re, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape fetches and parses a /metrics page.
func scrape(t *testing.T, url string) map[string]*dto {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	out := map[string]*dto{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			d := &dto{}
			switch {
			case m.Counter != nil:
				d.value = m.Counter.GetValue()
			case m.Gauge != nil:
				d.value = m.Gauge.GetValue()
			case m.Histogram != nil:
				d.value = float64(m.Histogram.GetSampleCount())
			}
			out[key] = d
		}
	}
	return out
}

type dto struct{ value float64 }

func value(m map[string]*dto, key string) float64 {
	if d, ok := m[key]; ok {
		return d.value
	}
	return 0
}

// TestMetricsAfterMixedRun makes a known mix of calls over stdio (the
// go-sdk client), scrapes --metrics-addr and checks every counter against
// the calls made, and the decision log's decision and outcome lines.
func TestMetricsAfterMixedRun(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	c := stdioClient(t, "", []string{"--metrics-addr", "127.0.0.1:0", "--set", "blocked_modules=socket", "--set", "policy.decision_log=" + dlog})
	m := waitLog(t, c.stderr, metricsURL)
	url := m[1]

	calls := []struct {
		tool   string
		args   map[string]any
		status string
	}{
		{"execute-transient", map[string]any{"code": "print(1)"}, "ok"},
		{"execute-transient", map[string]any{"code": "x = 2\nx * 21"}, "ok"},
		{"execute-transient", map[string]any{"code": "1/0"}, "error"},
		{"execute-transient", map[string]any{"code": "import socket\nimport json"}, "denied"},
		{"execute-transient", map[string]any{"code": "import socket as s"}, "denied"},
		{"execute-persistent", map[string]any{"code": "y = 1"}, "ok"},
		{"list-sessions", map[string]any{}, "ok"},
	}
	var session string
	for _, k := range calls {
		res := c.call(t, k.tool, k.args)
		sc := structured(t, res)
		if st, _ := sc["status"].(string); st != "" && st != k.status {
			t.Fatalf("%s %v: status %q, want %q: %s", k.tool, k.args, st, k.status, text(res))
		}
		if id, _ := sc["session_id"].(string); id != "" {
			session = id
		}
	}
	c.call(t, "cleanup-session", map[string]any{"session_id": session})

	got := scrape(t, url)
	want := map[string]float64{
		`python_docker_mcp_tool_calls_total{status=ok,tool=execute-transient}`:     2,
		`python_docker_mcp_tool_calls_total{status=error,tool=execute-transient}`:  1,
		`python_docker_mcp_tool_calls_total{status=denied,tool=execute-transient}`: 2,
		`python_docker_mcp_tool_calls_total{status=ok,tool=execute-persistent}`:    1,
		`python_docker_mcp_tool_calls_total{status=ok,tool=list-sessions}`:         1,
		`python_docker_mcp_tool_calls_total{status=ok,tool=cleanup-session}`:       1,
		`python_docker_mcp_tool_call_duration_seconds{tool=execute-transient}`:     5,
		`python_docker_mcp_tool_call_duration_seconds{tool=execute-persistent}`:    1,
		`python_docker_mcp_policy_denials_total{rule=modules.blocked}`:             2,
		`python_docker_mcp_sandbox_sessions{}`:                                     0,
		`python_docker_mcp_mcp_sessions{}`:                                         1,
		`python_docker_mcp_pool_size{kind=transient}`:                              2,
		`python_docker_mcp_sandbox_start_failures_total{}`:                         0,
	}
	for k, v := range want {
		if g := value(got, k); g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	// The three allowed transient calls each took a sandbox kept from the
	// caller's last call, a pooled sandbox, or started a cold one.
	if h, m, k := value(got, `python_docker_mcp_pool_hits_total{kind=transient}`), value(got, `python_docker_mcp_pool_misses_total{kind=transient}`), value(got, `python_docker_mcp_reuse_hits_total{}`); h+m+k != 3 {
		t.Errorf("transient pool hits %v + misses %v + kept sandbox hits %v = %v, want 3 (one per call that ran)", h, m, k, h+m+k)
	}
	if s := value(got, `python_docker_mcp_sandbox_starts_total{}`); s < 1 {
		t.Errorf("sandbox starts %v, want at least 1", s)
	}

	// The decision log: one decision and one outcome line per call, paired by call_id.
	b, err := os.ReadFile(dlog)
	if err != nil {
		t.Fatal(err)
	}
	decisions, outcomes := map[string]map[string]any{}, map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		id, _ := e["call_id"].(string)
		if id == "" {
			t.Errorf("line without call_id: %s", line)
		}
		if e["event"] == "outcome" {
			outcomes[id] = e
		} else {
			decisions[id] = e
		}
	}
	if len(decisions) != len(calls)+1 || len(outcomes) != len(calls)+1 {
		t.Errorf("%d decisions and %d outcomes, want %d each:\n%s", len(decisions), len(outcomes), len(calls)+1, b)
	}
	statuses := map[string]int{}
	for id, o := range outcomes {
		if decisions[id] == nil {
			t.Errorf("outcome without a decision: %v", o)
		}
		statuses[fmt.Sprint(o["tool"], " ", o["outcome"])]++
		if _, ok := o["duration_ms"].(float64); !ok {
			t.Errorf("outcome without duration_ms: %v", o)
		}
		if o["tool"] == "cleanup-session" && o["session_id"] != session {
			t.Errorf("cleanup outcome session %v, want %s", o["session_id"], session)
		}
	}
	wantStatuses := map[string]int{"execute-transient ok": 2, "execute-transient error": 1, "execute-transient denied": 2,
		"execute-persistent ok": 1, "list-sessions ok": 1, "cleanup-session ok": 1}
	for k, v := range wantStatuses {
		if statuses[k] != v {
			t.Errorf("outcomes %q = %d, want %d (all: %v)", k, statuses[k], v, statuses)
		}
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the metrics run")
}

// TestHTTPMetrics scrapes /metrics on the HTTP transport: live MCP sessions
// follow the go-sdk clients that connect and close.
func TestHTTPMetrics(t *testing.T) {
	cli := dockertest.Require(t)
	url, _ := startHTTP(t, cli)
	murl := strings.TrimSuffix(url, "/mcp") + "/metrics"
	connect := func() *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-metrics", Version: "1"}, nil).Connect(context.Background(),
			&sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: legacyProtocol})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a, b := connect(), connect()
	if _, err := a.CallTool(context.Background(), &sdk.CallToolParams{Name: "list-sessions", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, murl)
	if v := value(got, `python_docker_mcp_mcp_sessions{}`); v != 2 {
		t.Errorf("mcp_sessions with two clients = %v, want 2", v)
	}
	if v := value(got, `python_docker_mcp_tool_calls_total{status=ok,tool=list-sessions}`); v != 1 {
		t.Errorf("list-sessions calls = %v, want 1", v)
	}
	b.Close() // sends DELETE
	if v := value(scrape(t, murl), `python_docker_mcp_mcp_sessions{}`); v != 1 {
		t.Errorf("mcp_sessions after one client closed = %v, want 1", v)
	}
	a.Close()
}

// TestHTTPIDsEchoedExactly: over Streamable HTTP, as over stdio, a request
// id comes back exactly as the client wrote it, in a JSON reply and in an
// event stream, even where a float64 would alter it.
func TestHTTPIDsEchoedExactly(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, _ := startHTTP(t, cli)
	initialize := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"` + legacyProtocol + `","capabilities":{},"clientInfo":{"name":"ids","version":"1"}}}`
	}
	for _, id := range []string{"9007199254740993", "1e3", "-0.5", "7", `"abc"`} {
		resp, body := post(t, http.MethodPost, url, "", "", initialize(id))
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":`+id+`,`) {
			t.Errorf("initialize with id %s: %d %s", id, resp.StatusCode, body)
		}
		if n := resp.Header.Get("Content-Length"); n != "" && n != strconv.Itoa(len(body)) {
			t.Errorf("id %s: Content-Length %s for a body of %d bytes", id, n, len(body))
		}
		// The session's next request, a tool list, keeps the id too.
		sess := resp.Header.Get("Mcp-Session-Id")
		post(t, http.MethodPost, url, "", sess, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		resp, body = post(t, http.MethodPost, url, "", sess, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":`+id+`,`) {
			t.Errorf("tools/list with id %s: %d %.300s", id, resp.StatusCode, body)
		}
	}
}
