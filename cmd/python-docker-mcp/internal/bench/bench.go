package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
)

// The bench command measures the server as an MCP client sees it: it starts
// this binary as a stdio server, drives it with the official go-sdk client,
// and runs the `docker run --rm` baseline with the docker CLI in the same run
// so the ratios compare figures taken on the same machine at the same time.

// Scenario names accepted by -scenarios.
const (
	scTransient  = "transient"  // execute-transient print(1)
	scPandas     = "pandas"     // execute-transient pandas group-by
	scPersistent = "persistent" // execute-persistent print(1) in one session
	scDockerRun  = "docker-run" // docker run --rm of both snippets
	scThroughput = "throughput" // calls/s of transient print(1) at each concurrency
	scMemory     = "memory"     // docker stats of the idle sandboxes
	scCost       = "cost"       // CPU and wall time of one fresh sandbox, phase by phase
	scBurst      = "burst"      // bursts of transient print(1) issued at once
	scSpaced     = "spaced"     // execute-transient print(1), -spaced-interval apart
)

var allScenarios = []string{scCost, scTransient, scPandas, scSpaced, scPersistent, scDockerRun, scBurst, scThroughput, scMemory, scReuseNever}

// The code the bench runs. pandasCode's expected output is the sum of v for
// k == 0: 0 + 10 + ... + 990.
const (
	printCode   = "print(1)"
	printWant   = "1\n"
	pandasCode  = "import pandas as pd\ndf = pd.DataFrame({\"k\": [i % 10 for i in range(1000)], \"v\": range(1000)})\nprint(df.groupby(\"k\")[\"v\"].sum().iloc[0])\n"
	pandasWant  = "49500\n"
	maxBaseline = 30 // docker run baseline runs when -baseline-n is not given
	maxSpaced   = 30 // spaced calls when -spaced-n is not given
)

// Goals from the warm-pool issue, then from the capacity one.
const (
	goalBackToBackRatio = 5.0
	goalSustainedShare  = 0.7

	goalTransientP50MS   = 10.0
	goalPrintRatio       = 20.0
	goalPandasRatio      = 50.0
	goalPersistentOverMS = 2.0
)

// benchOptions are the bench command's flags.
type benchOptions struct {
	N           int           // calls per latency scenario
	BaselineN   int           // docker run calls per snippet
	Concurrency []int         // client goroutines per throughput level
	Duration    time.Duration // how long each throughput level issues calls
	Interval    time.Duration // pause between calls of the latency scenarios
	SpacedN     int           // calls of the spaced scenario
	SpacedPause time.Duration // pause between them
	Warmup      int           // uncounted calls before each latency scenario
	JSON        bool
	Scenarios   []string      // in allScenarios order
	CostN       int           // fresh sandboxes measured per cost row
	BurstSizes  []int         // calls issued at once
	Bursts      int           // bursts per size
	BurstPause  time.Duration // pause before each burst
	Runtimes    []string      // runtimes measured beside the default (scRuntimes)
}

func (o benchOptions) has(s string) bool { return slices.Contains(o.Scenarios, s) }

const benchUsage = `usage: python-docker-mcp [global flags] bench [flags]

Starts this binary as an MCP stdio server (with the same --config and --set
flags), drives it with the official go-sdk client, and runs docker run --rm of
the same code and image in the same run.

flags:
`

// parseBenchArgs parses the bench command's arguments.
func parseBenchArgs(args []string) (benchOptions, error) {
	o := benchOptions{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.N, "n", 200, "calls per latency scenario")
	fs.IntVar(&o.BaselineN, "baseline-n", 0, fmt.Sprintf("docker run --rm calls per snippet (default min(n, %d))", maxBaseline))
	conc := fs.String("concurrency", "1,4,16", "comma-separated numbers of concurrent clients for the throughput scenario")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each throughput level issues calls")
	fs.DurationVar(&o.Interval, "interval", 0, "pause between calls of the latency scenarios (0: back to back)")
	fs.IntVar(&o.SpacedN, "spaced-n", 0, fmt.Sprintf("calls of the spaced scenario (default min(n, %d))", maxSpaced))
	fs.DurationVar(&o.SpacedPause, "spaced-interval", 500*time.Millisecond, "pause between the spaced scenario's calls")
	fs.IntVar(&o.Warmup, "warmup", 3, "uncounted calls before each latency scenario")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	fs.IntVar(&o.CostN, "cost-n", 5, "fresh sandboxes measured per cost row")
	bursts := fs.String("burst-sizes", "8,16", "comma-separated numbers of calls issued at once in the burst scenario")
	fs.IntVar(&o.Bursts, "bursts", 5, "bursts per size")
	fs.DurationVar(&o.BurstPause, "burst-pause", 5*time.Second, "pause before each burst")
	scen := fs.String("scenarios", "all", "comma-separated scenarios: all or "+strings.Join(allScenarios, ","))
	runtimes := fs.String("runtimes", "", "comma-separated OCI runtimes (e.g. runsc) measured beside the default one: cold, pooled and session calls")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.N < 1 {
		return o, fmt.Errorf("-n must be at least 1, got %d", o.N)
	}
	if o.BaselineN < 0 {
		return o, fmt.Errorf("-baseline-n must not be negative, got %d", o.BaselineN)
	}
	if o.BaselineN == 0 {
		o.BaselineN = min(o.N, maxBaseline)
	}
	if o.Warmup < 0 {
		return o, fmt.Errorf("-warmup must not be negative, got %d", o.Warmup)
	}
	if o.Duration <= 0 {
		return o, fmt.Errorf("-duration must be positive, got %v", o.Duration)
	}
	if o.Interval < 0 {
		return o, fmt.Errorf("-interval must not be negative, got %v", o.Interval)
	}
	if o.SpacedN < 0 || o.SpacedPause <= 0 {
		return o, fmt.Errorf("-spaced-n must not be negative and -spaced-interval must be positive, got %d and %v", o.SpacedN, o.SpacedPause)
	}
	if o.SpacedN == 0 {
		o.SpacedN = min(o.N, maxSpaced)
	}
	if o.CostN < 1 || o.Bursts < 1 {
		return o, fmt.Errorf("-cost-n and -bursts must be at least 1, got %d and %d", o.CostN, o.Bursts)
	}
	if o.BurstPause < 0 {
		return o, fmt.Errorf("-burst-pause must not be negative, got %v", o.BurstPause)
	}
	var err error
	if o.Concurrency, err = parseCounts("-concurrency", *conc); err != nil {
		return o, err
	}
	if o.BurstSizes, err = parseCounts("-burst-sizes", *bursts); err != nil {
		return o, err
	}
	if o.Scenarios, err = parseScenarios(*scen); err != nil {
		return o, err
	}
	for _, r := range strings.Split(*runtimes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.Runtimes = append(o.Runtimes, r)
		}
	}
	if len(o.Runtimes) > 0 && !o.has(scRuntimes) {
		o.Scenarios = append(o.Scenarios, scRuntimes)
	}
	return o, nil
}

