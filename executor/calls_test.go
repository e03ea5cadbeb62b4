package executor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCallGuards(t *testing.T) {
	guards, gateOnly := CallGuards([]string{"builtins.open", "shutil.rmtree", "os.getcwd", "eval", "subprocess"})
	var got []string
	for _, g := range guards {
		got = append(got, g.Entry+" "+g.Name+" "+g.Event)
	}
	want := []string{
		"builtins.open open open",
		"shutil.rmtree shutil.rmtree shutil.rmtree",
		"eval eval builtins.eval",
		"subprocess subprocess.Popen subprocess.Popen",
		"subprocess subprocess.call subprocess.Popen",
		"subprocess subprocess.check_call subprocess.Popen",
		"subprocess subprocess.check_output subprocess.Popen",
		"subprocess subprocess.getoutput subprocess.Popen",
		"subprocess subprocess.getstatusoutput subprocess.Popen",
		"subprocess subprocess.run subprocess.Popen",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guards (-want +got):\n%s", diff)
	}
	wantGate := []string{"os.getcwd", "subprocess (other than subprocess.Popen, subprocess.call, subprocess.check_call, subprocess.check_output, subprocess.getoutput, subprocess.getstatusoutput, subprocess.run)"}
	if diff := cmp.Diff(wantGate, gateOnly); diff != "" {
		t.Errorf("gate-only (-want +got):\n%s", diff)
	}
}
