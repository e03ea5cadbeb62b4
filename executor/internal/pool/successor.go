package pool

import (
	"slices"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
)

// A kept sandbox (Reuse) serves its principal's calls until its calls or
// its age run out. The pool learns its classes from the calls it serves,
// and a principal's kept sandboxes serve their calls without it: when one
// retires, the pool may hold no sandbox with its modules, and its
// principal's next calls import them themselves (pandas: a second or so
// each) until a refill of that class is made. So a kept sandbox near the
// end of its life asks the pool for its successor (Expect): one sandbox of
// its modules, made as a refill is, in time for the call after its last.

// expectation is a successor one principal's kept sandbox asked for: one
// sandbox of a class, wanted until until.
type expectation struct {
	owner string
	until time.Time
}

// successorLead is how long before a kept sandbox's expected end its
// successor is asked for, in creations of its class (a creation may wait
// for a slot behind another, and the estimate is a moving average).
const successorLead = 2

// unmeasuredCreation is the creation time assumed for a class the pool
// has not made yet: a bare sandbox's, plus the import of a scientific
// stack.
const unmeasuredCreation = 3 * time.Second

// Expect asks the pool for the successor of a kept sandbox of owner's
// that preloaded modules, has the pool's limits (limits: its class, as
// for Fits) and is expected to serve for about left more: the pool then
// keeps one sandbox of that class (owner's, unless it is the bare or the
// pool.preload class) among its targets until a call of owner takes one,
// or until left and poolplan.TrimAfter have passed. It returns false, and
// asks for nothing, while left is longer than the lead a creation of that
// class needs (ask again after a later call), or when this pool cannot
// make it (nil, other limits, or the session pool).
func (p *Pool[S]) Expect(limits string, modules []string, owner string, left time.Duration) bool {
	if p == nil || !p.learn || !p.Fits(limits) {
		return false
	}
	p.mu.Lock()
	class := p.classOf(modules, owner)
	est, ok := p.took[poolplan.Unowned(class)]
	if !ok {
		est = unmeasuredCreation
	}
	if left > successorLead*est {
		p.mu.Unlock()
		return false
	}
	if p.expected == nil {
		p.expected = map[string][]expectation{}
	}
	p.expected[class] = append(p.expected[class], expectation{owner: owner, until: time.Now().Add(left + poolplan.TrimAfter)})
	p.mu.Unlock()
	p.Signal()
	return true
}

// expect raises plan to the successors asked for (Expect) and still
// wanted at now, forgetting those no longer wanted, and lowers the
// targets (the largest first) to keep the total within the pool's
// maxSize, but none below its class's successors: a successor replaces a
// kept sandbox whose principal's next call is known to come. A class's
// target beyond its successors (the bare class's demand, say) is lowered
// like any other's, else it would hold the places another class's
// successor needs. p.mu is held.
func (p *Pool[S]) expect(plan map[string]int, now time.Time) {
	for c, es := range p.expected {
		es = slices.DeleteFunc(es, func(e expectation) bool { return !now.Before(e.until) })
		if len(es) == 0 {
			delete(p.expected, c)
			continue
		}
		p.expected[c] = es
		plan[c] = max(plan[c], len(es))
	}
	total := 0
	for _, n := range plan {
		total += n
	}
	for total > p.maxSize {
		top, found := "", false
		for c, n := range plan {
			if n <= len(p.expected[c]) {
				continue // its successors only
			}
			if !found || n > plan[top] || (n == plan[top] && c < top) {
				top, found = c, true
			}
		}
		if !found {
			return // successors alone exceed it: room bounds what is made
		}
		if plan[top]--; plan[top] == 0 {
			delete(plan, top)
		}
		total--
	}
}

// successor says a refill of class makes a successor asked for. p.mu is
// held.
func (p *Pool[S]) successor(class string) bool { return len(p.expected[class]) > 0 }

// taken ends the oldest successor owner asked for of the class of it, a
// sandbox a call of owner took. p.mu is held.
func (p *Pool[S]) taken(it pooled[S], owner string) {
	c := it.class()
	es := p.expected[c]
	if i := slices.IndexFunc(es, func(e expectation) bool { return e.owner == owner }); i >= 0 {
		if es = slices.Delete(es, i, i+1); len(es) == 0 {
			delete(p.expected, c)
		} else {
			p.expected[c] = es
		}
	}
}
