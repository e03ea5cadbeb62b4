package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// attackRun is what one run of an attack measured: the other subject's
// call latencies with no attack (quiet) and during it, interleaved in
// time (blocks of quiet calls and attacked calls take turns, so that
// the machine's drift touches both alike), and the server's peak RSS.
type attackRun struct {
	attack        string
	quiet, during []time.Duration
	hwmBefore     int64 // VmHWM before the first attack, bytes
	hwm           int64 // VmHWM at the end, bytes
	cpu           time.Duration
	attacks       int64  // requests the attacker made
	note          string // what the attacker was answered
}

// ratio is the other subject's median call latency during the attack
// over its median with no attack.
func (r attackRun) ratio() float64 {
	return float64(median(r.during)) / float64(median(r.quiet))
}

func (r attackRun) String() string {
	return fmt.Sprintf("%s: other subject's execute-transient print(1 + 1) median %v quiet, %v during the attack: %.2fx (p90 %v, %v); "+
		"server VmHWM %d MiB before the attacks, %d MiB after; server CPU %v; attacker: %d requests, %s",
		r.attack, median(r.quiet).Round(time.Microsecond), median(r.during).Round(time.Microsecond), r.ratio(),
		pct(r.quiet, 90).Round(time.Microsecond), pct(r.during, 90).Round(time.Microsecond),
		r.hwmBefore>>20, r.hwm>>20, r.cpu, r.attacks, r.note)
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// attackSubjects starts the built server over HTTP with JWT auth and
// returns the other subject's client, the attacker's token, the MCP URL
// and the server's process id.
func attackSubjects(tb testing.TB) (other *sdk.ClientSession, attacker, url string, pid int) {
	tb.Helper()
	cli := dockertest.RequireImage(tb, config.Default().Docker.Image)
	pub, mint := testKeys(tb)
	url, _, pid = startHTTPServer(tb, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub)
	hc := &http.Client{Transport: bearer{mint("bob", "python:execute python:sessions")}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-other", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		tb.Fatalf("connect the other subject: %v", err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs, mint("mallory", "python:execute python:sessions"), url, pid
}

// callSpacing is the pause before each of the other subject's calls.
const callSpacing = time.Second

// runAttack measures the other subject's calls with no attack and during
// attack (which runs until its stop channel closes and returns how many
// requests it made and what it was answered), in rounds blocks of calls
// each way. Every call of the other subject must succeed.
func runAttack(tb testing.TB, name string, other *sdk.ClientSession, pid int, rounds, calls int, attack func(stop <-chan struct{}) (int64, string)) attackRun {
	tb.Helper()
	call := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		time.Sleep(callSpacing)
		start := time.Now()
		res, err := other.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "print(1 + 1)"}})
		d := time.Since(start)
		if err != nil {
			tb.Fatalf("%s: the other subject's call: %v", name, err)
		}
		if res.IsError || !strings.Contains(text(res), "--- stdout ---\n2") {
			tb.Errorf("%s: the other subject's call: %s", name, text(res))
		}
		return d
	}
	// An agent thinks between calls: each call is spaced from the last,
	// so that a pooled sandbox waits for it, as in steady use, and the
	// latency is the server's own work rather than the making of a
	// sandbox.
	call()
	r := attackRun{attack: name, hwmBefore: vmHWM(tb, pid)}
	cpu0 := cpuTime(tb, pid)
	var notes []string
	for range rounds {
		for range calls {
			r.quiet = append(r.quiet, call())
		}
		stop := make(chan struct{})
		var n int64
		var note string
		done := make(chan struct{})
		go func() { defer close(done); n, note = attack(stop) }()
		time.Sleep(500 * time.Millisecond) // the attack in full swing
		for range calls {
			r.during = append(r.during, call())
		}
		close(stop)
		<-done
		r.attacks += n
		notes = append(notes, note)
		time.Sleep(500 * time.Millisecond) // the attack's last requests answered
	}
	r.cpu = cpuTime(tb, pid) - cpu0
	r.hwm = vmHWM(tb, pid)
	r.note = strings.Join(notes, "; ")
	return r
}

// floodAttack sends initialize requests (a protocol version with
// sessions) as fast as workers clients can, until stop closes. Past the
// subject's quotas.transport_sessions each is refused; any other answer
// is an error.
func floodAttack(tb testing.TB, url, token string, workers int) func(stop <-chan struct{}) (int64, string) {
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	return func(stop <-chan struct{}) (int64, string) {
		var n, issued, refused atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", url, strings.NewReader(initializeLegacy))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := hc.Do(req)
					if err != nil {
						tb.Errorf("flood: %v", err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					n.Add(1)
					switch {
					case resp.Header.Get("Mcp-Session-Id") != "":
						issued.Add(1)
					case strings.Contains(string(b), "quotas.transport_sessions"):
						refused.Add(1)
					default:
						tb.Errorf("flood: initialize answered %d %s", resp.StatusCode, b)
						return
					}
				}
			}()
		}
		wg.Wait()
		return n.Load(), fmt.Sprintf("initialize: %d sessions issued, %d refused by quotas.transport_sessions", issued.Load(), refused.Load())
	}
}

