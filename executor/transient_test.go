package executor

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// imports builds the gate's facts for plain `import m` statements, given as
// module, line pairs.
func imports(pairs ...any) []analyze.Import {
	var out []analyze.Import
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, analyze.Import{Module: pairs[i].(string), Line: pairs[i+1].(int)})
	}
	return out
}

// gated returns the static gate's import facts for code, as the tool
// layer sends them.
func gated(t *testing.T, code string) []analyze.Import {
	t.Helper()
	f, err := analyze.Source([]byte(code), analyze.Options{})
	if err != nil {
		t.Fatalf("analyze %.60q: %v", code, err)
	}
	return f.Imports
}

func transient(t *testing.T, e *Executor, req Request) *Result {
	t.Helper()
	res, err := e.Transient(tctx(t, 2*time.Minute), req)
	if err != nil {
		t.Fatalf("Transient(%.80q): %v", req.Code, err)
	}
	return res
}

func wantStatus(t *testing.T, res *Result, status string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status = %q, want %q; error %+v; stdout %.300q; stderr %.500q", res.Status, status, res.Error, res.Stdout, res.Stderr)
	}
}

func TestTransientPrint(t *testing.T) {
	e, cli := newExec(t, nil)
	var progress []string
	res := transient(t, e, Request{Code: "print(1)", Progress: func(m string) { progress = append(progress, m) }})
	wantStatus(t, res, "ok")
	if diff := cmp.Diff([]string{"starting a sandbox", "running"}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if res.Stdout != "1\n" || res.Result != nil {
		t.Errorf("stdout %q result %v, want \"1\\n\" and no result", res.Stdout, res.Result)
	}
	if n := dockertest.Settled(t, cli, backend.LabelKind+"="+backend.KindTransient); n != 0 {
		t.Errorf("%d transient containers after the call, want 0", n)
	}
}

func TestTransientState(t *testing.T) {
	e, _ := newExec(t, nil)
	res := transient(t, e, Request{Code: "x + 1", State: json.RawMessage(`{"x": 41}`)})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "42" {
		t.Errorf("result = %v, want 42", res.Result)
	}
	var state map[string]any
	if err := json.Unmarshal(res.State, &state); err != nil {
		t.Fatalf("state %s: %v", res.State, err)
	}
	if diff := cmp.Diff(map[string]any{"x": 41.0}, state); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestTransientDroppedState(t *testing.T) {
	e, _ := newExec(t, nil)
	code := "import numpy as np\ndef f():\n    return 1\na = np.arange(3)\nn = 5\nt = (1, 2)\n_hidden = 3\n"
	imports := []analyze.Import{{Module: "numpy", Alias: "np", Line: 1}}
	res := transient(t, e, Request{Code: code, Imports: imports, StateKeys: []string{"*"}})
	wantStatus(t, res, "ok")
	want := []Dropped{{Name: "f", Type: "function"}, {Name: "a", Type: "numpy.ndarray"}, {Name: "t", Type: "tuple"}}
	if diff := cmp.Diff(want, res.DroppedState); diff != "" {
		t.Errorf("dropped_state (-want +got):\n%s", diff)
	}
	if string(res.State) != `{"n": 5}` {
		t.Errorf("state = %s, want {\"n\": 5}", res.State)
	}
	// Asked for nothing: no state, and the globals it could ask for
	// named (JSON types only).
	res = transient(t, e, Request{Code: code, Imports: imports})
	wantStatus(t, res, "ok")
	if string(res.State) != `{}` || len(res.DroppedState) != 0 || !slices.Equal(res.Unreturned, []string{"n"}) {
		t.Errorf("no state asked: state %s, dropped %v, unreturned %v; want {}, none, [n]", res.State, res.DroppedState, res.Unreturned)
	}
	// The keys sent and the names asked for come back; a name not
	// defined is named.
	res = transient(t, e, Request{Code: code + "del x\n", Imports: imports, State: json.RawMessage(`{"x": 1, "y": 2}`), StateKeys: []string{"n", "f", "zz"}})
	wantStatus(t, res, "ok")
	if string(res.State) != `{"y": 2, "n": 5}` || !slices.Equal(res.MissingState, []string{"x", "zz"}) || len(res.DroppedState) != 1 || res.DroppedState[0].Name != "f" {
		t.Errorf("keys sent and asked: state %s, missing %v, dropped %v; want {y, n}, [x zz], [f]", res.State, res.MissingState, res.DroppedState)
	}
}

func TestTransientStateTooLarge(t *testing.T) {
	e, cli := newExec(t, nil)
	big := `{"x": "` + strings.Repeat("a", 10<<20) + `"}`
	_, err := e.Transient(tctx(t, time.Minute), Request{Code: "x", State: json.RawMessage(big)})
	if !errors.Is(err, ErrLimitExceeded) || !strings.Contains(err.Error(), "limits.max_state_bytes") {
		t.Errorf("10 MB state in: error = %v, want ErrLimitExceeded naming limits.max_state_bytes", err)
	}
	_, err = e.Transient(tctx(t, time.Minute), Request{Code: "x", State: json.RawMessage(`[1, 2]`)})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("array state: error = %v, want ErrInvalidRequest", err)
	}
	// A state that does not fit leaves out its largest globals, named
	// with their sizes; the run keeps its status, output and result.
	res := transient(t, e, Request{Code: "s = 'x' * (10 << 20)\nn = 1\nprint('ran')\n2", StateKeys: []string{"*"}})
	wantStatus(t, res, "ok")
	want := []StateSize{{Name: "s", Bytes: 10<<20 + 2}}
	if diff := cmp.Diff(want, res.StateTooLarge); diff != "" || string(res.State) != `{"n": 1}` || res.Stdout != "ran\n" || res.Result == nil || *res.Result != "2" {
		t.Errorf("10 MB state out: state %.50s stdout %q result %v, too large (-want +got):\n%s", res.State, res.Stdout, res.Result, diff)
	}
	if n := dockertest.Settled(t, cli, ""); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

func TestTransientResultAndError(t *testing.T) {
	e, _ := newExec(t, nil)
	res := transient(t, e, Request{Code: "def f(x):\n    return 1 / x\n\nprint('before')\nf(0)\n"})
	wantStatus(t, res, "error")
	if res.Stdout != "before\n" || res.Error == nil || res.Error.Type != "ZeroDivisionError" || res.Error.Line != 2 {
		t.Fatalf("got stdout %q error %+v, want ZeroDivisionError at line 2 (the innermost line of the submitted code)", res.Stdout, res.Error)
	}
	tb := res.Error.Traceback
	if !strings.Contains(tb, `line 2, in f`) || !strings.Contains(tb, "return 1 / x") || strings.Contains(tb, "_run") {
		t.Errorf("traceback should show user frames with source and no runner frames:\n%s", tb)
	}
	// Code the gate let through but CPython cannot parse: nothing runs.
	res = transient(t, e, Request{Code: "print('ran')\nf(x for x in y, 1)\n"})
	wantStatus(t, res, "syntax_error")
	if res.Stdout != "" || res.Error == nil || res.Error.Type != "SyntaxError" || res.Error.Message != "Generator expression must be parenthesized" ||
		res.Error.Line != 2 || res.Error.Col != 3 || !strings.Contains(res.Error.Traceback, "    f(x for x in y, 1)\n      ^^^^^^^^^^^^") {
		t.Errorf("syntax error: stdout %q, %+v", res.Stdout, res.Error)
	}
	res = transient(t, e, Request{Code: "import sys\nsys.stderr.write('warn\\n')\n[1, 'a']", Imports: imports("sys", 1)})
	wantStatus(t, res, "ok")
	if res.Stderr != "warn\n" || res.Result == nil || *res.Result != "[1, 'a']" {
		t.Errorf("stderr %q result %v", res.Stderr, res.Result)
	}
}

func TestTransientCapturesChildAndRawOutput(t *testing.T) {
	e, _ := newExec(t, nil)
	code := "import os, subprocess\nos.write(1, b'raw\\n')\nsubprocess.run(['echo', 'child'])\nos.system('echo err >&2')\n"
	res := transient(t, e, Request{Code: code, Imports: imports("os", 1, "subprocess", 1)})
	wantStatus(t, res, "ok")
	if res.Stdout != "raw\nchild\n" || res.Stderr != "err\n" {
		t.Errorf("stdout %q stderr %q, want fd-level capture of raw writes and child processes", res.Stdout, res.Stderr)
	}
}

func TestTransientFiguresAndFiles(t *testing.T) {
	e, _ := newExec(t, nil)
	code := `import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
fig = plt.figure(figsize=(2, 1), dpi=100)
plt.plot([3, 2])
open("out.txt", "w").write("hi")
`
	res := transient(t, e, Request{Code: code, Imports: []analyze.Import{{Module: "matplotlib.pyplot", Alias: "plt", Line: 1}}})
	wantStatus(t, res, "ok")
	if len(res.Images) != 2 {
		t.Fatalf("%d images, want 2 (stderr %q)", len(res.Images), res.Stderr)
	}
	for i, im := range res.Images {
		if !strings.HasPrefix(string(im.PNG), "\x89PNG\r\n") {
			t.Errorf("image %d is not a PNG", i)
		}
	}
	if im := res.Images[1]; im.Width != 200 || im.Height != 100 {
		t.Errorf("second figure %dx%d, want 200x100", im.Width, im.Height)
	}
	if res.Stderr != "" {
		t.Errorf("plt.show() should neither block nor warn; stderr %q", res.Stderr)
	}
	if diff := cmp.Diff([]string{"out.txt"}, res.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// Without a pool, the executor's first sandbox is asked for the runner's
// compiled code and the sandboxes after it load it.
func TestColdSandboxesLoadRunnerCode(t *testing.T) {
	e, _ := newExec(t, nil)
	for i := range 3 {
		res := transient(t, e, Request{Code: "print(" + strconv.Itoa(i) + ")"})
		wantStatus(t, res, "ok")
		if res.Stdout != strconv.Itoa(i)+"\n" {
			t.Errorf("call %d: stdout %q", i, res.Stdout)
		}
	}
	if st := e.Stats(); st.RunnersCompiled != 1 || st.RunnersLoaded != 2 {
		t.Errorf("runners compiled %d, loaded %d; want 1 (the first sandbox, asked for its code) and 2", st.RunnersCompiled, st.RunnersLoaded)
	}
}