// parseCounts parses the comma-separated positive counts of flag name.
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		c, err := strconv.Atoi(f)
		if err != nil || c < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer (want e.g. 1,4,16)", name, f)
		}
		if c > 256 {
			return nil, fmt.Errorf("%s: %d is over the maximum of 256", name, c)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func parseScenarios(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "all":
			for _, a := range allScenarios {
				want[a] = true
			}
		case slices.Contains(allScenarios, f) || f == scRuntimes:
			want[f] = true
		default:
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (want all or some of %s)", f, strings.Join(allScenarios, ","))
		}
	}
	var out []string
	for _, a := range append(slices.Clone(allScenarios), scRuntimes) {
		if want[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

// percentile returns the p-th percentile (0 ≤ p ≤ 100) of sorted, ascending
// samples, interpolating linearly between the closest ranks (the method
// numpy calls "linear"). It returns NaN for no samples.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	p = math.Max(0, math.Min(100, p))
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (rank-float64(lo))*(sorted[hi]-sorted[lo])
}

// latency summarises samples in milliseconds.
type latency struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	Min    float64 `json:"min_ms"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
}

func summarize(ms []float64) latency {
	s := slices.Clone(ms)
	sort.Float64s(s)
	l := latency{N: len(s), Min: math.NaN(), Max: math.NaN(), Mean: math.NaN(),
		P50: percentile(s, 50), P95: percentile(s, 95), P99: percentile(s, 99)}
	if len(s) > 0 {
		l.Min, l.Max = s[0], s[len(s)-1]
		var sum float64
		for _, v := range s {
			sum += v
		}
		l.Mean = sum / float64(len(s))
	}
	return l
}

// MarshalJSON writes NaN (no samples) as null.
func (l latency) MarshalJSON() ([]byte, error) {
	f := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		v = math.Round(v*1000) / 1000
		return &v
	}
	return json.Marshal(struct {
		N      int      `json:"n"`
		Errors int      `json:"errors"`
		Min    *float64 `json:"min_ms"`
		P50    *float64 `json:"p50_ms"`
		P95    *float64 `json:"p95_ms"`
		P99    *float64 `json:"p99_ms"`
		Max    *float64 `json:"max_ms"`
		Mean   *float64 `json:"mean_ms"`
	}{l.N, l.Errors, f(l.Min), f(l.P50), f(l.P95), f(l.P99), f(l.Max), f(l.Mean)})
}

// parseDockerSize reads a size as docker stats prints it ("12.5MiB",
// "980kB", "1.2GiB", "0B") and returns bytes.
func parseDockerSize(s string) (float64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err)
	}
	mult := map[string]float64{
		"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	}[strings.TrimSpace(s[i:])]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q", s, s[i:])
	}
	return v * mult, nil
}

// Report is what one bench run measured.
type benchReport struct {
	Started     time.Time          `json:"started"`
	Image       string             `json:"image"`
	CPUs        int                `json:"cpus"`
	DockerVer   string             `json:"docker_server_version"`
	Pool        config.Pool        `json:"pool"`
	Options     benchOptionsJSON   `json:"options"`
	Latency     map[string]latency `json:"latency"`     // by scenario key
	CodeMS      map[string]latency `json:"code_ms"`     // duration_ms reported by the runner, by scenario key
	Throughput  []throughputLevel  `json:"throughput"`  // one per concurrency level
	Memory      []memoryKind       `json:"memory"`      // per sandbox kind
	Cost        []costClass        `json:"cost"`        // per kind of fresh sandbox
	Floor       *floorBound        `json:"floor"`       // what the cost scenario's empty container allows
	Bursts      []burstLevel       `json:"bursts"`      // per burst size
	Runtimes    []runtimeRow       `json:"runtimes"`    // per OCI runtime (-runtimes)
	ReuseNever  *reuseNever        `json:"reuse_never"` // the transient scenarios with pool.reuse never (-scenarios reuse-never)
	Goals       []goal             `json:"goals"`       // the warm-pool issue's goals
	Notes       []string           `json:"notes"`       // how things were measured
	LeftBehind  int                `json:"left_behind"` // this run's containers still present after the server exited
	ElapsedSecs float64            `json:"elapsed_s"`
	// LoadStart and LoadEnd are the 1-minute load averages when the bench
	// started and when its scenarios ended: a busy machine inflates every
	// figure, the baseline's included.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
	// Samples are each latency scenario's calls (ms) in the order they
	// were made: the shape behind the percentiles (a steady rate, or
	// clumps of fast and slow calls).
	Samples map[string][]float64 `json:"samples_ms"`
}

type benchOptionsJSON struct {
	N           int      `json:"n"`
	BaselineN   int      `json:"baseline_n"`
	Concurrency []int    `json:"concurrency"`
	DurationS   float64  `json:"duration_s"`
	IntervalMS  float64  `json:"interval_ms"`
	Warmup      int      `json:"warmup"`
	Scenarios   []string `json:"scenarios"`
}

type throughputLevel struct {
	Clients     int     `json:"clients"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_s"`
	Latency     latency `json:"latency"`
}

