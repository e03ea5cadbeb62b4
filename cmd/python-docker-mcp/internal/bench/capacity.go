package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
)

// The capacity scenarios: what one fresh sandbox costs this machine (cost),
// and how bursts of calls issued at once are served (burst).

// costClass is what one kind of fresh container (a sandbox, or the floor's
// empty container) costs, phase by phase.
type costClass struct {
	Class string `json:"class"`
	// Floor marks the empty container (executor.MeasureEmpty): Docker's
	// own cost for a container like a sandbox, not a sandbox.
	Floor  bool        `json:"floor,omitempty"`
	N      int         `json:"n"`
	Phases []costPhase `json:"phases"`
	// WallMS is the p50 of the whole life; CPUSeconds the mean CPU time
	// of the whole life (the daemons and all they start); Ceiling = CPUs /
	// CPUSeconds, the fresh sandboxes per second this machine can make.
	WallMS     float64 `json:"wall_p50_ms"`
	CPUSeconds float64 `json:"cpu_s"`
	// MachineCPUSeconds is the mean busy time of the whole machine
	// (/proc/stat) over a sandbox's life: it also holds what the daemons'
	// counters miss (the kernel's own threads, such as those tearing down
	// namespaces and cgroups) and anything else running. Ceiling uses the
	// larger of the two.
	MachineCPUSeconds float64 `json:"machine_cpu_s"`
	Ceiling           float64 `json:"ceiling_per_s"`
}

type costPhase struct {
	Name      string  `json:"name"`
	WallP50MS float64 `json:"wall_p50_ms"`
	CPUMeanMS float64 `json:"cpu_mean_ms"`
}

// burstLevel is one burst size, repeated.
type burstLevel struct {
	Size    int `json:"size"`
	Repeats int `json:"repeats"`
	Errors  int `json:"errors"`
	// Latency is over every call; Later over the bursts after the first
	// (the pool has seen a burst of this size).
	Latency latency `json:"latency"`
	Later   latency `json:"later"`
	// CallsPerSec is calls / the time from a burst's start to its last
	// answer, summed over the bursts.
	CallsPerSec float64 `json:"calls_per_s"`
}

// daemonProcs are the processes (by /proc comm) whose CPU time a sandbox
// costs: the Docker daemon, containerd, the container's shim and
// fuse-overlayfs (where it is the storage driver; it runs on its own, not
// under dockerd), with every process they start (runc, the container's
// own processes).
var daemonProcs = map[string]bool{"dockerd": true, "containerd": true, "containerd-shim": true, "fuse-overlayfs": true}

// cpuMeter sums the CPU time of the Docker daemons' processes and their
// descendants.
//
// A process's reading is its own time (utime+stime) plus what it reaped
// (cutime+cstime). When a watched process is gone and its parent is still
// here and watched (runc, or the container's init, under its shim), the
// parent's reading now holds all of it: its last reading is dropped, or
// it would count twice. Otherwise (a shim exits to init; a parent gone in
// the same interval, whose last reading predates the reaping) its last
// reading stays.
type cpuMeter struct {
	names map[string]bool // the comms watched with their descendants
	procs map[procKey]procCPU
	gone  time.Duration // the last readings that stay of processes gone
}

// procKey tells processes apart across pid reuse.
type procKey struct {
	pid   int
	start int64 // starttime, clock ticks after boot
}

type procCPU struct {
	comm string
	ppid int
	cpu  time.Duration // own time plus reaped children's
}

func newCPUMeter() *cpuMeter {
	return &cpuMeter{names: daemonProcs, procs: map[procKey]procCPU{}}
}

// clockTick is USER_HZ, 100 on every Linux the bench runs on.
const clockTick = 10 * time.Millisecond

// sample returns the watched processes' CPU time since the meter's first
// look.
func (m *cpuMeter) sample() time.Duration {
	m.observe(m.scan())
	return m.total()
}

// scan reads the watched processes now alive from /proc.
func (m *cpuMeter) scan() map[procKey]procCPU {
	all := map[procKey]procCPU{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if k, p, ok := parseProcStat(pid, string(b)); ok {
			all[k] = p
		}
	}
	return watchedOf(all, m.names)
}

