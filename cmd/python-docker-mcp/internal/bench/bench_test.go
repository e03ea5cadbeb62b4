package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"single sample is every percentile", []float64{7}, 99, 7},
		{"median of odd count is the middle", []float64{1, 2, 3, 4, 5}, 50, 3},
		{"median of even count interpolates", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p0 is the minimum", []float64{3, 5, 9}, 0, 3},
		{"p100 is the maximum", []float64{3, 5, 9}, 100, 9},
		{"p50 of 1..100", hundred, 50, 50.5},
		{"p95 of 1..100", hundred, 95, 95.05},
		{"p99 of 1..100", hundred, 99, 99.01},
		{"p25 interpolates between ranks", []float64{10, 20, 30, 40, 50}, 25, 20},
		{"p10 interpolates within a gap", []float64{0, 100}, 10, 10},
		{"above 100 clamps", []float64{1, 2}, 150, 2},
		{"below 0 clamps", []float64{1, 2}, -5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := percentile(tt.sorted, tt.p)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("percentile(nil, 50) = %v, want NaN", got)
	}
}

func TestSummarize(t *testing.T) {
	in := []float64{5, 1, 4, 2, 3} // unsorted on purpose
	got := summarize(in)
	want := latency{N: 5, Min: 1, P50: 3, P95: 4.8, P99: 4.96, Max: 5, Mean: 3}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("summarize(%v) (-want +got):\n%s", in, diff)
	}
	if diff := cmp.Diff([]float64{5, 1, 4, 2, 3}, in); diff != "" {
		t.Errorf("summarize changed its input (-want +got):\n%s", diff)
	}
	empty := summarize(nil)
	if empty.N != 0 || !math.IsNaN(empty.P50) || !math.IsNaN(empty.Mean) {
		t.Errorf("summarize(nil) = %+v, want N 0 and NaN figures", empty)
	}
	b, err := empty.MarshalJSON()
	if err != nil || !strings.Contains(string(b), `"p50_ms":null`) {
		t.Errorf("empty latency as JSON = %s, %v; want p50_ms null", b, err)
	}
}

