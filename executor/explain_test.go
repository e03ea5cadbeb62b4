package executor

import (
	"strings"
	"testing"
)

// An oom result names the memory limit as its cause, and so does a worker
// ended by a SIGKILL the runner did not send, as the likely one (an OOM
// kill the runtime did not count, as under gVisor on Kubernetes); the
// runner's own kills and other ends are left as they are.
func TestExplainOOM(t *testing.T) {
	ended := "the process running the code ended without a result "
	for _, tc := range []struct {
		name, status, msg string
		memory            int64
		want              string // "" = unchanged
	}{
		{"SIGKILL", "killed", ended + "(signal 9)", 256 << 20, "likely ran out of memory: the sandbox's memory limit is 256 MiB (docker.memory_limit"},
		{"SIGKILL, no limit", "killed", ended + "(signal 9)", 0, "the sandbox has no memory limit of its own (docker.memory_limit is 0), so the host's memory ran out"},
		{"another signal", "killed", ended + "(signal 11)", 256 << 20, ""},
		{"an exit", "killed", ended + "(exit code 1)", 256 << 20, ""},
		{"the runner's kill of a cancelled run", "killed", "the run was cancelled and did not stop within 1s; its interpreter was killed", 256 << 20, ""},
		{"a timeout", "timeout", "execution exceeded the time limit", 256 << 20, ""},
	} {
		res := &Result{Status: tc.status, Error: &RunError{Type: "SandboxKilled", Message: tc.msg}}
		explainOOM(res, tc.memory)
		switch {
		case tc.want == "" && res.Error.Message != tc.msg:
			t.Errorf("%s: message changed to %q", tc.name, res.Error.Message)
		case tc.want != "" && (!strings.HasPrefix(res.Error.Message, tc.msg) || !strings.Contains(res.Error.Message, tc.want)):
			t.Errorf("%s: message %q, want the runner's words first, then %q", tc.name, res.Error.Message, tc.want)
		}
	}
	explainOOM(&Result{Status: "killed"}, 1) // no error: nothing to explain, no panic
	oom := &Result{Status: "oom", Error: &RunError{Type: "OutOfMemory", Message: "the runner's words"}}
	explainOOM(oom, 256<<20)
	if want := "the code ran out of memory: the sandbox's memory limit is 256 MiB (docker.memory_limit in the server's config; only an operator can raise it, e.g. docker.memory_limit: 1g). Use less memory: work in chunks, free large objects, or use smaller dtypes (the runner's words)"; oom.Error.Message != want {
		t.Errorf("oom: %q, want %q", oom.Error.Message, want)
	}
	bare := &Result{Status: "oom"}
	explainOOM(bare, 0)
	if want := "the code ran out of memory: the sandbox has no memory limit of its own (docker.memory_limit is 0), so the host's memory ran out"; bare.Error == nil || bare.Error.Message != want || bare.Error.Type != "OutOfMemory" {
		t.Errorf("oom without a limit: %+v, want %q", bare.Error, want)
	}
}