// chainAttack calls execute-transient with four 1 MiB `x**x**…` chains
// and two 1 MiB `- - - … 1` chains at once, round after round until stop
// closes; each must be refused by limits.expression_size.
func chainAttack(tb testing.TB, url, token string) func(stop <-chan struct{}) (int64, string) {
	hc := &http.Client{Transport: bearer{token}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-attacker", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		tb.Fatalf("connect the attacker: %v", err)
	}
	tb.Cleanup(func() { cs.Close() })
	const size = 1 << 20
	var srcs []string
	for range 4 {
		srcs = append(srcs, "x = x"+strings.Repeat("**x", (size-6)/3)+"\n")
	}
	for range 2 {
		srcs = append(srcs, "x = "+strings.Repeat("- ", (size-6)/2)+"1\n")
	}
	return func(stop <-chan struct{}) (int64, string) {
		var n, refused atomic.Int64
		for {
			var wg sync.WaitGroup
			for _, src := range srcs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": src}})
					n.Add(1)
					if err != nil {
						tb.Errorf("chain: %v", err)
						return
					}
					if msg := text(res); !res.IsError || !strings.Contains(msg, "limits.expression_size") || !strings.Contains(msg, "limits.max_expression_tokens") {
						tb.Errorf("a 1 MiB chain: isError %v, %.300q; want a limits.expression_size refusal", res.IsError, msg)
						return
					}
					refused.Add(1)
				}()
			}
			wg.Wait()
			select {
			case <-stop:
				return n.Load(), fmt.Sprintf("1 MiB chains: %d refused by limits.expression_size", refused.Load())
			default:
			}
		}
	}
}

// Bounds of the server's peak RSS (VmHWM) under each attack.
const (
	floodHWM = 256 << 20
	chainHWM = 1 << 30
)

// TestAttackOtherSubject: over HTTP with two JWT subjects, one subject
// floods the server with initialize requests (8 clients back to back),
// then sends 1 MiB expression chains (6 at once, round after round),
// while the other subject keeps calling execute-transient. Every call of
// the other subject succeeds, every attacking request is refused with
// its quota or limit, and the server's peak RSS stays under 256 MiB for
// the flood and 1 GiB for the chains. The other subject's latency ratio
// (during the attack / with no attack, in the same run) is logged (-v),
// never asserted; BenchmarkAttackLatency reports it.
func TestAttackOtherSubject(t *testing.T) {
	other, attacker, url, pid := attackSubjects(t)
	flood := runAttack(t, "flood", other, pid, 2, 5, floodAttack(t, url, attacker, 8))
	t.Log(flood)
	if flood.hwm > floodHWM {
		t.Errorf("server VmHWM %d MiB after the flood, want under %d MiB", flood.hwm>>20, floodHWM>>20)
	}
	chain := runAttack(t, "chain", other, pid, 2, 5, chainAttack(t, url, attacker))
	t.Log(chain)
	if chain.hwm > chainHWM {
		t.Errorf("server VmHWM %d MiB after the expression chains, want under %d MiB", chain.hwm>>20, chainHWM>>20)
	}
}

// BenchmarkAttackLatency reports, for each attack of
// TestAttackOtherSubject, the other subject's median latency during the
// attack over its median with no attack in the same run
// (other-ratio), both medians, and the server's peak RSS. Each
// iteration starts a server; run it with -benchtime 1x (or Nx for N
// servers):
//
//	go test -run '^$' -bench AttackLatency -benchtime 3x ./cmd/python-docker-mcp
func BenchmarkAttackLatency(b *testing.B) {
	for _, name := range []string{"flood", "chain"} {
		b.Run(name, func(b *testing.B) {
			var ratios []float64
			var quiet, during []time.Duration
			var hwm int64
			for range b.N {
				other, attacker, url, pid := attackSubjects(b)
				attack := floodAttack(b, url, attacker, 8)
				if name == "chain" {
					attack = chainAttack(b, url, attacker)
				}
				r := runAttack(b, name, other, pid, 3, 5, attack)
				b.Log(r)
				ratios = append(ratios, r.ratio())
				quiet, during = append(quiet, median(r.quiet)), append(during, median(r.during))
				hwm = max(hwm, r.hwm)
			}
			sort.Float64s(ratios)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ratios[len(ratios)/2], "other-ratio")
			b.ReportMetric(ratios[len(ratios)-1], "other-ratio-max")
			b.ReportMetric(float64(median(quiet).Microseconds())/1000, "quiet-ms")
			b.ReportMetric(float64(median(during).Microseconds())/1000, "attacked-ms")
			b.ReportMetric(float64(hwm>>20), "VmHWM-MiB")
		})
	}
}