type memoryKind struct {
	Kind     string  `json:"kind"`
	Count    int     `json:"count"`
	MeanMiB  float64 `json:"mean_mib"`
	MinMiB   float64 `json:"min_mib"`
	MaxMiB   float64 `json:"max_mib"`
	Comments string  `json:"comment,omitempty"`
}

type goal struct {
	Name     string   `json:"name"`
	Target   string   `json:"target"`
	Measured *float64 `json:"measured"` // nil when not measured
	Unit     string   `json:"unit"`
	Met      *bool    `json:"met"` // nil when not measured
}

// Keys of benchReport.Latency.
const (
	keyTransient   = "execute-transient print(1)"
	keyPandas      = "execute-transient pandas group-by"
	keySpaced      = "execute-transient print(1), spaced"
	keyPersistent  = "execute-persistent print(1)"
	keyOverhead    = "persistent overhead (latency - duration_ms)"
	keyDockerPrint = "docker run --rm print(1)"
	keyDockerPd    = "docker run --rm pandas group-by"
)

var latencyOrder = []string{keyTransient, keyPandas, keySpaced, keyPersistent, keyOverhead, keyDockerPrint, keyDockerPd}

// benchError is a failure that ends the bench with an exit code.
type benchError struct {
	code int
	msg  string
}

func (e *benchError) Error() string { return e.msg }

func benchFail(code int, format string, a ...any) error {
	return &benchError{code: code, msg: fmt.Sprintf(format, a...)}
}

// Exit codes, the binary's: a runtime failure, a bad command line, Docker
// unreachable or the image missing.
const (
	exitOK     = 0
	exitFail   = 1
	exitUsage  = 2
	exitDocker = 4
)

// Server is how the bench starts the server it measures.
type Server struct {
	// Args are the arguments of this binary that serve MCP over stdio
	// with the same configuration as the bench's (its config file and
	// overrides, then "serve").
	Args []string
	// Version is the client's version in the MCP handshake.
	Version string
	// Workers is how many tool calls the server's stdio transport runs
	// at once (for the report's notes).
	Workers int
}

// Run serves `python-docker-mcp bench` with args (its flags) and returns
// the exit code. cfg is the configuration the server runs with.
func Run(ctx context.Context, srv Server, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	opts, err := parseBenchArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printBenchUsage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "python-docker-mcp bench: %v\n\n", err)
		printBenchUsage(stderr)
		return exitUsage
	}
	b := &bencher{srv: srv, cfg: cfg, opts: opts, progress: stderr}
	rep, err := b.run(ctx)
	if rep != nil {
		if opts.JSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(rep)
		} else {
			printReport(stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp bench: %v\n", err)
		var be *benchError
		if errors.As(err, &be) {
			return be.code
		}
		return exitFail
	}
	return exitOK
}

