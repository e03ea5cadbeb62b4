package poolplan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

const sci = "numpy,pandas"

// arrive records n calls of class, gap apart, starting at t; it returns the
// time of the last.
func arrive(d *Demand, t time.Time, n int, gap time.Duration, class string) time.Time {
	for i := range n {
		if i > 0 {
			t = t.Add(gap)
		}
		d.Record(t, class)
	}
	return t
}

func TestPlanBeforeAnyCall(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		floor int
		seed  string
		want  map[string]int
	}{
		{2, sci, map[string]int{"": 1, sci: 1}},
		{3, sci, map[string]int{"": 2, sci: 1}},
		{1, sci, map[string]int{"": 1}}, // one sandbox: the cheapest class
		{2, "", map[string]int{"": 2}},
		{0, sci, map[string]int{}},
	} {
		d := &Demand{Floor: tc.floor, Max: 8, Seed: tc.seed}
		if diff := cmp.Diff(tc.want, d.Plan(now)); diff != "" {
			t.Errorf("floor %d seed %q: plan (-want +got):\n%s", tc.floor, tc.seed, diff)
		}
	}
}

func TestPlanGrowsWithBurstsAndDecays(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	d := &Demand{Floor: 2, Max: 8}
	d.Created(time.Second)
	last := arrive(d, t0, 6, 10*time.Millisecond, "") // a burst of 6
	if got := d.Plan(last)[""]; got != 6 {
		t.Errorf("after a burst of 6: %d bare sandboxes planned, want 6", got)
	}
	last = arrive(d, last.Add(30*time.Second), 16, time.Millisecond, "") // a burst of 16
	if got := d.Plan(last)[""]; got != 8 {
		t.Errorf("after a burst of 16: %d planned, want the cap 8", got)
	}
	// Spaced calls (one per 2 s, creation 1 s) need no more than the floor,
	// once the bursts are older than the window.
	late := last.Add(demandWindow + time.Second)
	last = arrive(d, late, 10, 2*time.Second, "")
	if got := d.Plan(last)[""]; got != 2 {
		t.Errorf("spaced calls after the window: %d planned, want the floor 2", got)
	}
	// Calls back to back at 4/s with 1 s creations: 4 in flight.
	last = arrive(d, last.Add(time.Second), 20, 250*time.Millisecond, "")
	if got := d.Plan(last)[""]; got != 4 {
		t.Errorf("4 calls/s, 1 s creations: %d planned, want 4", got)
	}
	// A slower machine needs more for the same rate.
	d.create = 2 * time.Second
	if got := d.Plan(last)[""]; got != 8 {
		t.Errorf("4 calls/s, 2 s creations: %d planned, want 8", got)
	}
	if got := d.Plan(last.Add(demandWindow + time.Second)); !cmp.Equal(got, map[string]int{"": 2}) {
		t.Errorf("idle past the window: plan %v, want the floor of bare sandboxes", got)
	}
}

func TestPlanSharesClassesByRecentCalls(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	d := &Demand{Floor: 4, Max: 8, Seed: sci}
	d.Created(time.Second)
	// Spaced calls, 3 bare for 1 scientific: the floor of 4 splits 3:1.
	last := t0
	for range 4 {
		last = arrive(d, last.Add(3*time.Second), 3, 3*time.Second, "")
		last = arrive(d, last.Add(3*time.Second), 1, 0, sci)
	}
	if diff := cmp.Diff(map[string]int{"": 3, sci: 1}, d.Plan(last)); diff != "" {
		t.Errorf("3:1 Demand (-want +got):\n%s", diff)
	}
	// Only scientific calls lately: the bare class is dropped.
	last = arrive(d, last.Add(3*time.Second), shareOf, 3*time.Second, sci)
	if diff := cmp.Diff(map[string]int{sci: 4}, d.Plan(last)); diff != "" {
		t.Errorf("scientific only (-want +got):\n%s", diff)
	}
}

