package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// scReuseNever runs the transient scenarios the run has (transient,
// pandas, burst, throughput) again against a second server with
// pool.reuse: never (a fresh container per call), in the same run, so
// what kept sandboxes gain shows side by side with the same machine load.
const scReuseNever = "reuse-never"

// reuseNever is what the transient scenarios measured with pool.reuse:
// never.
type reuseNever struct {
	Latency    map[string]latency `json:"latency"`
	CodeMS     map[string]latency `json:"code_ms"`
	Bursts     []burstLevel       `json:"bursts"`
	Throughput []throughputLevel  `json:"throughput"`
}

// withSet is server args (flags, then "serve") with one more --set.
func withSet(args []string, kv string) []string {
	out := slices.Clone(args)
	if n := len(out); n > 0 && out[n-1] == "serve" {
		return append(out[:n-1], "--set", kv, "serve")
	}
	return append(out, "--set", kv)
}

// reuseNeverScenario measures the transient scenarios (spaced included) on a server of its
// own with pool.reuse: never, started after the main server stopped.
func (b *bencher) reuseNeverScenario(ctx context.Context, rep *benchReport) (err error) {
	if b.cfg.Pool.Reuse == config.ReuseNever || !b.cfg.Pool.Enabled {
		rep.Notes = append(rep.Notes, "reuse-never: skipped, the configuration already has pool.reuse never or no pool")
		return nil
	}
	nb := &bencher{srv: b.srv, cfg: b.cfg, opts: b.opts, progress: b.progress}
	nb.srv.Args = withSet(b.srv.Args, "pool.reuse=never")
	if err := nb.startServer(ctx); err != nil {
		return err
	}
	defer func() {
		if _, cerr := nb.stopServer(); err == nil {
			err = cerr
		}
	}()
	sub := &benchReport{Latency: map[string]latency{}, CodeMS: map[string]latency{}, Samples: map[string][]float64{}}
	if b.opts.has(scTransient) {
		if err := nb.latencyScenario(ctx, sub, keyTransient, "execute-transient", printCode, printWant); err != nil {
			return err
		}
	}
	if b.opts.has(scPandas) {
		if err := nb.latencyScenario(ctx, sub, keyPandas, "execute-transient", pandasCode, pandasWant); err != nil {
			return err
		}
	}
	if b.opts.has(scSpaced) {
		if err := nb.latencyRun(ctx, sub, keySpaced, "execute-transient", printCode, printWant, b.opts.SpacedN, b.opts.SpacedPause); err != nil {
			return err
		}
	}
	if b.opts.has(scBurst) {
		if err := nb.burstScenario(ctx, sub); err != nil {
			return err
		}
	}
	if b.opts.has(scThroughput) {
		if err := nb.throughputScenario(ctx, sub); err != nil {
			return err
		}
	}
	rep.ReuseNever = &reuseNever{Latency: sub.Latency, CodeMS: sub.CodeMS, Bursts: sub.Bursts, Throughput: sub.Throughput}
	rep.Notes = append(rep.Notes, "reuse-never: the same transient scenarios against a second server with --set pool.reuse=never (a fresh container per call), started after the first one exited")
	return nil
}

// printReuseNever prints the pool.reuse never figures beside the main
// run's.
func printReuseNever(w io.Writer, rep *benchReport) {
	rn := rep.ReuseNever
	if rn == nil {
		return
	}
	rows := [][]string{{"pool.reuse principal vs never", "p50 ms", "p95 ms", "never p50", "never p95", "p50 gain"}}
	for _, k := range []string{keyTransient, keyPandas, keySpaced} {
		a, ok1 := rep.Latency[k]
		n, ok2 := rn.Latency[k]
		if ok1 && ok2 {
			rows = append(rows, []string{k, fmtMS(a.P50), fmtMS(a.P95), fmtMS(n.P50), fmtMS(n.P95), fmt.Sprintf("%.2fx", ratio(n.P50, a.P50))})
		}
	}
	for _, l := range rep.Bursts {
		for _, m := range rn.Bursts {
			if m.Size == l.Size {
				rows = append(rows, []string{fmt.Sprintf("bursts of %d (calls/s %.1f, never %.1f)", l.Size, l.CallsPerSec, m.CallsPerSec),
					fmtMS(l.Latency.P50), fmtMS(l.Latency.P95), fmtMS(m.Latency.P50), fmtMS(m.Latency.P95), fmt.Sprintf("%.2fx", ratio(m.Latency.P50, l.Latency.P50))})
			}
		}
	}
	for _, t := range rep.Throughput {
		for _, m := range rn.Throughput {
			if m.Clients == t.Clients {
				rows = append(rows, []string{fmt.Sprintf("%d client(s): calls/s %.1f, never %.1f", t.Clients, t.CallsPerSec, m.CallsPerSec),
					fmtMS(t.Latency.P50), fmtMS(t.Latency.P95), fmtMS(m.Latency.P50), fmtMS(m.Latency.P95), fmt.Sprintf("%.2fx", ratio(m.Latency.P50, t.Latency.P50))})
			}
		}
	}
	if len(rows) > 1 {
		writeTable(w, rows)
		fmt.Fprintln(w)
	}
}

// reuseGoals are the goals of kept sandboxes (one fresh process per call
// in a sandbox that belongs to one principal).
func reuseGoals(rep *benchReport, mk func(name, target, unit string, v float64, met func(float64) bool) goal) []goal {
	spaced := rep.Options.IntervalMS > 0
	only := func(ok bool, v float64) float64 {
		if !ok {
			return math.NaN()
		}
		return v
	}
	burst := func(size int, f func(burstLevel) float64) float64 {
		for _, l := range rep.Bursts {
			if l.Size == size {
				return f(l)
			}
		}
		return math.NaN()
	}
	clients := func(n int) float64 {
		for _, t := range rep.Throughput {
			if t.Clients == n {
				return t.CallsPerSec
			}
		}
		return math.NaN()
	}
	return []goal{
		mk("kept: back to back docker run p50 / transient print(1) p50", ">= 20x", "x", only(!spaced, ratio(p50(rep, keyDockerPrint), p50(rep, keyTransient))), func(v float64) bool { return v >= 20 }),
		mk("kept: back to back transient pandas p50", "<= 20 ms", "ms", only(!spaced, p50(rep, keyPandas)), func(v float64) bool { return v <= 20 }),
		mk("kept: bursts of 16 p95", "< 100 ms", "ms", burst(16, func(l burstLevel) float64 { return l.Latency.P95 }), func(v float64) bool { return v < 100 }),
		mk("kept: bursts of 16 calls/s", ">= 100", "", burst(16, func(l burstLevel) float64 { return l.CallsPerSec }), func(v float64) bool { return v >= 100 }),
		mk("kept: sustained calls/s with 16 clients", ">= 100", "", clients(16), func(v float64) bool { return v >= 100 }),
		mk("kept: spaced transient print(1) p50", "<= 5 ms", "ms", spacedP50(rep), func(v float64) bool { return v <= 5 }),
	}
}
