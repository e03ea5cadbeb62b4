package executor

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// TestWireImportsGolden: the gate's facts of the golden run frame's code,
// as the executor puts them on the wire, are the frame's imports, which
// the runner's tests check against CPython's parse of the same code.
func TestWireImportsGolden(t *testing.T) {
	data, err := os.ReadFile("protocol/testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden protocol.Run
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	facts, err := analyze.Source([]byte(golden.Code), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := wireImports(facts.Imports)
	// The runner compares the lists sorted; the gate's order is its own.
	byLine := func(a, b protocol.Import) bool { return a.Line < b.Line }
	if diff := cmp.Diff(golden.Imports, got, cmpopts.SortSlices(byLine)); diff != "" {
		t.Errorf("wire imports (-golden +gate):\n%s", diff)
	}
	if wireImports(nil) == nil {
		t.Error("wireImports(nil) is nil: the frame would carry imports null, not []")
	}
}

// TestWireGuard: the guard on the wire keeps every capability and rule.
func TestWireGuard(t *testing.T) {
	c := &Capabilities{Processes: true, Sockets: []string{"inet"}, PTY: true, NativeCode: true}
	want := &protocol.Capabilities{Processes: true, Sockets: []string{"inet"}, PTY: true, NativeCode: true}
	if diff := cmp.Diff(want, wireCapabilities(c)); diff != "" {
		t.Error(diff)
	}
	if wireCapabilities(nil) != nil {
		t.Error("nil capabilities must stay nil (only the always-denied calls are filtered)")
	}
	m := ModuleRules{Allowed: []string{"json"}, Blocked: []string{}, Calls: []CallGuard{{Name: "eval", Entry: "eval", Event: "builtins.eval", Direct: true}}}
	wm := protocol.ModuleRules{Allowed: []string{"json"}, Blocked: []string{}, Calls: []protocol.CallGuard{{Name: "eval", Entry: "eval", Event: "builtins.eval", Direct: true}}}
	if diff := cmp.Diff(wm, wireModules(m)); diff != "" {
		t.Error(diff)
	}
	// The executor's types and the wire's marshal alike.
	for _, pair := range [][2]any{{c, want}, {m, wm}} {
		a, _ := json.Marshal(pair[0])
		b, _ := json.Marshal(pair[1])
		if string(a) != string(b) {
			t.Errorf("%s on the wire is %s", a, b)
		}
	}
}
