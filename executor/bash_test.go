package executor

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBash runs bash code as `bash -c` in the worker: same pipes, working
// directory, exit status as the outcome, and a time limit that stops it.
func TestBash(t *testing.T) {
	e, _ := newExec(t, nil)
	procs := &Capabilities{Processes: true}
	res := transient(t, e, Request{Language: "bash", Code: "echo hi; echo warn >&2; pwd; echo x > f.txt", Capabilities: procs})
	wantStatus(t, res, "ok")
	if res.Stdout != "hi\n/workspace\n" || res.Stderr != "warn\n" || len(res.Files) != 1 {
		t.Errorf("stdout %q stderr %q files %v", res.Stdout, res.Stderr, res.Files)
	}
	res = transient(t, e, Request{Language: "bash", Code: "yes | head -1", Capabilities: procs})
	if wantStatus(t, res, "ok"); res.Stdout != "y\n" || res.Stderr != "" {
		t.Errorf("a pipe closed early: stdout %q stderr %q; want y and no broken-pipe error", res.Stdout, res.Stderr)
	}
	res = transient(t, e, Request{Language: "bash", Code: "echo before; exit 3", Capabilities: procs})
	wantStatus(t, res, "error")
	if res.Stdout != "before\n" || res.Error == nil || res.Error.Message != "bash ended with exit status 3" {
		t.Errorf("exit 3: stdout %q error %+v", res.Stdout, res.Error)
	}
	res = transient(t, e, Request{Language: "bash", Code: "sleep 60", Capabilities: procs, Limits: Limits{Timeout: time.Second}})
	wantStatus(t, res, "timeout")

	sess, id, err := e.Persistent(tctx(t, 2*time.Minute), "", Request{Owner: "a", Code: "x = 41", Capabilities: procs})
	if err != nil || sess.Status != "ok" {
		t.Fatalf("session: %v %+v", err, sess)
	}
	res, _, err = e.Persistent(tctx(t, 2*time.Minute), id, Request{Owner: "a", Language: "bash", Code: "echo data > d.txt; cat d.txt", Capabilities: procs})
	if err != nil || res.Status != "ok" || res.Stdout != "data\n" {
		t.Fatalf("bash in a session: %v %+v", err, res)
	}
	res, _, err = e.Persistent(tctx(t, 2*time.Minute), id, Request{Owner: "a", Code: "open('d.txt').read().strip() + str(x + 1)", Capabilities: procs})
	if err != nil || res.Result == nil || *res.Result != "'data42'" {
		t.Fatalf("python after bash in the session: %v %+v", err, res)
	}

	_, err = e.Transient(tctx(t, time.Minute), Request{Language: "bash", Code: "echo", Capabilities: &Capabilities{}})
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "processes") {
		t.Errorf("bash without processes: %v, want ErrInvalidRequest naming processes", err)
	}
}