func printBenchUsage(w io.Writer) {
	fmt.Fprint(w, benchUsage)
	o := []struct{ name, def, help string }{
		{"-n N", "200", "calls per latency scenario"},
		{"-baseline-n N", "min(n, 30)", "docker run --rm calls per snippet"},
		{"-concurrency LIST", "1,4,16", "concurrent clients per throughput level"},
		{"-duration D", "10s", "how long each throughput level issues calls"},
		{"-interval D", "0", "pause between calls of the latency scenarios"},
		{"-warmup N", "3", "uncounted calls before each latency scenario"},
		{"-scenarios LIST", "all", strings.Join(allScenarios, ",")},
		{"-cost-n N", "5", "fresh sandboxes measured per cost row"},
		{"-burst-sizes LIST", "8,16", "calls issued at once per burst"},
		{"-bursts N", "5", "bursts per size"},
		{"-burst-pause D", "5s", "pause before each burst"},
		{"-runtimes LIST", "", "OCI runtimes (e.g. runsc) measured beside the default: cold, pooled and session print(1)"},
		{"-json", "", "print the report as JSON"},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range o {
		def := ""
		if f.def != "" {
			def = "(default " + f.def + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.name, f.help, def)
	}
	tw.Flush()
}

// bencher holds one bench run.
type bencher struct {
	srv      Server
	cfg      config.Config
	opts     benchOptions
	progress io.Writer // one line per phase

	cs        *sdk.ClientSession
	serverPID int
	serverErr *tailBuffer
	sessionID string // the persistent session, cleaned up at the end
}

func (b *bencher) logf(format string, a ...any) {
	fmt.Fprintf(b.progress, "bench: "+format+"\n", a...)
}

func (b *bencher) run(ctx context.Context) (rep *benchReport, err error) {
	start := time.Now()
	rep = &benchReport{
		Started: start.UTC(), Image: b.cfg.Docker.Image, CPUs: runtime.NumCPU(), Pool: b.cfg.Pool,
		Latency: map[string]latency{}, CodeMS: map[string]latency{}, Samples: map[string][]float64{},
		Options: benchOptionsJSON{N: b.opts.N, BaselineN: b.opts.BaselineN, Concurrency: b.opts.Concurrency,
			DurationS: b.opts.Duration.Seconds(), IntervalMS: float64(b.opts.Interval) / float64(time.Millisecond),
			Warmup: b.opts.Warmup, Scenarios: b.opts.Scenarios},
	}
	rep.LoadStart = loadAverage()
	if err := b.preflight(ctx, rep); err != nil {
		return nil, err
	}
	if b.opts.has(scCost) { // before the server: nothing of ours runs meanwhile
		if err := b.costScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	needServer := slices.ContainsFunc(b.opts.Scenarios, func(s string) bool { return s != scDockerRun && s != scCost && s != scRuntimes })
	switch {
	case !needServer: // only cost, baseline or runtimes: no latency scenario
	case b.opts.Interval > 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("latency scenarios pause %v between calls", b.opts.Interval))
	default:
		rep.Notes = append(rep.Notes, "latency scenarios issue calls back to back (-interval 0)")
	}
	if needServer {
		rep.Notes = append(rep.Notes, fmt.Sprintf("latency scenarios: after the warm-up calls the bench waits until the machine's CPUs are less than %.0f%% busy over %v (at most %v), so that what the warm-up started in the background (the pool's refills) is not counted in the calls", settleBusy*100, settleFor, settleMax))
	}
	if needServer && b.opts.Interval == 0 {
		if b.cfg.Pool.Enabled {
			rep.Notes = append(rep.Notes, fmt.Sprintf("back-to-back transient calls can empty the warm pool (pool.size=%d) faster than it refills; -interval spaces them to measure a call that finds a sandbox waiting", b.cfg.Pool.Size))
		}
	}

	if b.opts.has(scRuntimes) { // servers of its own, before the main one
		if err := b.runtimesScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if needServer {
		if err := b.startServer(ctx); err != nil {
			return nil, err
		}
		defer func() {
			left, cerr := b.stopServer() // a no-op when reuse-never stopped it
			rep.LeftBehind += left
			if err == nil && cerr != nil {
				err = cerr
			}
			rep.ElapsedSecs = time.Since(start).Seconds()
		}()
		rep.Notes = append(rep.Notes, fmt.Sprintf("client: official go-sdk (github.com/modelcontextprotocol/go-sdk) over stdio to this binary (pid %d); latency is measured around CallTool", b.serverPID))
	}
	if b.opts.has(scTransient) {
		if err := b.latencyScenario(ctx, rep, keyTransient, "execute-transient", printCode, printWant); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scPandas) {
		if err := b.latencyScenario(ctx, rep, keyPandas, "execute-transient", pandasCode, pandasWant); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scSpaced) {
		// An agent thinks between calls: each call finds its sandbox
		// reset and its worker waiting (the back-to-back rows above do not).
		rep.Notes = append(rep.Notes, fmt.Sprintf("spaced: %d execute-transient print(1) calls %v apart, whatever -interval is", b.opts.SpacedN, b.opts.SpacedPause))
		if err := b.latencyRun(ctx, rep, keySpaced, "execute-transient", printCode, printWant, b.opts.SpacedN, b.opts.SpacedPause); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scPersistent) {
		if err := b.persistentScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scDockerRun) {
		if err := b.dockerRunScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scBurst) {
		if err := b.burstScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scThroughput) {
		if err := b.throughputScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scMemory) {
		if err := b.memoryScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.has(scReuseNever) && needServer {
		left, err := b.stopServer()
		rep.LeftBehind = left
		if err != nil {
			return rep, err
		}
		if err := b.reuseNeverScenario(ctx, rep); err != nil {
			return rep, err
		}
	}
	rep.Goals = goals(rep)
	rep.Floor = newFloorBound(rep)
	rep.LoadEnd = loadAverage()
	rep.ElapsedSecs = time.Since(start).Seconds()
	return rep, nil
}

// preflight checks that Docker, the docker CLI (when needed) and the image
// are there, so a missing piece is one clear error rather than failed calls.
func (b *bencher) preflight(ctx context.Context, rep *benchReport) error {
	if b.opts.has(scDockerRun) || b.opts.has(scMemory) {
		if _, err := exec.LookPath("docker"); err != nil {
			return benchFail(exitDocker, "the docker CLI is not in PATH; the %s and %s scenarios run it (install it, or leave them out with -scenarios)", scDockerRun, scMemory)
		}
		out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").Output()
		if err == nil {
			rep.DockerVer = strings.TrimSpace(string(out))
		}
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		return benchFail(exitDocker, "%v", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, b.cfg.Docker.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return benchFail(exitDocker, "sandbox image %s is not there: build it with `python-docker-mcp image build` (or set docker.image to an image with python3)", b.cfg.Docker.Image)
		}
		return benchFail(exitDocker, "inspect image %s: %v", b.cfg.Docker.Image, err)
	}
	if rep.DockerVer == "" {
		if v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{}); err == nil {
			rep.DockerVer = v.Version
		}
	}
	return nil
}

func (b *bencher) startServer(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return benchFail(exitFail, "find this binary to start it as the server: %v", err)
	}
	cmd := exec.Command(self, b.srv.Args...)
	b.serverErr = &tailBuffer{max: 64 << 10}
	cmd.Stderr = b.serverErr
	c := sdk.NewClient(&sdk.Implementation{Name: "python-docker-mcp-bench", Version: b.srv.Version}, nil)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b.logf("starting %s %s", self, strings.Join(cmd.Args[1:], " "))
	cs, err := c.Connect(cctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	if err != nil {
		return benchFail(exitFail, "start the server over stdio: %v\nserver stderr:\n%s", err, b.serverErr.String())
	}
	b.cs = cs
	b.serverPID = cmd.Process.Pid
	return nil
}

// stopServer closes the session (the server removes its sandboxes when its
// stdin closes) and counts the server's containers still present.
func (b *bencher) stopServer() (int, error) {
	if b.cs == nil {
		return 0, nil
	}
	if b.sessionID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := b.cs.CallTool(ctx, &sdk.CallToolParams{Name: "cleanup-session", Arguments: map[string]any{"session_id": b.sessionID}})
		cancel()
		if err != nil || res.IsError {
			b.logf("cleanup-session %s failed (%v %s); the server removes it on exit", b.sessionID, err, resultText(res))
		}
		b.sessionID = ""
	}
	b.logf("closing the server")
	if err := b.cs.Close(); err != nil {
		b.logf("server exit: %v", err)
	}
	b.cs = nil
	cli, err := docker.Connect(context.Background())
	if err != nil {
		return 0, benchFail(exitDocker, "check for leftover sandboxes: %v", err)
	}
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids, err := b.serverContainers(context.Background(), cli)
		if err != nil {
			return 0, benchFail(exitDocker, "check for leftover sandboxes: %v", err)
		}
		if len(ids) == 0 {
			return 0, nil
		}
		if time.Now().After(deadline) {
			return len(ids), benchFail(exitFail, "%d sandbox container(s) of the server (label python-docker-mcp.pid=%d) still exist after it exited: %s", len(ids), b.serverPID, strings.Join(ids, " "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serverContainers lists the IDs of the child server's sandboxes, running or
// not.
func (b *bencher) serverContainers(ctx context.Context, cli *client.Client) ([]string, error) {
	l, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).
		Add("label", "python-docker-mcp.kind").
		Add("label", "python-docker-mcp.pid="+strconv.Itoa(b.serverPID))})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range l.Items {
		ids = append(ids, c.ID[:12])
	}
	return ids, nil
}

// call runs one tool call and returns its latency in ms, the runner's
// duration_ms, and the structured content. A failed call is an error that
// quotes the result.
func (b *bencher) call(ctx context.Context, tool string, args map[string]any, wantStdout string) (float64, float64, map[string]any, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := b.cs.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	ms := float64(time.Since(t0)) / float64(time.Millisecond)
	if err != nil {
		return ms, 0, nil, fmt.Errorf("%s: %w", tool, err)
	}
	sc := map[string]any{}
	if raw, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(raw, &sc)
	}
	if res.IsError {
		return ms, 0, sc, fmt.Errorf("%s returned an error: %s", tool, resultText(res))
	}
	// The stream is in the text content only, after its "--- stdout ---" line.
	got := resultText(res)
	ok := strings.Contains(got+"\n", "--- stdout ---\n"+wantStdout)
	if wantStdout == "" {
		ok = !strings.Contains(got, "--- stdout ---")
	}
	if !ok {
		return ms, 0, sc, fmt.Errorf("%s: result text %q, want stdout %q", tool, got, wantStdout)
	}
	d, _ := sc["duration_ms"].(float64)
	return ms, d, sc, nil
}

func resultText(r *sdk.CallToolResult) string {
	if r == nil {
		return ""
	}
	var s strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s.WriteString(tc.Text)
		}
	}
	return strings.TrimSpace(s.String())
}

