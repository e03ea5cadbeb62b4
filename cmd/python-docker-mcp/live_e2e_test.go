package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// liveChunk is one live-output notification as a client reads it: the
// message is the chunk's text, _meta["python-docker-mcp/output"] says
// which stream and where.
type liveChunk struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	text   string
	early  bool // came before the call's result
}

// liveClient records the live-output notifications of the calls it makes.
type liveClient struct {
	mu     sync.Mutex
	chunks map[any][]liveChunk // by progress token
	done   map[any]bool        // the call's result came
}

func newLiveClient() *liveClient {
	return &liveClient{chunks: map[any][]liveChunk{}, done: map[any]bool{}}
}

func (l *liveClient) sdkClient() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "e2e-live", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			raw, ok := r.Params.Meta["python-docker-mcp/output"]
			if !ok {
				return // "running" and the like
			}
			b, _ := json.Marshal(raw)
			var c liveChunk
			json.Unmarshal(b, &c)
			c.text = r.Params.Message
			l.mu.Lock()
			defer l.mu.Unlock()
			tok := fmt.Sprint(r.Params.ProgressToken)
			c.early = !l.done[tok]
			l.chunks[tok] = append(l.chunks[tok], c)
		},
	})
}

// call calls a tool with a progress token and returns the result and the
// token.
func (l *liveClient) call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	tok := fmt.Sprintf("live-%d", time.Now().UnixNano())
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	p.SetProgressToken(tok)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	l.mu.Lock()
	l.done[tok] = true
	l.mu.Unlock()
	return res, tok
}

// stream puts a call's chunks of one stream together as the README says:
// each at its offset; it reports the bytes no chunk carried and how many
// chunks came before the result.
func (l *liveClient) stream(tok, name string) (text string, gaps int64, early int) {
	l.mu.Lock()
	cs := append([]liveChunk{}, l.chunks[tok]...)
	l.mu.Unlock()
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Offset < cs[j].Offset })
	var b strings.Builder
	end := int64(0)
	for _, c := range cs {
		if c.Stream != name {
			continue
		}
		gaps += c.Offset - end
		end = c.Offset + c.Bytes
		b.WriteString(c.text)
		if c.early {
			early++
		}
	}
	return b.String(), gaps, early
}

// linesBefore counts the lines of want that were in chunks before the
// result came.
func (l *liveClient) linesBefore(tok string, want []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var early strings.Builder
	for _, c := range l.chunks[tok] {
		if c.early && c.Stream == "stdout" {
			early.WriteString(c.text)
		}
	}
	n := 0
	for _, w := range want {
		if strings.Contains(early.String(), w+"\n") {
			n++
		}
	}
	return n
}

// checkLive: the call's stdout came live, ≥ min of lines before the
// result, and put together it is the whole stream, as long as the result
// says (stdout_bytes) and as the notifications say they carried
// (live.stdout_sent).
func checkLive(t *testing.T, l *liveClient, what string, res *sdk.CallToolResult, tok string, lines []string, min int) {
	t.Helper()
	sc := structured(t, res)
	if res.IsError || sc["status"] != "ok" {
		t.Fatalf("%s: %q %v", what, text(res), sc)
	}
	// A notification sent just before the result may be read just after
	// it: wait for the stream to be whole.
	var got string
	var gaps int64
	want := strings.Join(lines, "\n") + "\n"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, gaps, _ = l.stream(tok, "stdout")
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want || gaps != 0 {
		t.Errorf("%s: the notifications give stdout %q (gaps %d bytes), want %q", what, got, gaps, want)
	}
	live, _ := sc["live"].(map[string]any)
	if n, _ := sc["stdout_bytes"].(float64); live == nil || live["stdout_sent"] != n || int(n) != len(want) {
		t.Errorf("%s: live %v, stdout_bytes %v; want stdout_sent = stdout_bytes = %d", what, live, sc["stdout_bytes"], len(want))
	}
	if n := l.linesBefore(tok, lines); n < min {
		t.Errorf("%s: %d of %d lines came as progress before the result, want at least %d", what, n, len(lines), min)
	} else {
		t.Logf("%s: %d of %d lines came as progress before the result", what, n, len(lines))
	}
}

// tenLines prints 10 lines 0.5 s apart, in python or bash.
const (
	tenLinesPython = "import time\nfor i in range(10):\n    print('line', i, flush=True)\n    time.sleep(0.5)\n"
	tenLinesBash   = "for i in 0 1 2 3 4 5 6 7 8 9; do echo line $i; sleep 0.5; done"
)

func tenLines() []string {
	var l []string
	for i := range 10 {
		l = append(l, fmt.Sprintf("line %d", i))
	}
	return l
}

