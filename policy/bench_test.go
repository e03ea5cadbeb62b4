package policy

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// BenchmarkDecide measures one decision for code with n imports (and as
// many calls), with python-docker-mcp's module lists plus numpy and
// pandas configured. Besides ns/op it reports the median (p50-µs) and
// 99th percentile (p99-µs) of single decisions, and the process CPU time
// per decision (cpu-µs/op, GC included), which a busy machine distorts
// less than wall time.
//
//	go test ./policy/ -run '^$' -bench Decide -benchtime 2000x
func BenchmarkDecide(b *testing.B) {
	cfg := config.Default()
	compat(&cfg)
	cfg.AllowedModules = append(cfg.AllowedModules, "numpy", "pandas")
	cfg.BlockedCalls = []string{"os.system", "eval"}
	e, err := Load(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	mods := []string{"numpy", "pandas", "math", "json", "collections.abc", "numpy.linalg", "itertools", "typing", "re", "statistics"}
	for _, n := range []int{0, 5, 10, 50, 500} {
		var f analyze.Facts
		for i := range n {
			m := mods[i%len(mods)]
			if i%3 == 0 {
				f.Imports = append(f.Imports, fromImp(m, i+1, "a", "b"))
			} else {
				f.Imports = append(f.Imports, analyze.Import{Module: m, Alias: "x", Line: i + 1})
			}
			f.Calls = append(f.Calls, call(m+".f", i+1))
		}
		in := run(f)
		b.Run(fmt.Sprintf("imports=%d", n), func(b *testing.B) {
			ctx := context.Background()
			times := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime()
			for b.Loop() {
				start := time.Now()
				d, err := e.Decide(ctx, in)
				times = append(times, time.Since(start))
				if err != nil || !d.Allow {
					b.Fatalf("Decide = %+v, %v", d, err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(len(times)), "cpu-µs/op")
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// cpuTime is the user+system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFloor is a trivial prepared OPA query on the same input: the
// machine's floor, to read BenchmarkDecide against on a busy machine.
func BenchmarkFloor(b *testing.B) {
	pq, err := rego.New(rego.Query("data.floor.d"), rego.Module("floor.rego", `package floor
d := {"allow": count(v) == 0, "v": v}
v contains 1 if input.tool == "none"
`)).PrepareForEval(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	in := run(dataScience).value()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := pq.Eval(context.Background(), rego.EvalParsedInput(in)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(n), "cpu-µs/op")
}