func (b *bencher) pause(ctx context.Context) error { return pauseFor(ctx, b.opts.Interval) }

func pauseFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// settleBusy, settleFor and settleMax: after a latency scenario's
// warm-up, the bench waits until the machine's CPUs were less than
// settleBusy busy over settleFor (what the warm-up started in the
// background, such as the pool's refills, has finished), at most
// settleMax. The counted calls then measure the calls themselves.
const (
	settleBusy = 0.25
	settleFor  = 500 * time.Millisecond
	settleMax  = 20 * time.Second
)

// settle waits as settleBusy says; the log tells how long it waited.
func (b *bencher) settle(ctx context.Context) error {
	t0 := time.Now()
	for time.Since(t0) < settleMax {
		busy0, ok := machineBusy()
		if !ok {
			return nil // no /proc/stat: nothing to wait by
		}
		w0 := time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settleFor):
		}
		busy1, _ := machineBusy()
		if float64(busy1-busy0)/float64(time.Since(w0)*time.Duration(runtime.NumCPU())) < settleBusy {
			break
		}
	}
	b.logf("settled after %v", time.Since(t0).Round(time.Millisecond))
	return nil
}

func (b *bencher) callFailed(err error) error {
	if errors.Is(err, context.Canceled) {
		return benchFail(exitFail, "interrupted")
	}
	return benchFail(exitFail, "%v\nserver stderr (last lines):\n%s", err, lastLines(b.serverErr.String(), 20))
}

func (b *bencher) latencyScenario(ctx context.Context, rep *benchReport, key, tool, code, want string) error {
	return b.latencyRun(ctx, rep, key, tool, code, want, b.opts.N, b.opts.Interval)
}

// latencyRun makes n calls of code, interval apart, after the warm-up
// calls and the settle, and reports them under key.
func (b *bencher) latencyRun(ctx context.Context, rep *benchReport, key, tool, code, want string, n int, interval time.Duration) error {
	args := map[string]any{"code": code}
	b.logf("%s: %d warm-up + %d calls", key, b.opts.Warmup, n)
	for range b.opts.Warmup {
		if _, _, _, err := b.call(ctx, tool, args, want); err != nil {
			return b.callFailed(err)
		}
	}
	if err := b.settle(ctx); err != nil {
		return err
	}
	var lat, codeMS []float64
	for range n {
		if err := pauseFor(ctx, interval); err != nil {
			return err
		}
		ms, d, _, err := b.call(ctx, tool, args, want)
		if err != nil {
			return b.callFailed(err)
		}
		lat = append(lat, ms)
		codeMS = append(codeMS, d)
	}
	rep.Latency[key] = summarize(lat)
	rep.Samples[key] = lat
	rep.CodeMS[key] = summarize(codeMS)
	return nil
}

