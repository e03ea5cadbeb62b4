package bench

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// burnEnv makes this test binary a child that keeps a CPU busy until its
// stdin closes (TestMeterReapedOnce).
const burnEnv = "BENCH_TEST_BURN"

func TestMain(m *testing.M) {
	if os.Getenv(burnEnv) != "" {
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, os.Stdin)
			close(done)
		}()
		for {
			select {
			case <-done:
				os.Exit(0)
			default:
			}
		}
	}
	os.Exit(m.Run())
}

func TestMeterObserve(t *testing.T) {
	m := &cpuMeter{procs: map[procKey]procCPU{}}
	shim, runc, start := procKey{100, 1}, procKey{101, 2}, procKey{102, 3}
	m.observe(map[procKey]procCPU{
		shim:  {ppid: 1, cpu: 10 * time.Millisecond},
		runc:  {ppid: 100, cpu: 30 * time.Millisecond},
		start: {ppid: 1, cpu: 5 * time.Millisecond},
	})
	// runc exited and the shim reaped it (its cutime holds runc's 40 ms);
	// start exited to init, which no one watches.
	m.observe(map[procKey]procCPU{shim: {ppid: 1, cpu: 50 * time.Millisecond}})
	if got := m.total(); got != 55*time.Millisecond {
		t.Errorf("after runc is reaped by its shim: %v, want 55 ms (shim 10 + runc 40, once; start's 5 kept)", got)
	}
	// The shim exits to init: its last reading stays.
	m.observe(map[procKey]procCPU{})
	if got := m.total(); got != 55*time.Millisecond {
		t.Errorf("after the shim exits to init: %v, want 55 ms", got)
	}
	// A new process with a gone one's pid is another process.
	m.observe(map[procKey]procCPU{{100, 9}: {ppid: 1, cpu: 7 * time.Millisecond}})
	if got := m.total(); got != 62*time.Millisecond {
		t.Errorf("after the pid is reused: %v, want 62 ms", got)
	}
	// A shim and its container's init gone in the same interval: the
	// shim's last reading predates the reaping, so both stay.
	m.observe(map[procKey]procCPU{
		{200, 1}: {ppid: 1, cpu: 10 * time.Millisecond},
		{201, 1}: {ppid: 200, cpu: 80 * time.Millisecond},
	})
	m.observe(map[procKey]procCPU{})
	if got := m.total(); got != 152*time.Millisecond {
		t.Errorf("after a shim and its child went together: %v, want 152 ms", got)
	}
	// A grandchild reaped by its parent, reaped in turn by a watched
	// process still here: the grandparent's reading holds all three.
	g := procKey{300, 1}
	m.observe(map[procKey]procCPU{
		g:        {ppid: 1, cpu: 5 * time.Millisecond},
		{301, 1}: {ppid: 300, cpu: 10 * time.Millisecond},
		{302, 1}: {ppid: 301, cpu: 20 * time.Millisecond},
	})
	m.observe(map[procKey]procCPU{g: {ppid: 1, cpu: 40 * time.Millisecond}})
	if got := m.total(); got != 192*time.Millisecond {
		t.Errorf("after a chain was reaped by a process still here: %v, want 192 ms", got)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (runc init) S 8120 4242 4242 0 -1 4194560 1 2 3 4 7 5 3 2 20 0 1 0 123456 1000 10 18446744073709551615"
	k, p, ok := parseProcStat(4242, line)
	if !ok || k != (procKey{4242, 123456}) || p != (procCPU{comm: "runc init", ppid: 8120, cpu: 170 * time.Millisecond}) {
		t.Errorf("parse = %v %+v %v; want pid 4242 start 123456, comm runc init, ppid 8120, 17 ticks", k, p, ok)
	}
	if _, _, ok := parseProcStat(1, "1 (runc) S 0 1"); ok {
		t.Error("a short line was taken")
	}
}

func TestWatchedOf(t *testing.T) {
	all := map[procKey]procCPU{
		{1, 0}:  {comm: "init", ppid: 0},
		{10, 0}: {comm: "dockerd", ppid: 1},
		{11, 0}: {comm: "containerd", ppid: 10},
		{20, 0}: {comm: "containerd-shim", ppid: 1},
		{21, 0}: {comm: "python3", ppid: 20},
		{22, 0}: {comm: "sh", ppid: 21},
		{30, 0}: {comm: "bash", ppid: 1},
		{31, 0}: {comm: "python3", ppid: 30},
	}
	got := watchedOf(all, daemonProcs)
	var pids []int
	for k := range got {
		pids = append(pids, k.pid)
	}
	slices.Sort(pids)
	if want := []int{10, 11, 20, 21, 22}; !slices.Equal(pids, want) {
		t.Errorf("watched %v, want %v (the daemons and their descendants only)", pids, want)
	}
}

// The meter on real processes: a child of this test binary burns CPU and
// is read while it runs. Watching the parent (and so its descendants),
// the child's time counts once after the parent reaps it; watching the
// child alone, its last reading stays.
func TestMeterReapedOnce(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Another name for this binary gives the child its own comm.
	child := filepath.Join(t.TempDir(), "meterchild")
	if err := os.Symlink(self, child); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Base(self)
	if len(parent) > 15 { // comm is at most 15 bytes
		parent = parent[:15]
	}
	for _, tc := range []struct {
		name         string
		names        map[string]bool
		parentCounts bool
	}{
		{"parent watched", map[string]bool{parent: true}, true},
		{"child alone", map[string]bool{"meterchild": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &cpuMeter{names: tc.names, procs: map[procKey]procCPU{}}
			s0 := m.sample()
			r0 := selfCPU(t)
			cmd := exec.Command(child)
			cmd.Env = append(os.Environ(), burnEnv+"=1")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Read the meter while the child runs, until it has seen
			// 200 ms (however busy the machine), then let the child go.
			var during time.Duration
			for deadline := time.Now().Add(time.Minute); during < 200*time.Millisecond; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					in.Close()
					cmd.Wait()
					t.Fatalf("read %v while the child ran for a minute; it did not see the child", during)
				}
				during = m.sample() - s0
			}
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
			got := m.sample() - s0
			r1 := selfCPU(t)
			ran := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			want := during // the child's last reading
			if tc.parentCounts {
				want = ran + (r1 - r0)
			}
			// Each reading is in 10 ms ticks, several fields of two
			// processes; counting the child twice would add its
			// reading while it ran (at least 200 ms).
			const slack = 60 * time.Millisecond
			if got < want-slack || got > want+slack {
				t.Errorf("meter %v after the child ran %v (read %v meanwhile; parent's own %v); want %v +- %v", got, ran, during, r1-r0, want, slack)
			}
		})
	}
}

// selfCPU is this process's own CPU time.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
