package executor

import (
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
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
	e, _ := newExec(t, nil)
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
	_, id := persistent(t, e, "", Request{Code: "0"})
	persistentRun := measure("persistent", func() error {
		res, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Code: "print(1)"})
		if err == nil && res.Stdout != "1\n" {
			err = fmt.Errorf("stdout %q", res.Stdout)
		}
		return err
	})
	q := func(d []time.Duration, p float64) time.Duration { return d[int(p*float64(len(d)-1)+0.5)] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%8.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("print(1), %d calls each (after one warm-up call)", n)
	t.Logf("%-34s %11s %11s %8s", "", "p50", "p95", "p50 vs docker run")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{
		{"docker run --rm (CLI)", dockerRun},
		{"Transient (cold sandbox)", transientRun},
		{"Persistent (existing session)", persistentRun},
	} {
		t.Logf("%-34s %s %s %7.2fx", row.name, ms(q(row.d, .5)), ms(q(row.d, .95)), float64(q(dockerRun, .5))/float64(q(row.d, .5)))
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