func (b *bencher) persistentScenario(ctx context.Context, rep *benchReport) error {
	b.logf("%s: create a session, %d warm-up + %d calls", keyPersistent, b.opts.Warmup, b.opts.N)
	_, _, sc, err := b.call(ctx, "execute-persistent", map[string]any{"code": printCode}, printWant)
	if err != nil {
		return b.callFailed(err)
	}
	id, _ := sc["session_id"].(string)
	if id == "" {
		return b.callFailed(errors.New("execute-persistent created a session but returned no session_id"))
	}
	b.sessionID = id
	args := map[string]any{"code": printCode, "session_id": id}
	for range b.opts.Warmup {
		if _, _, _, err := b.call(ctx, "execute-persistent", args, printWant); err != nil {
			return b.callFailed(err)
		}
	}
	if err := b.settle(ctx); err != nil {
		return err
	}
	var lat, codeMS, over []float64
	for range b.opts.N {
		if err := b.pause(ctx); err != nil {
			return err
		}
		ms, d, _, err := b.call(ctx, "execute-persistent", args, printWant)
		if err != nil {
			return b.callFailed(err)
		}
		lat = append(lat, ms)
		codeMS = append(codeMS, d)
		over = append(over, ms-d)
	}
	rep.Latency[keyPersistent] = summarize(lat)
	rep.Samples[keyPersistent] = lat
	rep.CodeMS[keyPersistent] = summarize(codeMS)
	rep.Latency[keyOverhead] = summarize(over)
	rep.Notes = append(rep.Notes, "persistent overhead = client latency - duration_ms (the runner's own measure of the code) per call, then percentiles")
	return nil
}

// dockerRunScenario runs the baseline with the docker CLI (os/exec): the
// time of one `docker run --rm --network none IMAGE python3 -c CODE`.
func (b *bencher) dockerRunScenario(ctx context.Context, rep *benchReport) error {
	for _, s := range []struct{ key, code, want string }{
		{keyDockerPrint, printCode, printWant},
		{keyDockerPd, pandasCode, pandasWant},
	} {
		b.logf("%s: 1 warm-up + %d runs", s.key, b.opts.BaselineN)
		var lat []float64
		for i := range b.opts.BaselineN + 1 {
			ms, err := dockerRun(ctx, b.cfg.Docker.Image, s.code, s.want)
			if err != nil {
				return benchFail(exitDocker, "%s: %v", s.key, err)
			}
			if i > 0 {
				lat = append(lat, ms)
			}
		}
		rep.Latency[s.key] = summarize(lat)
		rep.Samples[s.key] = lat
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("baseline: docker CLI via os/exec, `docker run --rm --network none IMAGE python3 -c CODE`, %d runs per snippet after 1 warm-up (fewer than -n to save time)", b.opts.BaselineN))
	return nil
}

func dockerRun(ctx context.Context, image, code, want string) (float64, error) {
	name := "pdm-bench-" + randomName()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--name", name,
		"--label", "python-docker-mcp.test=1", image, "python3", "-c", code)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	ms := float64(time.Since(t0)) / float64(time.Millisecond)
	if err != nil {
		// The CLI may be gone while the container lives on: remove it.
		exec.Command("docker", "rm", "-f", name).Run()
		return ms, fmt.Errorf("docker run: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	if out.String() != want {
		return ms, fmt.Errorf("docker run printed %q, want %q (stderr: %s)", out.String(), want, strings.TrimSpace(errb.String()))
	}
	return ms, nil
}

