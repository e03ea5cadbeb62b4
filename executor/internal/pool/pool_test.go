package pool

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// tsb is a sandbox as the pools see it, for tests of their logic.
type tsb struct {
	id      string
	dead    bool
	modules []string
}

func (s *tsb) ID() string          { return s.id }
func (s *tsb) Alive() bool         { return !s.dead }
func (s *tsb) Dead() bool          { return s.dead }
func (s *tsb) Preloaded() []string { return s.modules }

func TestPickRoutesToTheCheapestFit(t *testing.T) {
	bare := pooled[*tsb]{}
	sciSB := pooled[*tsb]{modules: []string{"matplotlib.pyplot", "numpy", "pandas"}}
	np := pooled[*tsb]{modules: []string{"numpy"}}
	for _, tc := range []struct {
		name string
		idle []pooled[*tsb]
		need []string
		want int
	}{
		{"print(1) takes the bare one", []pooled[*tsb]{sciSB, bare}, nil, 1},
		{"print(1) takes what there is", []pooled[*tsb]{sciSB}, nil, 0},
		{"pandas takes the scientific one", []pooled[*tsb]{bare, sciSB}, []string{"pandas"}, 1},
		{"pyplot via its package", []pooled[*tsb]{bare, sciSB}, []string{"matplotlib"}, 1},
		{"numpy takes the smallest class with numpy", []pooled[*tsb]{sciSB, np, bare}, []string{"numpy"}, 1},
		{"the most coverage wins over a smaller class", []pooled[*tsb]{np, sciSB}, []string{"numpy", "pandas"}, 1},
		{"an unknown module: the cheapest", []pooled[*tsb]{sciSB, bare}, []string{"sympy"}, 1},
		{"oldest first among equals", []pooled[*tsb]{bare, bare}, nil, 0},
		{"empty", nil, nil, -1},
	} {
		if got := pick(tc.idle, tc.need, ""); got != tc.want {
			t.Errorf("%s: pick = %d, want %d", tc.name, got, tc.want)
		}
	}
	// A class learned from a principal's imports serves that principal only.
	alices := pooled[*tsb]{modules: []string{"sympy"}, owner: "alice"}
	for _, tc := range []struct {
		name  string
		idle  []pooled[*tsb]
		need  []string
		owner string
		want  int
	}{
		{"alice's class for alice", []pooled[*tsb]{bare, alices}, []string{"sympy"}, "alice", 1},
		{"not for bob, though he needs it", []pooled[*tsb]{bare, alices}, []string{"sympy"}, "bob", 0},
		{"not for bob when nothing else is left", []pooled[*tsb]{alices}, nil, "bob", -1},
		{"nor for a call without a principal", []pooled[*tsb]{alices}, nil, "", -1},
		{"shared classes for everyone", []pooled[*tsb]{alices, sciSB}, []string{"pandas"}, "bob", 1},
	} {
		if got := pick(tc.idle, tc.need, tc.owner); got != tc.want {
			t.Errorf("%s: pick = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// holdCold: the k-th waiting call holds its cold start only for a refill
// expected sooner than a cold start, and then by that refill's remaining
// time plus a quarter of a cold start.
func TestHoldCold(t *testing.T) {
	now := time.Now()
	p := &Pool[*tsb]{took: map[string]time.Duration{}, inflight: map[*refill]bool{}}
	p.inflight[&refill{class: "", began: now.Add(-300 * time.Millisecond)}] = true
	p.inflight[&refill{class: "numpy", began: now.Add(-100 * time.Millisecond)}] = true
	if got := p.holdCold(0, now, ""); got != 0 {
		t.Errorf("nothing measured: hold %s, want 0", got)
	}
	p.took[""] = 400 * time.Millisecond
	if got := p.holdCold(1, now, ""); got != 0 {
		t.Errorf("waiter 1: the second refill's class is not measured: hold %s, want 0", got)
	}
	p.took["numpy"] = 2 * time.Second
	// No cold start measured: a bare refill's time stands in (400 ms).
	if got, want := p.holdCold(0, now, ""), 100*time.Millisecond+100*time.Millisecond; got != want {
		t.Errorf("waiter 0: hold %s, want %s (the bare refill's 100 ms left + 400/4 ms)", got, want)
	}
	p.took[coldClass] = 200 * time.Millisecond
	if got, want := p.holdCold(0, now, ""), 100*time.Millisecond+50*time.Millisecond; got != want {
		t.Errorf("waiter 0: hold %s, want %s", got, want)
	}
	if got := p.holdCold(1, now, ""); got != 0 {
		t.Errorf("waiter 1: the numpy refill has 1.9 s left, a cold start takes 200 ms: hold %s, want 0", got)
	}
	if got := p.holdCold(2, now, ""); got != 0 {
		t.Errorf("waiter 2: no third refill under way: hold %s, want 0", got)
	}
	p.took[coldClass] = 90 * time.Millisecond
	if got := p.holdCold(0, now, ""); got != 0 {
		t.Errorf("a cold start (90 ms) beats the refill (100 ms left): hold %s, want 0", got)
	}
}

// A sandbox preloaded from a principal's imports goes only to that
// principal's waiting calls; others wait for their own.
func TestPoolDeliversToItsOwner(t *testing.T) {
	p := &Pool[*tsb]{maxSize: 4}
	bob := &waiter[*tsb]{ch: make(chan started[*tsb], 1), done: make(chan struct{}), owner: "bob"}
	alice := &waiter[*tsb]{ch: make(chan started[*tsb], 1), done: make(chan struct{}), owner: "alice"}
	p.waiters = []*waiter[*tsb]{bob, alice}
	sb := &tsb{}
	p.deliver(pooled[*tsb]{sb: sb, modules: []string{"sympy"}, owner: "alice"})
	select {
	case r := <-alice.ch:
		if r.it.sb != sb {
			t.Error("alice got another sandbox")
		}
	default:
		t.Fatal("alice's sandbox was not handed to her waiting call")
	}
	if len(p.waiters) != 1 || p.waiters[0] != bob || len(bob.ch) != 0 {
		t.Errorf("bob's call was served alice's sandbox, or left the waiters")
	}
	shared := &tsb{}
	p.deliver(pooled[*tsb]{sb: shared})
	if r := <-bob.ch; r.it.sb != shared {
		t.Error("bob did not get the shared sandbox")
	}
}

// blockingHost's Create waits for its context to end, as a start waits on
// a full cluster for room that does not come.
type blockingHost struct {
	Host[*tsb] // nothing else is called
	ended      chan error
}

func (h blockingHost) Create(ctx context.Context, _ string, _ func() *protocol.Preload) (*tsb, []string, error) {
	<-ctx.Done()
	h.ended <- ctx.Err()
	return nil, nil, ctx.Err()
}

// A refill waiting for room is given up when the pool stops, so closing
// the server does not wait for it (and leave its sandbox behind) until the
// start timeout.
func TestRefillGivenUpWhenThePoolStops(t *testing.T) {
	h := blockingHost{ended: make(chan error, 1)}
	p := &Pool[*tsb]{h: h, startup: time.Hour, kind: "transient"}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { _, err := p.create(nil, stop); done <- err }()
	select {
	case err := <-h.ended:
		t.Fatalf("the creation ended before the pool stopped: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(stop)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("create after the pool stopped: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("create still waits 10 s after the pool stopped")
	}
}

// A kept sandbox near its end asks for its successor: the pool's plan
// then holds one sandbox of its class (within maxSize, other classes
// lowered), until a call of its principal takes one or the wish lapses.
// Asked too early (more life left than two creations of the class) or of
// a pool that cannot make it, nothing changes.
func TestExpectSuccessor(t *testing.T) {
	p := &Pool[*tsb]{learn: true, limits: "L", size: 1, maxSize: 2, took: map[string]time.Duration{"numpy": time.Second},
		unloadable: map[string]bool{}, kick: make(chan struct{}, 1), demand: poolplan.Demand{Floor: 1, Max: 2}}
	now := time.Now()
	p.demand.Record(now, "")
	p.demand.Record(now, "")
	plan := func() map[string]int { return p.plan(time.Now()) } // drops the lapsed wishes
	wishes := func() int {
		n := 0
		for _, es := range p.expected {
			n += len(es)
		}
		return n
	}
	if got := plan(); !maps.Equal(got, map[string]int{"": 2}) {
		t.Fatalf("plan before = %v", got)
	}
	alice := poolplan.Owned("alice", "numpy")
	for _, tc := range []struct {
		name   string
		limits string
		left   time.Duration
		asked  bool
		want   map[string]int
	}{
		{"too early", "L", 3 * time.Second, false, map[string]int{"": 2}},
		{"other limits", "M", 0, false, map[string]int{"": 2}},
		{"in time", "L", 2 * time.Second, true, map[string]int{"": 1, alice: 1}},
		{"a second one", "L", 0, true, map[string]int{alice: 2}},
	} {
		if got := p.Expect(tc.limits, []string{"numpy"}, "alice", tc.left); got != tc.asked {
			t.Errorf("%s: Expect = %v, want %v", tc.name, got, tc.asked)
		}
		if got := plan(); !maps.Equal(got, tc.want) {
			t.Errorf("%s: plan = %v, want %v", tc.name, got, tc.want)
		}
	}
	if wishes() != 2 {
		t.Errorf("%d successors wished for, want 2", wishes())
	}
	it := pooled[*tsb]{modules: []string{"numpy"}, owner: "alice"}
	p.taken(it, "bob") // not the principal that asked
	if wishes() != 2 {
		t.Errorf("after bob took one: %d successors wished for, want 2", wishes())
	}
	p.taken(it, "alice")
	if got := plan(); !maps.Equal(got, map[string]int{"": 1, alice: 1}) {
		t.Errorf("after alice took one: plan = %v", got)
	}
	p.expected[alice][0].until = time.Now().Add(-time.Second) // lapsed
	if got := plan(); !maps.Equal(got, map[string]int{"": 2}) || wishes() != 0 {
		t.Errorf("after the wish lapsed: plan = %v, %d successors wished for", got, wishes())
	}
	var none *Pool[*tsb]
	if none.Expect("L", nil, "alice", 0) {
		t.Error("a nil pool took a wish")
	}
}

// A successor handed straight to a waiting call of its principal (a
// refill that lands while the call waits) ends the wish, as one taken
// from the idle list does: the pool makes no second one.
func TestSuccessorDeliveredToAWaiter(t *testing.T) {
	alice := poolplan.Owned("alice", "numpy")
	p := &Pool[*tsb]{maxSize: 2, expected: map[string][]expectation{alice: {{owner: "alice", until: time.Now().Add(time.Minute)}}}}
	w := &waiter[*tsb]{ch: make(chan started[*tsb], 1), done: make(chan struct{}), owner: "alice"}
	p.waiters = []*waiter[*tsb]{w}
	p.deliver(pooled[*tsb]{sb: &tsb{id: "s"}, modules: []string{"numpy"}, owner: "alice"})
	if got := <-w.ch; got.it.sb.id != "s" {
		t.Fatalf("the waiter got %+v", got)
	}
	if len(p.expected[alice]) != 0 {
		t.Errorf("wishes left after the delivery: %v", p.expected)
	}
}

// expect keeps the pool within maxSize by lowering targets, but never a
// class below its successors: a class's target beyond them (the bare
// class's demand next to one bare successor) is lowered like any other.
func TestExpectLowersBeyondTheSuccessors(t *testing.T) {
	alice := poolplan.Owned("alice", "numpy")
	soon := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name       string
		expected   map[string][]expectation
		plan, want map[string]int
	}{
		{"a bare successor and demand for two bare",
			map[string][]expectation{"": {{owner: "alice", until: soon}}, alice: {{owner: "alice", until: soon}}},
			map[string]int{"": 2}, map[string]int{"": 1, alice: 1}},
		{"successors alone past max_size",
			map[string][]expectation{"": {{owner: "bob", until: soon}}, alice: {{owner: "alice", until: soon}}, poolplan.Owned("carol", "pandas"): {{owner: "carol", until: soon}}},
			map[string]int{"": 3}, map[string]int{"": 1, alice: 1, poolplan.Owned("carol", "pandas"): 1}},
		{"no successor",
			nil, map[string]int{"": 2, alice: 1}, map[string]int{"": 1, alice: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pool[*tsb]{maxSize: 2, expected: tc.expected}
			p.expect(tc.plan, time.Now())
			if !maps.Equal(tc.plan, tc.want) {
				t.Errorf("plan %v, want %v", tc.plan, tc.want)
			}
		})
	}
}
