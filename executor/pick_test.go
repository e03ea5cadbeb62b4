package executor

import "testing"

func TestPickRoutesToTheCheapestFit(t *testing.T) {
	bare := pooled{}
	sciSB := pooled{modules: []string{"matplotlib.pyplot", "numpy", "pandas"}}
	np := pooled{modules: []string{"numpy"}}
	for _, tc := range []struct {
		name string
		idle []pooled
		need []string
		want int
	}{
		{"print(1) takes the bare one", []pooled{sciSB, bare}, nil, 1},
		{"print(1) takes what there is", []pooled{sciSB}, nil, 0},
		{"pandas takes the scientific one", []pooled{bare, sciSB}, []string{"pandas"}, 1},
		{"pyplot via its package", []pooled{bare, sciSB}, []string{"matplotlib"}, 1},
		{"numpy takes the smallest class with numpy", []pooled{sciSB, np, bare}, []string{"numpy"}, 1},
		{"the most coverage wins over a smaller class", []pooled{np, sciSB}, []string{"numpy", "pandas"}, 1},
		{"an unknown module: the cheapest", []pooled{sciSB, bare}, []string{"sympy"}, 1},
		{"oldest first among equals", []pooled{bare, bare}, nil, 0},
		{"empty", nil, nil, -1},
	} {
		if got := pick(tc.idle, tc.need, ""); got != tc.want {
			t.Errorf("%s: pick = %d, want %d", tc.name, got, tc.want)
		}
	}
	// A class learned from a principal's imports serves that principal only.
	alices := pooled{modules: []string{"sympy"}, owner: "alice"}
	for _, tc := range []struct {
		name  string
		idle  []pooled
		need  []string
		owner string
		want  int
	}{
		{"alice's class for alice", []pooled{bare, alices}, []string{"sympy"}, "alice", 1},
		{"not for bob, though he needs it", []pooled{bare, alices}, []string{"sympy"}, "bob", 0},
		{"not for bob when nothing else is left", []pooled{alices}, nil, "bob", -1},
		{"nor for a call without a principal", []pooled{alices}, nil, "", -1},
		{"shared classes for everyone", []pooled{alices, sciSB}, []string{"pandas"}, "bob", 1},
	} {
		if got := pick(tc.idle, tc.need, tc.owner); got != tc.want {
			t.Errorf("%s: pick = %d, want %d", tc.name, got, tc.want)
		}
	}
}