// watchedOf keeps the processes whose comm is in names, or one of whose
// ancestors' is.
func watchedOf(all map[procKey]procCPU, names map[string]bool) map[procKey]procCPU {
	byPID := make(map[int]procCPU, len(all))
	for k, p := range all {
		byPID[k.pid] = p
	}
	seen := map[int]bool{}
	var watched func(pid, depth int) bool
	watched = func(pid, depth int) bool {
		if w, ok := seen[pid]; ok {
			return w
		}
		p, ok := byPID[pid]
		w := ok && depth < 64 && (names[p.comm] || (p.ppid != pid && watched(p.ppid, depth+1)))
		seen[pid] = w
		return w
	}
	out := map[procKey]procCPU{}
	for k, p := range all {
		if watched(k.pid, 0) {
			out[k] = p
		}
	}
	return out
}

// parseProcStat reads one /proc/PID/stat line.
func parseProcStat(pid int, s string) (procKey, procCPU, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procKey{}, procCPU{}, false
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 of proc(5), state
	if len(f) < 20 {
		return procKey{}, procCPU{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseInt(f[19], 10, 64)
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return procKey{pid, start}, procCPU{comm: s[open+1 : end], ppid: ppid, cpu: time.Duration(ticks) * clockTick}, true
}

// total is the watched processes' CPU time.
func (m *cpuMeter) total() time.Duration {
	t := m.gone
	for _, p := range m.procs {
		t += p.cpu
	}
	return t
}

// observe takes live as the processes now here. The last reading of one
// gone since the last look stays unless a live watched process reaped it,
// directly or through parents gone in the same interval.
func (m *cpuMeter) observe(live map[procKey]procCPU) {
	here := map[int]bool{}
	for k := range live {
		here[k.pid] = true
	}
	gone := map[int]procCPU{}
	for k, p := range m.procs {
		if _, ok := live[k]; !ok {
			gone[k.pid] = p
		}
	}
	var reaped func(pid, depth int) bool
	reaped = func(pid, depth int) bool {
		ppid := gone[pid].ppid
		if here[ppid] {
			return true
		}
		_, ok := gone[ppid]
		return ok && ppid != pid && depth < 64 && reaped(ppid, depth+1)
	}
	for pid, p := range gone {
		if !reaped(pid, 0) {
			m.gone += p.cpu
		}
	}
	m.procs = live
}

// machineBusy is the whole machine's busy CPU time so far: /proc/stat's
// user, nice, system, irq, softirq and steal over every CPU.
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, true
}

// costScenario lives through fresh sandboxes one at a time, before the
// server starts (nothing of ours runs meanwhile): cold (what a call that
// misses the pool starts), pooled bare (with the runner's warm-up run),
// and pooled with pool.preload imported.
func (b *bencher) costScenario(ctx context.Context, rep *benchReport) error {
	cfg := b.cfg
	cfg.Pool.Enabled = false
	db, err := docker.Open(ctx, nil)
	if err != nil {
		return benchFail(exitDocker, "cost: %v", err)
	}
	ex, err := executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), db, nil)
	if err != nil {
		return benchFail(exitDocker, "cost: %v", err)
	}
	defer ex.Close(context.Background())
	meter := newCPUMeter()
	sandbox := func(modules []string, preload bool) func() ([]executor.Phase, error) {
		return func() ([]executor.Phase, error) { return ex.MeasureSandbox(ctx, modules, preload, meter.sample) }
	}
	classes := []struct {
		name    string
		floor   bool
		measure func() ([]executor.Phase, error)
	}{
		{"cold (no preload)", false, sandbox(nil, false)},
		{"pooled bare (warm-up run)", false, sandbox(nil, true)},
		{"pooled " + strings.Join(b.cfg.Pool.Preload, ","), false, sandbox(b.cfg.Pool.Preload, true)},
		{"floor: empty container (" + strings.Join(executor.EmptyCommand, " ") + ")", true, func() ([]executor.Phase, error) { return ex.MeasureEmpty(ctx, meter.sample) }},
	}
	for _, c := range classes {
		b.logf("cost: %s, %d containers one at a time", c.name, b.opts.CostN)
		walls := map[string][]float64{}
		cpus := map[string][]float64{}
		var names []string
		var totalWall, totalCPU, machine []float64
		for range b.opts.CostN + 1 { // the first is a warm-up
			busy0, busyOK := machineBusy()
			ph, err := c.measure()
			if busy1, ok := machineBusy(); ok && busyOK && names != nil {
				machine = append(machine, ms(busy1-busy0))
			}
			if err != nil {
				return benchFail(exitDocker, "cost: %s: %v", c.name, err)
			}
			if names == nil {
				for _, p := range ph {
					names = append(names, p.Name)
				}
				continue
			}
			var w, cp float64
			for _, p := range ph {
				walls[p.Name] = append(walls[p.Name], ms(p.Wall))
				cpus[p.Name] = append(cpus[p.Name], ms(p.CPU))
				w += ms(p.Wall)
				cp += ms(p.CPU)
			}
			totalWall = append(totalWall, w)
			totalCPU = append(totalCPU, cp)
		}
		cc := costClass{Class: c.name, Floor: c.floor, N: b.opts.CostN, WallMS: summarize(totalWall).P50, CPUSeconds: summarize(totalCPU).Mean / 1000}
		if len(machine) > 0 {
			cc.MachineCPUSeconds = summarize(machine).Mean / 1000
		}
		for _, n := range names {
			cc.Phases = append(cc.Phases, costPhase{Name: n, WallP50MS: summarize(walls[n]).P50, CPUMeanMS: summarize(cpus[n]).Mean})
		}
		if cpu := cc.cpu(); cpu > 0 {
			cc.Ceiling = float64(runtime.NumCPU()) / cpu
		}
		rep.Cost = append(rep.Cost, cc)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("cost: %d containers per row one at a time (after 1 warm-up), before the server starts; the floor row is a container of a sandbox's spec that runs `%s` with nothing attached; CPU = utime+stime+cutime+cstime (/proc/PID/stat) of dockerd, containerd, containerd-shim and fuse-overlayfs and of every process they start (runc, the container's processes), each process counted once; machine CPU = the whole machine's busy time (/proc/stat) over each sandbox's life, which also holds what those counters miss (the kernel's own threads, hooks) and any other work running meanwhile; ceiling = %d CPUs / the larger of the two", b.opts.CostN, strings.Join(executor.EmptyCommand, " "), runtime.NumCPU()))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// burstScenario issues bursts of transient print(1) calls at once, each
