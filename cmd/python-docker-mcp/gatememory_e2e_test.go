package main

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestExpressionChainsRefused sends, over HTTP, four 1 MiB `x**x**…`
// chains and two 1 MiB `- - - … 1` chains at once, as one client, while
// another client keeps calling: every chain is refused by
// limits.expression_size (line, size, maximum, config key), the other
// client's calls keep working, and the server's peak RSS (VmHWM) stays
// under 1 GiB (before the expression limit: ~3.5 GiB). The peak RSS and
// the other client's call latencies before and during the attack are
// logged (-v); they are figures, not assertions. PDM_E2E_BINARY runs the
// same against another build of the server (to measure an older one).
func TestExpressionChainsRefused(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, log, pid := startHTTPServer(t, cli)
	connect := func() *mcpClient {
		c := &mcpClient{stderr: log}
		cs, err := newSDKClient(c).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatalf("connect over HTTP: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		c.cs = cs
		return c
	}
	attacker, other := connect(), connect()

	// the other client's simple call, timed for the log
	simple := func() time.Duration {
		start := time.Now()
		res := other.call(t, "execute-transient", map[string]any{"code": "print(1 + 1)"})
		d := time.Since(start)
		if res.IsError || !strings.Contains(text(res), "--- stdout ---\n2") {
			t.Errorf("the other client's call: %s", text(res))
		}
		return d
	}
	simple() // a warm sandbox, as in steady use
	var before []time.Duration
	for range 5 {
		before = append(before, simple())
	}

	const size = 1 << 20
	attacks := []string{}
	for range 4 {
		attacks = append(attacks, "x = x"+strings.Repeat("**x", (size-6)/3)+"\n")
	}
	for range 2 {
		attacks = append(attacks, "x = "+strings.Repeat("- ", (size-6)/2)+"1\n")
	}
	round := func() {
		var wg sync.WaitGroup
		for _, src := range attacks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := attacker.call(t, "execute-transient", map[string]any{"code": src})
				msg := text(res)
				for _, want := range []string{"limits.expression_size", "line 1:", "tokens is over the maximum of 10000 tokens", "limits.max_expression_tokens"} {
					if !res.IsError || !strings.Contains(msg, want) {
						t.Errorf("a 1 MiB chain: isError %v, %.300q; want %q", res.IsError, msg, want)
						break
					}
				}
			}()
		}
		wg.Wait()
	}
	// the attack goes on while the other client makes its calls
	cpu0 := cpuTime(t, pid)
	stop := make(chan struct{})
	rounds := 0
	var attacking sync.WaitGroup
	attacking.Add(1)
	go func() {
		defer attacking.Done()
		for {
			round()
			rounds++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	var during []time.Duration
	for range 5 {
		during = append(during, simple())
	}
	close(stop)
	attacking.Wait()

	hwm := vmHWM(t, pid)
	t.Logf("server VmHWM after %d rounds of 6 chains of 1 MiB: %d MiB; server CPU time during the attack: %v",
		rounds, hwm>>20, cpuTime(t, pid)-cpu0)
	t.Logf("other client's execute-transient print(1 + 1): median %v before, %v during the attack (before %v, during %v)",
		median(before), median(during), before, during)
	if hwm > 1<<30 {
		t.Errorf("server VmHWM %d MiB, want under 1 GiB", hwm>>20)
	}
}

// vmHWM is the peak resident set of process pid, in bytes.
func vmHWM(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// cpuTime is the user and system CPU time process pid has used
// (/proc/PID/stat, in clock ticks of 10 ms).
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// the fields after the command, which is in parentheses
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