func TestParseBenchArgs(t *testing.T) {
	defaults := benchOptions{
		N: 200, BaselineN: 30, Concurrency: []int{1, 4, 16}, Duration: 10 * time.Second,
		Warmup: 3, Scenarios: allScenarios, SpacedN: 30, SpacedPause: 500 * time.Millisecond,
		CostN: 5, BurstSizes: []int{8, 16}, Bursts: 5, BurstPause: 5 * time.Second,
	}
	tests := []struct {
		args []string
		want benchOptions
	}{
		{nil, defaults},
		{[]string{"-n", "50"}, func() benchOptions { o := defaults; o.N, o.BaselineN = 50, 30; return o }()},
		{[]string{"-n", "10"}, func() benchOptions { o := defaults; o.N, o.BaselineN, o.SpacedN = 10, 10, 10; return o }()},
		{[]string{"-spaced-n", "5", "-spaced-interval", "1s"}, func() benchOptions { o := defaults; o.SpacedN, o.SpacedPause = 5, time.Second; return o }()},
		{[]string{"-n", "10", "-baseline-n", "3"}, func() benchOptions { o := defaults; o.N, o.BaselineN, o.SpacedN = 10, 3, 10; return o }()},
		{[]string{"-concurrency", "2, 8,2"}, func() benchOptions { o := defaults; o.Concurrency = []int{2, 8}; return o }()},
		{[]string{"-json", "-duration", "2s", "-interval", "50ms", "-warmup", "0"}, func() benchOptions {
			o := defaults
			o.JSON, o.Duration, o.Interval, o.Warmup = true, 2*time.Second, 50*time.Millisecond, 0
			return o
		}()},
		{[]string{"-scenarios", "memory,transient"}, func() benchOptions {
			o := defaults
			o.Scenarios = []string{scTransient, scMemory} // in run order, not flag order
			return o
		}()},
		{[]string{"-scenarios", "docker-run,all"}, defaults},
		{[]string{"-scenarios", "transient", "-runtimes", "runsc, kata"}, func() benchOptions {
			o := defaults
			o.Scenarios, o.Runtimes = []string{scTransient, scRuntimes}, []string{"runsc", "kata"}
			return o
		}()},
		{[]string{"-scenarios", "runtimes"}, func() benchOptions { o := defaults; o.Scenarios = []string{scRuntimes}; return o }()},
		{[]string{"-burst-sizes", "4,32", "-bursts", "2", "-burst-pause", "0s", "-cost-n", "1"}, func() benchOptions {
			o := defaults
			o.BurstSizes, o.Bursts, o.BurstPause, o.CostN = []int{4, 32}, 2, 0, 1
			return o
		}()},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseBenchArgs(tt.args)
			if err != nil {
				t.Fatalf("parseBenchArgs(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseBenchArgs(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestParseBenchArgsErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-n", "0"}, "-n must be at least 1"},
		{[]string{"-concurrency", "1,x"}, `"x" is not a positive integer`},
		{[]string{"-concurrency", "0"}, `"0" is not a positive integer`},
		{[]string{"-concurrency", "1000"}, "over the maximum of 256"},
		{[]string{"-scenarios", "transient,nope"}, `unknown scenario "nope"`},
		{[]string{"-duration", "0s"}, "-duration must be positive"},
		{[]string{"-bursts", "0"}, "-bursts must be at least 1"},
		{[]string{"-burst-sizes", "8,x"}, `-burst-sizes: "x" is not a positive integer`},
		{[]string{"-interval", "-1s"}, "-interval must not be negative"},
		{[]string{"-spaced-interval", "0s"}, "-spaced-interval must be positive"},
		{[]string{"-spaced-n", "-1"}, "-spaced-n must not be negative"},
		{[]string{"-baseline-n", "-2"}, "-baseline-n must not be negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-bogus"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseBenchArgs(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseBenchArgs(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestParseDockerSize(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"0B", 0},
		{"512B", 512},
		{"980kB", 980e3},
		{"12.5MiB", 12.5 * (1 << 20)},
		{" 1.5GiB ", 1.5 * (1 << 30)},
		{"3MB", 3e6},
	}
	for _, tt := range tests {
		got, err := parseDockerSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseDockerSize(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "MiB", "12XB", "1.2.3MiB"} {
		if got, err := parseDockerSize(bad); err == nil {
			t.Errorf("parseDockerSize(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseStats(t *testing.T) {
	got, err := parseStats("abc123\t12.5MiB / 512MiB\ndef456\t800KiB / 512MiB\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"abc123": 12.5 * (1 << 20), "def456": 800 * (1 << 10)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseStats (-want +got):\n%s", diff)
	}
	if _, err := parseStats("abc123 12MiB"); err == nil {
		t.Error("parseStats of a line without a tab: got no error")
	}
}

func TestGoals(t *testing.T) {
	rep := &benchReport{Latency: map[string]latency{
		keyTransient:   {P50: 8, P95: 500},
		keyDockerPrint: {P50: 240, P95: 400},
		keyPandas:      {P50: 30},
		keyDockerPd:    {P50: 1200},
	},
		Bursts:     []burstLevel{{Size: 16, Latency: latency{P95: 900}}, {Size: 8, Latency: latency{P95: 200}}},
		Cost:       []costClass{{Ceiling: 4}, {Ceiling: 1}},
		Throughput: []throughputLevel{{CallsPerSec: 2}, {CallsPerSec: 3}},
	}
	type verdict struct {
		Measured *float64
		Met      *bool
	}
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	verdicts := func() []verdict {
		var out []verdict
		for _, g := range goals(rep) {
			out = append(out, verdict{g.Measured, g.Met})
		}
		return out
	}
	// Back to back (-interval 0): the spaced goals are not judged.
	want := []verdict{{nil, nil}, {nil, nil}, {nil, nil}, {nil, nil},
		{f(30), b(true)}, {f(1.25), b(false)}, {f(40), b(true)}, {f(0.83), b(true)}, {f(0.75), b(true)},
		// kept sandboxes: ratio, pandas p50, bursts of 16 p95 and calls/s,
		// 16 clients (not run), spaced p50 (not spaced)
		{f(30), b(true)}, {f(30), b(false)}, {f(900), b(false)}, {f(0), b(false)}, {nil, nil}, {nil, nil}}
	if diff := cmp.Diff(want, verdicts()); diff != "" {
		t.Errorf("goals of a back-to-back run (-want +got):\n%s", diff)
	}
	// Spaced: the back-to-back goals are not judged.
	rep.Options.IntervalMS = 1000
	want = []verdict{{f(8), b(true)}, {f(30), b(true)}, {f(40), b(false)}, {nil, nil},
		{nil, nil}, {nil, nil}, {nil, nil}, {f(0.83), b(true)}, {f(0.75), b(true)},
		{nil, nil}, {nil, nil}, {f(900), b(false)}, {f(0), b(false)}, {nil, nil}, {f(8), b(false)}}
	if diff := cmp.Diff(want, verdicts()); diff != "" {
		t.Errorf("goals of a spaced run (-want +got):\n%s", diff)
	}
	// Back to back with the spaced scenario: its row judges the spaced
	// print(1) goals, the back-to-back ones stay judged.
	rep.Options.IntervalMS = 0
	rep.Latency[keySpaced] = latency{P50: 4.5}
	want = []verdict{{f(4.5), b(true)}, {nil, nil}, {nil, nil}, {nil, nil},
		{f(30), b(true)}, {f(1.25), b(false)}, {f(40), b(true)}, {f(0.83), b(true)}, {f(0.75), b(true)},
		{f(30), b(true)}, {f(30), b(false)}, {f(900), b(false)}, {f(0), b(false)}, {nil, nil}, {f(4.5), b(true)}}
	if diff := cmp.Diff(want, verdicts()); diff != "" {
		t.Errorf("goals of a back-to-back run with the spaced scenario (-want +got):\n%s", diff)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(t.Context(), Server{Args: []string{"serve"}}, config.Default(), []string{"-n", "-3"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "-n must be at least 1") || !strings.Contains(stderr.String(), "-concurrency") {
		t.Errorf("Run -n -3 = %d, stderr %q; want exit %d with the error and the flags", code, stderr.String(), exitUsage)
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, [][]string{{"name", "n", "p50"}, {"execute-transient", "5", "1.25"}, {"x", "200", "10.0"}})
	want := "name                 n   p50\n" +
		"execute-transient    5  1.25\n" +
		"x                  200  10.0\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("writeTable (-want +got):\n%s", diff)
	}
}

// machineBusy grows while this process keeps a CPU busy.
func TestMachineBusy(t *testing.T) {
	b0, ok := machineBusy()
	if !ok {
		t.Fatal("machineBusy: /proc/stat not readable")
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	b1, _ := machineBusy()
	if b1-b0 < 100*time.Millisecond {
		t.Errorf("machine busy grew %v over 300 ms of a busy loop, want at least 100 ms", b1-b0)
	}
}

func TestFloorBound(t *testing.T) {
	rep := &benchReport{CPUs: 2, Latency: map[string]latency{}, Cost: []costClass{
		{Class: "cold", CPUSeconds: 0.2, MachineCPUSeconds: 0.21, Ceiling: 9.5},
		{Class: "floor", Floor: true, CPUSeconds: 0.125, MachineCPUSeconds: 0.1, Ceiling: 16},
	}}
	if got := ceiling(rep); got != 9.5 {
		t.Errorf("ceiling = %v, want the cold row's 9.5, not the floor's", got)
	}
	f := newFloorBound(rep)
	if f == nil || f.CPUSeconds != 0.125 || f.CallMS != 62.5 || !math.IsNaN(f.MaxRatio) {
		t.Fatalf("floor without docker run = %+v; want 0.125 CPU s (the larger), 62.5 ms on 2 CPUs, no ratio", f)
	}
	rep.Floor = f
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"floor":{"cpu_s":0.125,"docker_run_p50_ms":null,"max_ratio":null,"min_mean_ms":62.5}`) {
		t.Errorf("report as JSON: %v, %s; want the floor with null docker run figures", err, b)
	}
	rep.Latency[keyDockerPrint] = latency{P50: 250}
	if f = newFloorBound(rep); f.MaxRatio != 4 {
		t.Errorf("floor with docker run p50 250 ms: ratio %v, want 4", f.MaxRatio)
	}
	var out bytes.Buffer
	rep.Floor = f
	printCapacity(&out, rep)
	if want := "an empty container costs 0.125 CPU s: with a fresh container per call, calls back to back cannot average under 62.5 ms on 2 CPUs: on average at best 4.00x faster than docker run print(1) p50 (250.0 ms)"; !strings.Contains(out.String(), want) {
		t.Errorf("capacity section:\n%s\nwant it to contain %q", out.String(), want)
	}
	rep.Cost = rep.Cost[:1]
	if f := newFloorBound(rep); f != nil {
		t.Errorf("no floor row: got %+v, want nil", f)
	}
}

func TestWithSets(t *testing.T) {
	got := withSets([]string{"--config", "c.yaml", "--set", "docker.runtime=x", "serve"}, "docker.runtime=runsc", "pool.enabled=false")
	want := []string{"--config", "c.yaml", "--set", "docker.runtime=x", "--set", "docker.runtime=runsc", "--set", "pool.enabled=false", "serve"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("withSets (-want +got):\n%s", diff)
	}
}