func randomName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// throughputScenario measures calls/s of transient print(1) with c client
// goroutines sharing the one MCP stdio session, each issuing calls back to
// back for the configured duration.
func (b *bencher) throughputScenario(ctx context.Context, rep *benchReport) error {
	args := map[string]any{"code": printCode}
	for i, c := range b.opts.Concurrency {
		if i > 0 {
			// Let the pool refill between levels, so each level starts alike.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(3 * time.Second):
			}
		}
		b.logf("throughput: %d client(s) for %v", c, b.opts.Duration)
		var (
			mu       sync.Mutex
			lat      []float64
			errs     int
			firstErr error
			wg       sync.WaitGroup
		)
		t0 := time.Now()
		stopAt := t0.Add(b.opts.Duration)
		for range c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stopAt) && ctx.Err() == nil {
					ms, _, _, err := b.call(ctx, "execute-transient", args, printWant)
					mu.Lock()
					if err != nil {
						errs++
						if firstErr == nil {
							firstErr = err
						}
					} else {
						lat = append(lat, ms)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		secs := time.Since(t0).Seconds()
		if err := ctx.Err(); err != nil {
			return err
		}
		l := summarize(lat)
		l.Errors = errs
		rep.Throughput = append(rep.Throughput, throughputLevel{
			Clients: c, Calls: len(lat), Errors: errs, Seconds: secs,
			CallsPerSec: float64(len(lat)) / secs, Latency: l,
		})
		if firstErr != nil {
			b.logf("throughput: %d of %d calls failed; first: %v", errs, errs+len(lat), firstErr)
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("throughput: N goroutines share the one MCP stdio session, each calling execute-transient print(1) back to back for %v; calls/s = successful calls / time until the last call returned; 3 s pause between levels", b.opts.Duration),
		fmt.Sprintf("the server's stdio transport runs up to %d tool calls at once; past the warm pool each call starts a cold sandbox, so sustained calls/s is how fast this machine starts containers", b.srv.Workers))
	return nil
}

// memoryScenario reads `docker stats --no-stream` (docker CLI) of the
// server's sandboxes while no call is running: pooled transient sandboxes
// waiting for code, and the persistent session (one is created if the
// persistent scenario did not run).
func (b *bencher) memoryScenario(ctx context.Context, rep *benchReport) error {
	if b.sessionID == "" {
		_, _, sc, err := b.call(ctx, "execute-persistent", map[string]any{"code": printCode}, printWant)
		if err != nil {
			return b.callFailed(err)
		}
		b.sessionID, _ = sc["session_id"].(string)
	}
	b.logf("memory: waiting 5 s for the server to be idle, then docker stats")
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	out, err := exec.CommandContext(ctx, "docker", "ps", "--no-trunc",
		"--filter", "label=python-docker-mcp.kind",
		"--filter", "label=python-docker-mcp.pid="+strconv.Itoa(b.serverPID),
		"--format", `{{.ID}}	{{.Label "python-docker-mcp.kind"}}`).Output()
	if err != nil {
		return benchFail(exitDocker, "docker ps: %v", err)
	}
	kinds := map[string]string{}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, kind, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		kinds[id[:12]] = kind
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		rep.Notes = append(rep.Notes, "memory: the server had no idle sandbox to measure")
		return nil
	}
	out, err = exec.CommandContext(ctx, "docker", append([]string{"stats", "--no-stream", "--format", "{{.ID}}\t{{.MemUsage}}"}, ids...)...).Output()
	if err != nil {
		return benchFail(exitDocker, "docker stats: %v", err)
	}
	mem, err := parseStats(string(out))
	if err != nil {
		return benchFail(exitDocker, "docker stats: %v", err)
	}
	byKind := map[string][]float64{}
	for id, used := range mem {
		k := kinds[id[:min(12, len(id))]]
		if k == "" {
			k = "unknown"
		}
		byKind[k] = append(byKind[k], used/(1<<20))
	}
	var ks []string
	for k := range byKind {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		v := byKind[k]
		l := summarize(v)
		mk := memoryKind{Kind: k, Count: len(v), MeanMiB: l.Mean, MinMiB: l.Min, MaxMiB: l.Max}
		switch k {
		case "transient":
			mk.Comments = "the idle transient pool (runner waiting, its classes' modules imported)"
		case "persistent":
			mk.Comments = "the bench's idle session (after print(1)) and the pool's sandboxes for new sessions"
		case "network":
			mk.Comments = "network namespace holders (a shell reading its stdin), leased by a sandbox or idle"
		}
		rep.Memory = append(rep.Memory, mk)
	}
	rep.Notes = append(rep.Notes, "memory: docker CLI `docker stats --no-stream` MemUsage of the server's containers (label python-docker-mcp.pid), 5 s after the last call")
	return nil
}

// parseStats reads lines of "ID<TAB>USED / LIMIT" and returns used bytes by
// ID.
func parseStats(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		id, usage, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("line %q: want ID<TAB>MEM USAGE", line)
		}
		used, _, _ := strings.Cut(usage, "/")
		v, err := parseDockerSize(used)
		if err != nil {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		out[strings.TrimSpace(id)] = v
	}
	return out, nil
}

// ratio is a / b, NaN when either is missing.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

func p95(rep *benchReport, key string) float64 {
	l, ok := rep.Latency[key]
	if !ok {
		return math.NaN()
	}
	return l.P95
}

func p50(rep *benchReport, key string) float64 {
	l, ok := rep.Latency[key]
	if !ok {
		return math.NaN()
	}
	return l.P50
}

// goals judges the warm-pool and capacity issues' goals against the
// report. The latency goals belong to one way of issuing calls: the spaced
// ones (-interval > 0) are not judged on a back-to-back run, nor the
// back-to-back ones on a spaced run; they read "not measured".
func goals(rep *benchReport) []goal {
	spaced := rep.Options.IntervalMS > 0
	only := func(ok bool, v float64) float64 {
		if !ok {
			return math.NaN()
		}
		return v
	}
	mk := func(name, target, unit string, v float64, met func(float64) bool) goal {
		g := goal{Name: name, Target: target, Unit: unit}
		if !math.IsNaN(v) {
			r := math.Round(v*100) / 100
			m := met(v)
			g.Measured, g.Met = &r, &m
		}
		return g
	}
	return append([]goal{
		mk("spaced: execute-transient print(1) p50", "<= 10 ms", "ms", spacedP50(rep), func(v float64) bool { return v <= goalTransientP50MS }),
		mk("spaced: docker run p50 / transient print(1) p50", ">= 20x", "x", only(spaced, ratio(p50(rep, keyDockerPrint), p50(rep, keyTransient))), func(v float64) bool { return v >= goalPrintRatio }),
		mk("spaced: docker run p50 / transient pandas p50", ">= 50x", "x", only(spaced, ratio(p50(rep, keyDockerPd), p50(rep, keyPandas))), func(v float64) bool { return v >= goalPandasRatio }),
		mk("persistent overhead p50 (latency - duration_ms)", "<= 2 ms", "ms", p50(rep, keyOverhead), func(v float64) bool { return v <= goalPersistentOverMS }),
		mk("back to back: docker run p50 / transient print(1) p50", ">= 5x", "x", only(!spaced, ratio(p50(rep, keyDockerPrint), p50(rep, keyTransient))), func(v float64) bool { return v >= goalBackToBackRatio }),
		mk("back to back: transient print(1) p95 / docker run p95", "<= 1x", "x", only(!spaced, ratio(p95(rep, keyTransient), p95(rep, keyDockerPrint))), func(v float64) bool { return v <= 1 }),
		mk("back to back: docker run p50 / transient pandas p50", ">= 5x", "x", only(!spaced, ratio(p50(rep, keyDockerPd), p50(rep, keyPandas))), func(v float64) bool { return v >= goalBackToBackRatio }),
		mk("bursts of 8: p95 / docker run print(1) p50", "< 1x", "x", ratio(burstP95(rep, 8), p50(rep, keyDockerPrint)), func(v float64) bool { return v < 1 }),
		mk("sustained calls/s / measured ceiling", ">= 0.7", "", ratio(sustained(rep), ceiling(rep)), func(v float64) bool { return v >= goalSustainedShare }),
	}, reuseGoals(rep, mk)...)
}