func TestNextClass(t *testing.T) {
	plan := map[string]int{"": 3, sci: 2}
	for _, tc := range []struct {
		name           string
		idle, creating map[string]int
		want           string
		ok             bool
	}{
		{"empty: the class furthest below", nil, nil, "", true},
		{"bare full", map[string]int{"": 3}, nil, sci, true},
		{"tie goes to the cheaper class", map[string]int{"": 1}, nil, "", true},
		{"tie, other way round", map[string]int{"": 2}, map[string]int{sci: 1}, "", true},
		{"counting creations", map[string]int{"": 2}, map[string]int{"": 1, sci: 1}, sci, true},
		{"all there", map[string]int{"": 3, sci: 2}, nil, "", false},
		{"surplus elsewhere does not count", map[string]int{"": 9}, map[string]int{sci: 2}, "", false},
	} {
		got, ok := Next(plan, tc.idle, tc.creating, nil)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Next = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// Under pressure the pool fills up with the cheapest class the latest
// calls needed.
func TestNextClassUnderPressure(t *testing.T) {
	for _, tc := range []struct {
		name           string
		plan           map[string]int
		idle, creating map[string]int
		urgent         []string
		want           string
		ok             bool
	}{
		{"bare although scientific is further below", map[string]int{"": 2, sci: 6}, map[string]int{"": 2}, nil, []string{sci, ""}, "", true},
		{"scientific calls lately: scientific", map[string]int{"": 4, sci: 4}, nil, nil, []string{sci}, sci, true},
		{"the smallest class of the latest calls", map[string]int{sci: 2, "numpy": 2}, nil, nil, []string{sci, "numpy"}, "numpy", true},
		{"full by count, whatever the classes", map[string]int{"": 2, sci: 2}, map[string]int{"": 3}, map[string]int{"": 1}, []string{sci}, "", false},
		{"nothing planned", map[string]int{}, nil, nil, []string{""}, "", false},
	} {
		got, ok := Next(tc.plan, tc.idle, tc.creating, tc.urgent)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Next = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLatestClasses(t *testing.T) {
	d := &Demand{}
	t0 := time.Unix(1_000_000, 0)
	arrive(d, t0, 5, time.Second, sci)
	arrive(d, t0.Add(time.Minute), 2, time.Second, "")
	if diff := cmp.Diff([]string{sci, ""}, d.Latest(4)); diff != "" {
		t.Errorf("latest(4) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{""}, d.Latest(2)); diff != "" {
		t.Errorf("latest(2) (-want +got):\n%s", diff)
	}
}

func TestPreloadable(t *testing.T) {
	imps := []analyze.Import{
		{Module: "os"}, {Module: "json"},
		{Module: "pandas", Alias: "pd"},
		{Module: "matplotlib", From: true, Names: []analyze.Alias{{Name: "pyplot", AsName: "plt"}}},
		{Module: "numpy.linalg"},
		{Module: "", Level: 1, From: true, Names: []analyze.Alias{{Name: "x"}}},
		{Module: "scipy", From: true, Names: []analyze.Alias{{Name: "*"}}},
		{Module: "pandas"},
	}
	want := []string{"matplotlib", "matplotlib.pyplot", "numpy.linalg", "pandas", "scipy"}
	if diff := cmp.Diff(want, Preloadable(imps)); diff != "" {
		t.Errorf("Preloadable (-want +got):\n%s", diff)
	}
	if got := Preloadable([]analyze.Import{{Module: "sys"}}); got != nil {
		t.Errorf("standard library only: %v, want nothing", got)
	}
}

func TestClassKey(t *testing.T) {
	if got := Key([]string{"pandas", "numpy", "pandas"}); got != "numpy,pandas" {
		t.Errorf("Key = %q", got)
	}
	if got := Modules(Key(nil)); got != nil {
		t.Errorf("bare class has modules %v", got)
	}
	c := Owned("alice", "numpy,sympy")
	if got := Modules(c); !slices.Equal(got, []string{"numpy", "sympy"}) || Owner(c) != "alice" || Unowned(c) != "numpy,sympy" {
		t.Errorf("owned class %q: modules %v, owner %q, Unowned %q", c, got, Owner(c), Unowned(c))
	}
	for _, shared := range []string{Owned("", "sympy"), Owned("alice", "")} {
		if Owner(shared) != "" || strings.ContainsRune(shared, 0) {
			t.Errorf("class %q has an owner, want it shared", shared)
		}
	}
}
