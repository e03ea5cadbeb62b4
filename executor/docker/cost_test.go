package docker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// countingCPU is a cpu function for the measurements whose every reading
// is one millisecond more than the last, so each phase should show 1 ms.
type countingCPU struct{ n time.Duration }

func (c *countingCPU) read() time.Duration {
	c.n += time.Millisecond
	return c.n
}

func phaseNames(ph []executor.Phase) []string {
	var names []string
	for _, p := range ph {
		names = append(names, p.Name)
	}
	return names
}

// checkPhases fails unless ph has exactly the names, each phase took some
// wall time and its CPU is one reading's growth.
func checkPhases(t *testing.T, what string, ph []executor.Phase, names ...string) {
	t.Helper()
	if got := phaseNames(ph); !slices.Equal(got, names) {
		t.Fatalf("%s phases %v, want %v", what, got, names)
	}
	for _, p := range ph {
		if p.Wall <= 0 || p.CPU != time.Millisecond {
			t.Errorf("%s phase %s: wall %v, CPU %v; want wall > 0 and CPU 1ms (one reading)", what, p.Name, p.Wall, p.CPU)
		}
	}
}

// TestMeasureSandboxAndEmpty lives through a sandbox and an empty
// container as bench's cost scenario does, on the real daemon: the
// phases in order, and nothing left.
func TestMeasureSandboxAndEmpty(t *testing.T) {
	e, cli := newExec(t, nil)
	ctx := tctx(t, 2*time.Minute)

	cpu := &countingCPU{}
	ph, err := e.MeasureSandbox(ctx, nil, true, cpu.read)
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, "sandbox", ph, "create", "attach", "start", "ready", "preload", "remove")

	cpu = &countingCPU{}
	ph, err = e.MeasureEmpty(ctx, cpu.read)
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, "empty container", ph, "create", "start", "exit", "remove")
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.Instance()); n != 0 {
		t.Errorf("%d measured container(s) left", n)
	}

	// The first measured sandbox handed out the runner's code: the next
	// sandbox loads it instead of compiling the runner.
	wantStatus(t, transient(t, e, executor.Request{Code: "print(1)"}), "ok")
	if st := e.Stats(); st.RunnersLoaded != 1 || st.RunnersCompiled != 0 {
		t.Errorf("the sandbox after the measured ones: runners loaded %d, compiled %d; want 1 and 0 (the measured sandbox did not hand out the runner's code)", st.RunnersLoaded, st.RunnersCompiled)
	}
}

// TestMeasureEmptyFails: an empty command that fails is an error that
// names it and the image, and its container is removed all the same.
func TestMeasureEmptyFails(t *testing.T) {
	e, cli := newExec(t, nil)
	saved := executor.EmptyCommand
	executor.EmptyCommand = []string{"false"}
	t.Cleanup(func() { executor.EmptyCommand = saved })
	_, err := e.MeasureEmpty(tctx(t, time.Minute), (&countingCPU{}).read)
	if err == nil || !strings.Contains(err.Error(), `"false" exited with status 1`) || !strings.Contains(err.Error(), configOf(t, e).Docker.Image) {
		t.Errorf("MeasureEmpty of `false`: %v; want an error naming the command, its status and the image", err)
	}
	if n := dockertest.Ours(t, cli, backend.LabelInstance+"="+e.Instance()); n != 0 {
		t.Errorf("%d container(s) left after the failed measurement", n)
	}
}
