package executor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// liveOutput collects a run's Output chunks as a client reassembles them:
// per stream, each chunk at its offset.
type liveOutput struct {
	chunks []Output
	text   map[string]string
	ends   map[string]int64
	gaps   int64
}

func (l *liveOutput) add(t *testing.T) func(Output) {
	l.text, l.ends = map[string]string{}, map[string]int64{}
	return func(o Output) {
		if o.Offset < l.ends[o.Stream] {
			t.Errorf("chunk of %s at %d overlaps the last one (ends at %d)", o.Stream, o.Offset, l.ends[o.Stream])
		}
		l.gaps += o.Offset - l.ends[o.Stream]
		l.ends[o.Stream] = o.Offset + o.Bytes
		l.text[o.Stream] += o.Data
		l.chunks = append(l.chunks, o)
	}
}

// TestLiveOutput: with Output set, a transient run's, a session's and a
// bash run's stdout and stderr come in chunks while the code runs, and
// put together they are the result's streams, nothing missing or twice.
func TestLiveOutput(t *testing.T) {
	e, _ := newExec(t, nil)
	code := "import sys, time\nfor i in range(6):\n    print('line', i, 'é', flush=True)\n    print('err', i, file=sys.stderr, flush=True)\n    time.sleep(0.3)\n"
	facts := []analyze.Import{{Module: "sys", Line: 1}, {Module: "time", Line: 1}}
	check := func(name string, res *Result, live *liveOutput, lines int) {
		t.Helper()
		wantStatus(t, res, "ok")
		if live.text["stdout"] != res.Stdout || live.text["stderr"] != res.Stderr || live.gaps != 0 {
			t.Errorf("%s: chunks give stdout %q stderr %q (gaps %d bytes), the result %q %q", name, live.text["stdout"], live.text["stderr"], live.gaps, res.Stdout, res.Stderr)
		}
		n := 0
		for _, c := range live.chunks {
			if c.Stream == "stdout" {
				n++
			}
		}
		// Lines 0.3 s apart and chunks at most every 50 ms: most lines
		// come in a chunk of their own (not asserted on time: counted).
		if n < lines/2 {
			t.Errorf("%s: %d stdout chunks for %d lines written 0.3 s apart: output did not come while the code ran", name, n, lines)
		}
		t.Logf("%s: %d chunks", name, len(live.chunks))
	}

	var live liveOutput
	res := transient(t, e, Request{Code: code, Imports: facts, Output: live.add(t)})
	check("transient", res, &live, 6)

	live = liveOutput{}
	res, id := persistent(t, e, "", Request{Owner: "a", Code: code, Imports: facts, Output: live.add(t)})
	check("persistent", res, &live, 6)
	_ = id

	live = liveOutput{}
	res = transient(t, e, Request{Language: "bash", Code: "for i in 1 2 3 4; do echo $i; echo e$i >&2; sleep 0.3; done",
		Capabilities: &Capabilities{Processes: true}, Output: live.add(t)})
	check("bash", res, &live, 4)

	// A flood: the chunks skip what the runner could not send in time,
	// the result keeps its head and tail as always.
	live = liveOutput{}
	t0 := time.Now()
	res = transient(t, e, Request{Code: "import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 65536)\n", Imports: []analyze.Import{{Module: "sys", Line: 1}}, Output: live.add(t)})
	wantStatus(t, res, "ok")
	if !res.StdoutTruncated || !strings.Contains(res.Stdout, "bytes dropped") {
		t.Errorf("flood: stdout not cut: %d bytes", len(res.Stdout))
	}
	sent := int64(0)
	for _, c := range live.chunks {
		sent += c.Bytes
	}
	t.Logf("flood of %d bytes: %d chunks carried %d bytes, %d skipped; the call took %s", res.StdoutBytes, len(live.chunks), sent, live.gaps, time.Since(t0))
}

// TestFakeLiveOutput: on the fake runtime, the output frames of a run
// reach Request.Output in order, each at its stream's offset, and the
// result holds the whole streams.
func TestFakeLiveOutput(t *testing.T) {
	e, _ := newFake(t, nil)
	var live liveOutput
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print a\nstderr b\nsleep 10\nprint c", Output: live.add(t)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "ok")
	want := []Output{{"stdout", 0, 2, "a\n"}, {"stderr", 0, 2, "b\n"}, {"stdout", 2, 2, "c\n"}}
	if diff := cmp.Diff(want, live.chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if res.Stdout != "a\nc\n" || res.Stderr != "b\n" {
		t.Errorf("result streams %q %q", res.Stdout, res.Stderr)
	}
	// A session's call too.
	live = liveOutput{}
	res, _, err = e.Persistent(tctx(t, time.Minute), "", Request{Owner: "a", Code: "print x", Output: live.add(t)})
	if err != nil || res.Status != "ok" || len(live.chunks) != 1 || live.text["stdout"] != "x\n" {
		t.Errorf("session: %v %+v, chunks %+v", err, res, live.chunks)
	}
}

// TestFakeLiveOutputInvalid: an output frame that overlaps the last one,
// names another stream, or comes unasked kills the sandbox as an invalid
// reply.
func TestFakeLiveOutputInvalid(t *testing.T) {
	e, fb := newFake(t, nil)
	for _, tc := range []struct {
		code   string
		asked  bool
		reason string
	}{
		{"print a\noutput stdout 1 x", true, "before the end of the last one"},
		{"output stdin 0 x", true, "unknown stream"},
		{"output stdout 0 x", false, "undecodable frame"},
	} {
		req := Request{Code: tc.code}
		if tc.asked {
			req.Output = func(Output) {}
		}
		res, err := e.Transient(tctx(t, time.Minute), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != "killed" || res.Error == nil || !strings.Contains(res.Error.Message, invalidReply) || !strings.Contains(res.Error.Message, tc.reason) {
			t.Errorf("%q: status %q error %+v; want killed, %q: …%s", tc.code, res.Status, res.Error, invalidReply, tc.reason)
		}
	}
	eventually(t, "the killed sandboxes are removed", func() bool { return fb.Live() == 0 })
}

// TestSharedSessionLiveOutput: on a backend whose sessions are shared
// between servers (as Kubernetes replicas share them), a call's output
// frames reach the replica that made the call, whichever it is: one
// attached after the session started too.
func TestSharedSessionLiveOutput(t *testing.T) {
	es, _ := newReplicas(t, 2, nil)
	ctx := tctx(t, time.Minute)
	var first liveOutput
	res, id, err := es[0].Persistent(ctx, "", Request{Owner: "alice", Code: "print zero", Output: first.add(t)})
	if err != nil || res.Status != "ok" || first.text["stdout"] != "zero\n" {
		t.Fatalf("start on replica 0: %v %+v, chunks %+v", err, res, first.chunks)
	}
	for i, e := range []*Executor{es[1], es[0], es[1]} {
		var live liveOutput
		want := fmt.Sprintf("call%d\n", i)
		res, _, err := e.Persistent(ctx, id, Request{Owner: "alice", Code: "print " + strings.TrimSpace(want), Output: live.add(t)})
		if err != nil || res.Status != "ok" || res.Stdout != want || live.text["stdout"] != want {
			t.Errorf("call %d: %v %+v, chunks %+v; want %q live and in the result", i, err, res, live.chunks, want)
		}
	}
}