// spacedP50 is the p50 of transient print(1) calls with a pause between
// them: the spaced scenario's, or on a spaced run (-interval) the
// transient scenario's; NaN when neither was measured.
func spacedP50(rep *benchReport) float64 {
	if _, ok := rep.Latency[keySpaced]; ok {
		return p50(rep, keySpaced)
	}
	if rep.Options.IntervalMS > 0 {
		return p50(rep, keyTransient)
	}
	return math.NaN()
}

func fmtMS(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func printReport(w io.Writer, rep *benchReport) {
	fmt.Fprintf(w, "python-docker-mcp bench  %s\n", rep.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "image %s, docker %s, %d CPUs, pool enabled=%v size=%d max_size=%d max_concurrent_creations=%d preload=%s reuse=%s max_per_principal=%d\n",
		rep.Image, rep.DockerVer, rep.CPUs, rep.Pool.Enabled, rep.Pool.Size, rep.Pool.MaxSize, rep.Pool.MaxConcurrentCreations, strings.Join(rep.Pool.Preload, ","), rep.Pool.Reuse, rep.Pool.MaxPerPrincipal)
	if rep.LoadStart != "" {
		fmt.Fprintf(w, "load average (1 min) at start %s, at end %s\n", rep.LoadStart, rep.LoadEnd)
	}
	o := rep.Options
	fmt.Fprintf(w, "n=%d per MCP scenario (+%d warm-up), baseline n=%d, scenarios=%s\n\n", o.N, o.Warmup, o.BaselineN, strings.Join(o.Scenarios, ","))

	if len(rep.Latency) > 0 {
		rows := [][]string{{"latency (ms)", "n", "p50", "p95", "p99", "min", "max", "code p50"}}
		for _, k := range latencyOrder {
			l, ok := rep.Latency[k]
			if !ok {
				continue
			}
			code := "-"
			if c, ok := rep.CodeMS[k]; ok {
				code = fmtMS(c.P50)
			}
			rows = append(rows, []string{k, strconv.Itoa(l.N), fmtMS(l.P50), fmtMS(l.P95), fmtMS(l.P99), fmtMS(l.Min), fmtMS(l.Max), code})
		}
		writeTable(w, rows)
		fmt.Fprintln(w, "(code p50: the runner's own duration_ms of the code, inside the sandbox)")
		fmt.Fprintln(w)
		rows = [][]string{{"ratio of p50s", "measured"}}
		for _, r := range []struct{ name, a, b string }{
			{"docker run print(1) / execute-transient print(1)", keyDockerPrint, keyTransient},
			{"docker run pandas / execute-transient pandas", keyDockerPd, keyPandas},
			{"docker run print(1) / execute-persistent print(1)", keyDockerPrint, keyPersistent},
		} {
			if v := ratio(p50(rep, r.a), p50(rep, r.b)); !math.IsNaN(v) {
				rows = append(rows, []string{r.name, fmt.Sprintf("%.2fx", v)})
			}
		}
		if len(rows) > 1 {
			writeTable(w, rows)
			fmt.Fprintln(w)
		}
	}

	printCapacity(w, rep)
	printReuseNever(w, rep)
	printRuntimes(w, rep)

	if len(rep.Throughput) > 0 {
		rows := [][]string{{"throughput, transient print(1)", "calls", "errors", "seconds", "calls/s", "p50 ms", "p99 ms"}}
		for _, t := range rep.Throughput {
			rows = append(rows, []string{fmt.Sprintf("%d client(s)", t.Clients), strconv.Itoa(t.Calls), strconv.Itoa(t.Errors),
				fmt.Sprintf("%.1f", t.Seconds), fmt.Sprintf("%.2f", t.CallsPerSec), fmtMS(t.Latency.P50), fmtMS(t.Latency.P99)})
		}
		writeTable(w, rows)
		fmt.Fprintln(w)
	}

	if len(rep.Memory) > 0 {
		rows := [][]string{{"memory per idle sandbox", "count", "mean MiB", "min", "max", "total MiB"}}
		for _, m := range rep.Memory {
			rows = append(rows, []string{m.Kind + ": " + m.Comments, strconv.Itoa(m.Count),
				fmt.Sprintf("%.1f", m.MeanMiB), fmt.Sprintf("%.1f", m.MinMiB), fmt.Sprintf("%.1f", m.MaxMiB), fmt.Sprintf("%.1f", m.MeanMiB*float64(m.Count))})
		}
		writeTable(w, rows)
		fmt.Fprintln(w)
	}

	if slices.ContainsFunc(rep.Goals, func(g goal) bool { return g.Measured != nil }) {
		rows := [][]string{{"goal", "target", "measured", "verdict"}}
		for _, g := range rep.Goals {
			m, verdict := "-", "not measured"
			if g.Measured != nil {
				m = fmt.Sprintf("%.2f %s", *g.Measured, g.Unit)
				if g.Unit == "x" {
					m = fmt.Sprintf("%.2fx", *g.Measured)
				}
				verdict = "not met"
				if *g.Met {
					verdict = "met"
				}
			}
			rows = append(rows, []string{g.Name, g.Target, m, verdict})
		}
		writeTable(w, rows)
		fmt.Fprintln(w)
	}

	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "sandboxes of the server left after it exited: %d; total %.0f s\n", rep.LeftBehind, rep.ElapsedSecs)
}

// writeTable prints rows with the first column left-aligned and the others
// right-aligned, two spaces apart.
func writeTable(w io.Writer, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// loadAverage returns the 1-minute load average from /proc/loadavg, or ""
// where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