// size repeated, with a pause between bursts.
func (b *bencher) burstScenario(ctx context.Context, rep *benchReport) error {
	args := map[string]any{"code": printCode}
	for _, size := range b.opts.BurstSizes {
		lvl := burstLevel{Size: size, Repeats: b.opts.Bursts}
		var all, later []float64
		var busy time.Duration
		for r := range b.opts.Bursts {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(b.opts.BurstPause):
			}
			b.logf("burst: %d calls at once (%d of %d)", size, r+1, b.opts.Bursts)
			var (
				mu       sync.Mutex
				wg       sync.WaitGroup
				firstErr error
			)
			t0 := time.Now()
			for range size {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, _, _, err := b.call(ctx, "execute-transient", args, printWant)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						lvl.Errors++
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					all = append(all, v)
					if r > 0 {
						later = append(later, v)
					}
				}()
			}
			wg.Wait()
			busy += time.Since(t0)
			if firstErr != nil {
				b.logf("burst: %d calls failed; first: %v", lvl.Errors, firstErr)
			}
		}
		lvl.Latency, lvl.Later = summarize(all), summarize(later)
		lvl.Latency.Errors = lvl.Errors
		if busy > 0 {
			lvl.CallsPerSec = float64(len(all)) / busy.Seconds()
		}
		rep.Bursts = append(rep.Bursts, lvl)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("burst: N execute-transient print(1) calls issued at once over the one stdio session, %d times per size, %v pause before each burst; \"later\" leaves out each size's first burst", b.opts.Bursts, b.opts.BurstPause))
	return nil
}

// ceiling is the machine's fresh sandboxes per second: the cold row of
// the cost scenario (the cheapest sandbox that can serve a call), NaN when
// not measured.
func ceiling(rep *benchReport) float64 {
	for _, c := range rep.Cost {
		if c.Ceiling > 0 && !c.Floor {
			return c.Ceiling
		}
	}
	return math.NaN()
}

// floorBound is what the cost scenario's empty container implies for
// back-to-back calls when every call has a fresh container: the machine
// makes no more than its CPUs / the empty container's CPU seconds
// containers a second, so calls one after another cannot average less
// than the inverse. Nil without a floor row.
type floorBound struct {
	CPUSeconds float64 `json:"cpu_s"`       // the empty container's, the larger of CPU and machine CPU
	CallMS     float64 `json:"min_mean_ms"` // CPUs / CPUSeconds, as ms per call
	// DockerRunP50MS / CallMS: the most a back-to-back p50 of the same
	// mean can beat docker run by; NaN (null) without the docker-run
	// scenario.
	DockerRunP50MS float64 `json:"docker_run_p50_ms"`
	MaxRatio       float64 `json:"max_ratio"`
}

