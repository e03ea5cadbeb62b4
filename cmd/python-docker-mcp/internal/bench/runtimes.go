package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// The runtimes scenario: the same calls under each OCI runtime in one run
// (-runtimes runsc: gVisor beside the daemon's default), each with a server
// of its own started with --set docker.runtime=NAME.

// scRuntimes is not part of "all": it starts two servers per runtime.
// -runtimes adds it.
const scRuntimes = "runtimes"

// runtimePoolPause spaces the pooled calls so the pool has refilled
// before the next (a runsc sandbox takes over a second to make here).
const runtimePoolPause = 1500 * time.Millisecond

// runtimeRow is one runtime's figures: execute-transient print(1) with
// the pool off (every call starts a fresh sandbox: the cold sandbox), the
// same with the pool on and calls spaced by runtimePoolPause (the pooled
// call), and execute-persistent print(1) in one session (the session call).
type runtimeRow struct {
	Runtime string  `json:"runtime"` // "" is the daemon's default
	Cold    latency `json:"cold"`
	Pooled  latency `json:"pooled"`
	Session latency `json:"session"`
}

// runtimesScenario measures the default runtime (docker.runtime as
// configured) and then each of -runtimes.
func (b *bencher) runtimesScenario(ctx context.Context, rep *benchReport) error {
	n := min(b.opts.N, 20)
	base := b.srv.Args
	defer func() { b.srv.Args = base }()
	for _, rt := range append([]string{b.cfg.Docker.Runtime}, b.opts.Runtimes...) {
		row := runtimeRow{Runtime: rt}
		name := rt
		if name == "" {
			name = "default"
		}
		for _, phase := range []struct {
			pool bool
			run  func() error
		}{
			{false, func() error {
				b.logf("runtime %s: cold sandbox, %d calls with the pool off", name, n)
				lat, err := b.measure(ctx, n, 0, "execute-transient", map[string]any{"code": printCode})
				row.Cold = summarize(lat)
				return err
			}},
			{true, func() error {
				b.logf("runtime %s: pooled call, %d calls %v apart; session call, %d calls", name, n, runtimePoolPause, n)
				lat, err := b.measure(ctx, n, runtimePoolPause, "execute-transient", map[string]any{"code": printCode})
				if err != nil {
					return err
				}
				row.Pooled = summarize(lat)
				_, _, sc, err := b.call(ctx, "execute-persistent", map[string]any{"code": printCode}, printWant)
				if err != nil {
					return b.callFailed(err)
				}
				id, _ := sc["session_id"].(string)
				b.sessionID = id
				lat, err = b.measure(ctx, n, 0, "execute-persistent", map[string]any{"code": printCode, "session_id": id})
				row.Session = summarize(lat)
				return err
			}},
		} {
			b.srv.Args = withSets(base, "docker.runtime="+rt, "pool.enabled="+strconv.FormatBool(phase.pool))
			if err := b.startServer(ctx); err != nil {
				return err
			}
			err := phase.run()
			if _, serr := b.stopServer(); err == nil {
				err = serr
			}
			if err != nil {
				return err
			}
		}
		rep.Runtimes = append(rep.Runtimes, row)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("runtimes: execute print(1), a server per runtime and pool setting (--set docker.runtime=NAME); cold: pool.enabled=false; pooled: %v between calls so the pool refills; %d calls per row after %d warm-up", runtimePoolPause, n, b.opts.Warmup))
	return nil
}

// measure makes warm-up calls, then n calls pause apart, and returns
// their latencies (ms).
func (b *bencher) measure(ctx context.Context, n int, pause time.Duration, tool string, args map[string]any) ([]float64, error) {
	for range b.opts.Warmup {
		if _, _, _, err := b.call(ctx, tool, args, printWant); err != nil {
			return nil, b.callFailed(err)
		}
	}
	var lat []float64
	for range n {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		ms, _, _, err := b.call(ctx, tool, args, printWant)
		if err != nil {
			return nil, b.callFailed(err)
		}
		lat = append(lat, ms)
	}
	return lat, nil
}

// withSets is the server's arguments with --set flags added before the
// final "serve" (later flags win).
func withSets(args []string, sets ...string) []string {
	out := slices.Clone(args[:len(args)-1])
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return append(out, args[len(args)-1])
}

// printRuntimes prints one row per runtime and the ratio of each to the
// first (the default runtime).
func printRuntimes(w io.Writer, rep *benchReport) {
	if len(rep.Runtimes) == 0 {
		return
	}
	rows := [][]string{{"runtime, print(1)", "cold p50", "cold p95", "pooled p50", "pooled p95", "session p50", "session p95"}}
	for _, r := range rep.Runtimes {
		name := r.Runtime
		if name == "" {
			name = "default (runc)"
		}
		rows = append(rows, []string{name, fmtMS(r.Cold.P50), fmtMS(r.Cold.P95), fmtMS(r.Pooled.P50), fmtMS(r.Pooled.P95), fmtMS(r.Session.P50), fmtMS(r.Session.P95)})
	}
	first := rep.Runtimes[0]
	firstName := first.Runtime
	if firstName == "" {
		firstName = "default"
	}
	for _, r := range rep.Runtimes[1:] {
		x := func(a, b float64) string {
			if v := ratio(a, b); !math.IsNaN(v) {
				return fmt.Sprintf("%.2fx", v)
			}
			return "-"
		}
		rows = append(rows, []string{r.Runtime + " / " + firstName, x(r.Cold.P50, first.Cold.P50), "", x(r.Pooled.P50, first.Pooled.P50), "", x(r.Session.P50, first.Session.P50), ""})
	}
	writeTable(w, rows)
	fmt.Fprintln(w)
}