// TestLiveOutputStdio drives the built server over stdio with the go-sdk
// client: with a progress token, a run's stdout reaches the client as
// notifications/progress while the code runs, for execute-transient,
// execute-persistent and bash.
func TestLiveOutputStdio(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	l := newLiveClient()
	c := &mcpClient{stderr: &lockedBuffer{}}
	cs := connectStdio(t, l.sdkClient(), c, []string{"--set", "languages.bash.enabled=true"})
	res, tok := l.call(t, cs, "execute-transient", map[string]any{"code": tenLinesPython})
	checkLive(t, l, "execute-transient", res, tok, tenLines(), 8)

	res, tok = l.call(t, cs, "execute-persistent", map[string]any{"code": tenLinesPython})
	checkLive(t, l, "execute-persistent", res, tok, tenLines(), 8)

	res, tok = l.call(t, cs, "execute-transient", map[string]any{"language": "bash", "code": tenLinesBash})
	checkLive(t, l, "bash", res, tok, tenLines(), 8)

	// Without a progress token: no live account in the result.
	res = (&mcpClient{cs: cs}).call(t, "execute-transient", map[string]any{"code": "print(1)"})
	if sc := structured(t, res); sc["live"] != nil {
		t.Errorf("without a progress token: live %v, want none", sc["live"])
	}
}

// TestLiveOutputHTTP: the same over Streamable HTTP.
func TestLiveOutputHTTP(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, _ := startHTTP(t, cli)
	l := newLiveClient()
	cs, err := l.sdkClient().Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	defer cs.Close()
	res, tok := l.call(t, cs, "execute-transient", map[string]any{"code": tenLinesPython})
	checkLive(t, l, "execute-transient over HTTP", res, tok, tenLines(), 8)
}

// connectStdio starts the built server over stdio with args and connects
// client to it (stdioClient with a client of the test's own).
func connectStdio(t *testing.T, client *sdk.Client, c *mcpClient, args []string, env ...string) *sdk.ClientSession {
	t.Helper()
	cmd := serverCommand(args...)
	cmd.Env = serverEnv(t, env...)
	cmd.Stderr = c.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr:\n%s", err, c.stderr.String())
	}
	c.cs, c.pid = cs, cmd.Process.Pid
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", c.stderr.String())
		}
	})
	return cs
}

// TestLiveOutputFlood measures a flood of output with live output on:
// what reached the client, and how long the flood and a small call made
// meanwhile took, against the same flood without a progress token. It
// logs the figures; it asserts only what does not depend on the
// machine's speed: the result is the capped output as without live
// output, the notifications never overlap and carried what live says.
func TestLiveOutputFlood(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	l := newLiveClient()
	c := &mcpClient{stderr: &lockedBuffer{}}
	cs := connectStdio(t, l.sdkClient(), c, []string{"--set", "pool.size=2"})
	const flood = "import sys\nfor _ in range(3000):\n    sys.stdout.write('x' * 65536 + '\\n')\n"
	plain := &mcpClient{cs: cs}
	plain.call(t, "execute-transient", map[string]any{"code": "1"}) // warm up
	t0 := time.Now()
	res := plain.call(t, "execute-transient", map[string]any{"code": flood})
	without := time.Since(t0)
	sc := structured(t, res)
	if sc["status"] != "ok" || sc["stdout_truncated"] != true {
		t.Fatalf("flood without live output: %v", sc)
	}

	var small time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond)
		t1 := time.Now()
		r := plain.call(t, "execute-transient", map[string]any{"code": "print('small')"})
		small = time.Since(t1)
		if !strings.Contains(text(r), "small") {
			t.Errorf("a small call during the flood: %q", text(r))
		}
	}()
	t0 = time.Now()
	res, tok := l.call(t, cs, "execute-transient", map[string]any{"code": flood})
	with := time.Since(t0)
	wg.Wait()
	sc = structured(t, res)
	if sc["status"] != "ok" || sc["stdout_truncated"] != true {
		t.Fatalf("flood with live output: %v", sc)
	}
	time.Sleep(500 * time.Millisecond) // the last notifications
	_, gaps, early := l.stream(tok, "stdout")
	l.mu.Lock()
	n, carried := len(l.chunks[tok]), int64(0)
	for _, ch := range l.chunks[tok] {
		carried += ch.Bytes
	}
	l.mu.Unlock()
	live, _ := sc["live"].(map[string]any)
	if live == nil || live["stdout_sent"] != float64(carried) {
		t.Errorf("live %v, the notifications carried %d bytes", live, carried)
	}
	t.Logf("flood of %v bytes: without live output %s; with it %s, %d notifications (%d before the result) carried %d bytes, %d not sent; a small call during it took %s",
		sc["stdout_bytes"], without.Round(time.Millisecond), with.Round(time.Millisecond), n, early, carried, gaps, small.Round(time.Millisecond))
}
