package executor

import (
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

var (
	latency      = flag.Bool("latency", false, "run TestLatency: p50/p95 of transient and persistent print(1) beside docker run --rm")
	latencyCalls = flag.Int("latency.n", 50, "calls per measurement of TestLatency")
)

// TestLatency is a benchmark, not a test: it measures and prints, and fails
// only when a call fails. Run it with
//
//	go test ./executor -run TestLatency -latency -v
func TestLatency(t *testing.T) {
	if !*latency {
		t.Skip("pass -latency to measure")
	}
	e, cli := newExec(t, nil)
	image := config.Default().Docker.Image
	n := *latencyCalls
	measure := func(name string, call func() error) []time.Duration {
		if err := call(); err != nil { // warm caches once
			t.Fatalf("%s: %v", name, err)
		}
		var d []time.Duration
		for range n {
			t0 := time.Now()
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			d = append(d, time.Since(t0))
		}
		slices.Sort(d)
		return d
	}
	dockerRun := measure("docker run --rm", func() error {
		out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--label", "python-docker-mcp.test=1",
			image, "python3", "-c", "print(1)").CombinedOutput()
		if err != nil || string(out) != "1\n" {
			return fmt.Errorf("%v: %q", err, out)
		}
		return nil
	})
	transientRun := measure("transient", func() error {
		res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print(1)"})
		if err == nil && res.Stdout != "1\n" {
			err = fmt.Errorf("stdout %q", res.Stdout)
		}
		return err
	})
	pooled, _ := newExec(t, func(c *config.Config) { c.Pool.Enabled = true }) // config.Default's pool: size 2, numpy, pandas, matplotlib preloaded
	poolTimed := func(name, code string, imps []analyze.Import, want string) []time.Duration {
		var d []time.Duration
		hits := pooled.pool().Hits()
		for i := range n + 1 {
			waitPoolFull(t, pooled)
			t0 := time.Now()
			res, err := pooled.Transient(tctx(t, time.Minute), Request{Code: code, Imports: imps})
			took := time.Since(t0)
			if err != nil || res.Stdout != want {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
			if i > 0 {
				d = append(d, took)
			}
		}
		if got := pooled.pool().Hits() - hits; got != int64(n+1) {
			t.Fatalf("%s: %d of %d calls served from the pool", name, got, n+1)
		}
		slices.Sort(d)
		return d
	}
	groupBy := "import pandas as pd\ndf = pd.DataFrame({'k': [1, 2, 1], 'v': [1, 2, 3]})\nprint(df.groupby('k')['v'].sum().to_dict())"
	groupByWant := "{1: 4, 2: 2}\n"
	dockerGroupBy := measure("docker run --rm pandas", func() error {
		out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--label", "python-docker-mcp.test=1",
			image, "python3", "-c", groupBy).CombinedOutput()
		if err != nil || string(out) != groupByWant {
			return fmt.Errorf("%v: %q", err, out)
		}
		return nil
	})
	poolPrint := poolTimed("pooled print", "print(1)", nil, "1\n")
	poolGroupBy := poolTimed("pooled group-by", groupBy, []analyze.Import{{Module: "pandas", Alias: "pd", Line: 1}}, groupByWant)
	_, id := persistent(t, e, "", Request{Code: "0"})
	persistentRun := measure("persistent", func() error {
		res, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Code: "print(1)"})
		if err == nil && res.Stdout != "1\n" {
			err = fmt.Errorf("stdout %q", res.Stdout)
		}
		return err
	})
	// Memory of one idle pooled sandbox (numpy, pandas, matplotlib imported):
	// the cgroup's usage minus the page cache, as `docker stats` shows it.
	waitPoolFull(t, pooled)
	idle, _ := pooled.pool().Idle("")
	idleID := idle[0].id
	usage, err := cli.MemoryUsage(tctx(t, time.Minute), idleID)
	if err != nil {
		t.Fatal(err)
	}
	idleMiB := float64(usage) / (1 << 20)

	// Sustained transient print(1) calls per second from c concurrent
	// clients while the pool refills (calls find it empty once they outrun
	// the refill and start cold sandboxes).
	rate := func(c int) (float64, int64) {
		waitPoolFull(t, pooled)
		hits := pooled.pool().Hits()
		var calls atomic.Int64
		end := time.Now().Add(15 * time.Second)
		var wg sync.WaitGroup
		for range c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					if _, err := pooled.Transient(tctx(t, time.Minute), Request{Code: "print(1)"}); err != nil {
						t.Error(err)
						return
					}
					calls.Add(1)
				}
			}()
		}
		t0 := time.Now()
		wg.Wait()
		return float64(calls.Load()) / time.Since(t0).Seconds(), pooled.pool().Hits() - hits
	}
	type rateRow struct {
		c     int
		perS  float64
		calls int64
	}
	var rates []rateRow
	for _, c := range []int{1, 4, 16} {
		r, hits := rate(c)
		rates = append(rates, rateRow{c, r, hits})
	}

	q := func(d []time.Duration, p float64) time.Duration { return d[int(p*float64(len(d)-1)+0.5)] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%8.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("%d calls each (after one warm-up call); pooled calls are paced so each finds a full pool (refill not timed)", n)
	t.Logf("%-44s %11s %11s %8s", "", "p50", "p95", "p50 vs docker run")
	for _, row := range []struct {
		name string
		d    []time.Duration
		ref  []time.Duration
	}{
		{"print(1): docker run --rm (CLI)", dockerRun, dockerRun},
		{"print(1): Transient, cold sandbox", transientRun, dockerRun},
		{"print(1): Transient, from the pool", poolPrint, dockerRun},
		{"print(1): Persistent, existing session", persistentRun, dockerRun},
		{"pandas group-by: docker run --rm (CLI)", dockerGroupBy, dockerGroupBy},
		{"pandas group-by: Transient, from the pool", poolGroupBy, dockerGroupBy},
	} {
		t.Logf("%-44s %s %s %7.1fx", row.name, ms(q(row.d, .5)), ms(q(row.d, .95)), float64(q(row.ref, .5))/float64(q(row.d, .5)))
	}
	t.Logf("memory of one idle pooled sandbox (numpy, pandas, matplotlib.pyplot preloaded): %.1f MiB", idleMiB)
	for _, r := range rates {
		t.Logf("sustained transient print(1), %2d concurrent clients, 15 s, pool of 2 refilling: %5.2f calls/s (%d from the pool)", r.c, r.perS, r.calls)
	}
}

func BenchmarkTransientPrint(b *testing.B) {
	e, _ := newExec(b, nil)
	for b.Loop() {
		if _, err := e.Transient(tctx(b, time.Minute), Request{Code: "print(1)"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPersistentPrint(b *testing.B) {
	e, _ := newExec(b, nil)
	_, id, err := e.Persistent(tctx(b, time.Minute), "", Request{Code: "0"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := e.Persistent(tctx(b, time.Minute), id, Request{Code: "print(1)"}); err != nil {
			b.Fatal(err)
		}
	}
}
