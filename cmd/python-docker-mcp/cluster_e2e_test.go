package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/kubernetes"
)

// TestClusterReplicas runs two server processes on one Kubernetes cluster
// (PDM_KUBECONFIG, as the Kubernetes backend's cluster tests; `make
// test-kubernetes` brings one up) behind a round-robin proxy, as replicas
// behind a Service without affinity, and drives them with the official
// go-sdk client over the stateless protocol (2026-07-28): 200 mixed calls
// alternate replicas with none lost or misrouted, and a client of the
// protocol with session ids (2025-11-25) alternates on one signed id; then
// the replica that started both sessions is killed (SIGKILL) in the
// middle of a call into one of them: the client's retry of that call
// with its idempotency key is answered outcome_unknown and not run again,
// and both sessions go on on the other replica with their state. Sandbox
// Pods run under PDM_K8S_RUNTIME_CLASS when it is set.
func TestClusterReplicas(t *testing.T) {
	kc := os.Getenv("PDM_KUBECONFIG")
	if kc == "" {
		t.Skip("PDM_KUBECONFIG not set: no cluster to test against (`make test-kubernetes` brings one up)")
	}
	ns := "python-docker-mcp-sandboxes" // examples/kubernetes/namespace.yaml
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	keyPath := filepath.Join(t.TempDir(), "session.key")
	if err := os.WriteFile(keyPath, []byte(fmt.Sprintf("%x", time.Now().UnixNano())+strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`backend: kubernetes
kubernetes:
  kubeconfig: %q
  namespace: %s
  node_name: %q
  runtime_class: %q
  start_timeout: 3m
docker:
  image: python-docker-mcp-sandbox:latest
  cpu_limit: 0.1
pool:
  enabled: true
  size: 1
  preload: []
server:
  session_key_file: %q
`, kc, ns, os.Getenv("PDM_K8S_NODE_NAME"), os.Getenv("PDM_K8S_RUNTIME_CLASS"), keyPath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	kb, err := kubernetes.New(kubernetes.Config{Kubeconfig: kc, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, kb, cfgPath)
	b := startReplica(t, kb, cfgPath)

	lb := &roundRobin{}
	lb.set(a, b)
	front := &http.Server{Handler: lb}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(ln)
	defer front.Close()
	c := &mcpClient{stderr: &lockedBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cs, err := newSDKClient(c).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer cs.Close()
	c.cs = cs

	// Each session starts on replica a (the proxy sends only there).
	lb.set(a)
	var s1, s2 string
	for _, p := range []*string{&s1, &s2} {
		res := c.call(t, "execute-persistent", map[string]any{"code": "n = 0"})
		if res.IsError {
			t.Fatalf("start a session on replica a: %s", text(res))
		}
		*p, _ = structured(t, res)["session_id"].(string)
	}
	lb.set(a, b)

	// 200 mixed calls, alternating replicas.
	n := map[string]int{s1: 0, s2: 0}
	lost, misrouted := 0, 0
	var persistent []time.Duration
	check := func(i int, what string, res *sdk.CallToolResult, want string) {
		switch {
		case res.IsError:
			lost++
			t.Errorf("call %d (%s): %s", i, what, text(res))
		case !strings.Contains(text(res), want):
			misrouted++
			t.Errorf("call %d (%s): %q does not hold %q", i, what, text(res), want)
		}
	}
	for i := range 200 {
		token := fmt.Sprintf("tok-%d-%d", i, time.Now().UnixNano())
		switch i % 4 {
		case 0:
			check(i, "transient", c.call(t, "execute-transient", map[string]any{"code": fmt.Sprintf("print(%q)", token)}), token)
		case 1, 2:
			s := []string{s1, s2}[i%4-1]
			n[s]++
			t0 := time.Now()
			res := c.call(t, "execute-persistent", map[string]any{"session_id": s, "code": fmt.Sprintf("n += 1\nprint(n, %q)", token)})
			persistent = append(persistent, time.Since(t0))
			check(i, "persistent", res, fmt.Sprintf("%d %s", n[s], token))
		case 3:
			if r := c.call(t, "write-file", map[string]any{"session_id": s1, "path": "t.txt", "content": token}); r.IsError {
				lost++
				t.Errorf("call %d (write-file): %s", i, text(r))
				continue
			}
			check(i, "read-file", c.call(t, "read-file", map[string]any{"session_id": s1, "path": "t.txt"}), token)
		}
	}
	slices.Sort(persistent)
	t.Logf("execute-persistent through the proxy, each call on another replica than the session's last: p50 %s, p95 %s (n=%d)",
		persistent[len(persistent)/2].Round(10*time.Microsecond), persistent[len(persistent)*95/100].Round(10*time.Microsecond), len(persistent))
	sent := lb.counts()
	t.Logf("200 mixed calls: %d lost, %d misrouted; requests per replica: a %d, b %d", lost, misrouted, sent[a], sent[b])
	if sent[a] < 100 || sent[b] < 100 {
		t.Errorf("requests per replica a %d, b %d: the calls did not alternate", sent[a], sent[b])
	}

	// A client of the protocol with sessions (2025-11-25): its session id,
	// issued by one replica, works on both (server.session_key_file).
	legacy := &mcpClient{stderr: &lockedBuffer{}}
	lcs, err := newSDKClient(legacy).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatalf("connect with protocol %s through the proxy: %v", legacyProtocol, err)
	}
	legacy.cs = lcs
	before := lb.counts()
	for i := range 20 {
		token := fmt.Sprintf("legacy-%d", i)
		if res := legacy.call(t, "execute-transient", map[string]any{"code": fmt.Sprintf("print(%q)", token)}); res.IsError || !strings.Contains(text(res), token) {
			t.Errorf("legacy call %d: %q", i, text(res))
		}
	}
	after := lb.counts()
	t.Logf("20 calls of a %s client, session %s: requests per replica a %d, b %d", legacyProtocol, lcs.ID(), after[a]-before[a], after[b]-before[b])
	if after[a]-before[a] < 10 || after[b]-before[b] < 10 {
		t.Errorf("the legacy client's calls did not alternate replicas")
	}
	lcs.Close()

	// Kill a in the middle of a call into s2 (its hold goes stale). The
	// client lost the reply: its retry with the same idempotency key on b
	// is not run again and says the call may have run. Then both sessions
	// go on on b: their interpreters kept their state, and the killed
	// call's own effect (once).
	lb.set(a)
	done := make(chan struct{})
	killed := &sdk.CallToolParams{Name: "execute-persistent", Arguments: map[string]any{"session_id": s2, "code": "n += 1\nimport time\ntime.sleep(4)"},
		Meta: sdk.Meta{"idempotency_key": "killed-call-1"}}
	go func() {
		defer close(done)
		callCtx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		cs.CallTool(callCtx, killed)
	}()
	time.Sleep(2 * time.Second)
	a.kill(t)
	killedAt := time.Now()
	<-done
	n[s2]++
	lb.set(b)
	retryCtx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	retry, err := cs.CallTool(retryCtx, killed)
	rcancel()
	if err != nil || !retry.IsError || !strings.Contains(text(retry), "outcome_unknown") {
		t.Errorf("the killed call retried with its key on replica b: %v %q, want outcome_unknown (it may have run; not run again)", err, text(retry))
	}
	t.Logf("the killed call's retry was answered on replica b %s after replica a was killed: %.120q", time.Since(killedAt).Round(time.Millisecond), text(retry))
	t0 := time.Now()
	for _, s := range []string{s1, s2} {
		n[s]++
		res := c.call(t, "execute-persistent", map[string]any{"session_id": s, "code": "n += 1\nprint('n =', n)"})
		if want := fmt.Sprintf("n = %d", n[s]); res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("session %s on replica b after a was killed: %q, want %q", s, text(res), want)
		}
		if s == s2 && !strings.Contains(text(res), "session.interrupted_call") {
			t.Errorf("the first call run in %s after the takeover: %q, want a warning that the killed call may have run", s, text(res))
		}
	}
	t.Logf("both sessions answered on replica b %s after the retry, %s after replica a was killed mid-call", time.Since(t0).Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))
	for _, s := range []string{s1, s2} {
		if r := c.call(t, "cleanup-session", map[string]any{"session_id": s}); r.IsError {
			t.Errorf("cleanup %s: %s", s, text(r))
		}
	}
}

// replica is one server process.
type replica struct {
	cmd  *exec.Cmd
	url  *url.URL
	log  *lockedBuffer
	once sync.Once
}

var listenURL = regexp.MustCompile(`url=(http://\S+)`)

// startReplica starts the built server with the config at cfgPath. When
// the test ends it is stopped (SIGINT) if still running, and the sandbox
// Pods of a killed replica (which no replica is left to reap) and its
// Lease goes stale (the other replicas delete it later).
func startReplica(t *testing.T, kb *kubernetes.Backend, cfgPath string) *replica {
	t.Helper()
	r := &replica{log: &lockedBuffer{}}
	r.cmd = serverCommand("--config", cfgPath, "--transport", "http", "--addr", "127.0.0.1:0")
	r.cmd.Env = serverEnv(t)
	stderr, _ := r.cmd.StderrPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.log.Write([]byte(sc.Text() + "\n"))
			if m := listenURL.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		r.once.Do(func() {
			r.cmd.Process.Signal(os.Interrupt)
			r.cmd.Wait()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		mine := map[string]string{backend.LabelPID: fmt.Sprint(r.cmd.Process.Pid)}
		for {
			list, err := kb.List(ctx, mine)
			if err != nil {
				t.Errorf("list the replica's pods: %v", err)
				return
			}
			for _, p := range list {
				if !p.Removing {
					kb.Remove(ctx, p.ID)
				}
			}
			if len(list) == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("pods of replica %d still there: %d", r.cmd.Process.Pid, len(list))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if t.Failed() {
			t.Logf("replica %d log:\n%s", r.cmd.Process.Pid, r.log.String())
		}
	})
	select {
	case u := <-urlc:
		r.url, _ = url.Parse(strings.TrimSuffix(u, "/mcp"))
		return r
	case <-time.After(90 * time.Second):
		t.Fatalf("replica did not start:\n%s", r.log.String())
	}
	return nil
}

// kill ends the process at once, as a crash or an OOM kill of its Pod.
func (r *replica) kill(t *testing.T) {
	r.once.Do(func() {
		if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r.cmd.Wait()
	})
}

// roundRobin forwards each request to the next of its replicas, as a
// Service without session affinity does.
type roundRobin struct {
	mu   sync.Mutex
	to   []*replica
	next atomic.Int64
	sent sync.Map // *replica -> *atomic.Int64
}

func (l *roundRobin) set(rs ...*replica) {
	l.mu.Lock()
	l.to = rs
	l.mu.Unlock()
}

func (l *roundRobin) counts() map[*replica]int64 {
	out := map[*replica]int64{}
	l.sent.Range(func(k, v any) bool { out[k.(*replica)] = v.(*atomic.Int64).Load(); return true })
	return out
}

func (l *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	to := l.to[int(l.next.Add(1))%len(l.to)]
	l.mu.Unlock()
	v, _ := l.sent.LoadOrStore(to, &atomic.Int64{})
	v.(*atomic.Int64).Add(1)
	p := httputil.NewSingleHostReverseProxy(to.url)
	p.FlushInterval = -1
	p.ServeHTTP(w, r)
}