// MarshalJSON writes the docker run figures as null when not measured
// (JSON has no NaN).
func (f floorBound) MarshalJSON() ([]byte, error) {
	out := map[string]any{"cpu_s": f.CPUSeconds, "min_mean_ms": f.CallMS, "docker_run_p50_ms": nil, "max_ratio": nil}
	if !math.IsNaN(f.DockerRunP50MS) {
		out["docker_run_p50_ms"], out["max_ratio"] = f.DockerRunP50MS, f.MaxRatio
	}
	return json.Marshal(out)
}

// cpu is the larger of the two CPU figures, the one ceilings use.
func (c costClass) cpu() float64 { return max(c.CPUSeconds, c.MachineCPUSeconds) }

func newFloorBound(rep *benchReport) *floorBound {
	for _, c := range rep.Cost {
		cpu := c.cpu()
		if !c.Floor || cpu <= 0 || rep.CPUs <= 0 {
			continue
		}
		f := &floorBound{CPUSeconds: cpu, CallMS: 1000 * cpu / float64(rep.CPUs), DockerRunP50MS: p50(rep, keyDockerPrint)}
		f.MaxRatio = ratio(f.DockerRunP50MS, f.CallMS)
		return f
	}
	return nil
}

// sustained is the best calls/s of the throughput scenario.
func sustained(rep *benchReport) float64 {
	v := math.NaN()
	for _, t := range rep.Throughput {
		if math.IsNaN(v) || t.CallsPerSec > v {
			v = t.CallsPerSec
		}
	}
	return v
}

func printCapacity(w io.Writer, rep *benchReport) {
	if len(rep.Cost) > 0 {
		phases := []string{"create", "attach", "start", "ready", "preload", "exit", "remove"}
		head := []string{"cost per fresh container", "n"}
		for _, p := range phases {
			head = append(head, p)
		}
		rows := [][]string{append(head, "wall p50 ms", "CPU s", "machine CPU s", "ceiling/s")}
		for _, c := range rep.Cost {
			row := []string{c.Class, strconv.Itoa(c.N)}
			for _, name := range phases {
				cell := "-"
				for _, p := range c.Phases {
					if p.Name == name {
						cell = fmtMS(p.WallP50MS) + "/" + fmtMS(p.CPUMeanMS)
					}
				}
				row = append(row, cell)
			}
			rows = append(rows, append(row, fmtMS(c.WallMS), fmt.Sprintf("%.3f", c.CPUSeconds), fmt.Sprintf("%.3f", c.MachineCPUSeconds), fmt.Sprintf("%.2f", c.Ceiling)))
		}
		writeTable(w, rows)
		fmt.Fprintln(w, "(phase cells: wall p50 ms / mean CPU ms; CPU s: whole life, the daemons and all they start; machine CPU s: the whole machine's busy time meanwhile; ceiling: CPUs / the larger)")
		if f := rep.Floor; f != nil {
			fmt.Fprintf(w, "floor: an empty container costs %.3f CPU s: with a fresh container per call, calls back to back cannot average under %s ms on %d CPUs", f.CPUSeconds, fmtMS(f.CallMS), rep.CPUs)
			if !math.IsNaN(f.MaxRatio) {
				fmt.Fprintf(w, ": on average at best %.2fx faster than docker run print(1) p50 (%s ms)", f.MaxRatio, fmtMS(f.DockerRunP50MS))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	if len(rep.Bursts) > 0 {
		rows := [][]string{{"bursts, transient print(1)", "calls", "errors", "p50", "p95", "max", "later p50", "later p95", "calls/s"}}
		for _, l := range rep.Bursts {
			rows = append(rows, []string{fmt.Sprintf("%d at once x%d", l.Size, l.Repeats), strconv.Itoa(l.Latency.N), strconv.Itoa(l.Errors),
				fmtMS(l.Latency.P50), fmtMS(l.Latency.P95), fmtMS(l.Latency.Max), fmtMS(l.Later.P50), fmtMS(l.Later.P95), fmt.Sprintf("%.2f", l.CallsPerSec)})
		}
		writeTable(w, rows)
		fmt.Fprintln(w)
	}
	if c, s := ceiling(rep), sustained(rep); !math.IsNaN(c) && !math.IsNaN(s) {
		fmt.Fprintf(w, "sustained transient calls/s %.2f = %.0f%% of the measured ceiling of %.2f fresh sandboxes/s\n\n", s, 100*s/c, c)
	}
}

// burstP95 is the p95 of every call of bursts of size, NaN if not run.
func burstP95(rep *benchReport, size int) float64 {
	for _, l := range rep.Bursts {
		if l.Size == size {
			return l.Latency.P95
		}
	}
	return math.NaN()
}
