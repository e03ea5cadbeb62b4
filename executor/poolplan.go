package executor

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The transient pool's sizing and routing, as pure functions of what it
// has seen (tested without a daemon in poolplan_test.go).
//
// A preload class is the set of modules a pooled sandbox imported before
// it waits: "" (the bare interpreter, the cheapest to make) or e.g.
// "numpy,pandas". Each call needs the class of its own non-standard-library
// imports; the pool keeps sandboxes of the classes recent calls needed, as
// many as calls arrived within one creation time of each other (so a burst
// like the last ones finds a sandbox each), between pool.size and
// pool.max_size.
//
// A class learned from a principal's calls belongs to that principal: its
// key is the principal's name, a NUL, then the modules (ownedClass), and
// its sandboxes serve that principal only. The bare class "" and the
// operator's pool.preload class have no owner.

const (
	// demandWindow is how long an arrival counts for the pool's size: a
	// burst keeps the pool grown for this long after it.
	demandWindow = 5 * time.Minute
	// maxArrivals bounds the arrivals kept.
	maxArrivals = 256
	// shareOf is how many of the latest arrivals set the classes' shares.
	shareOf = 32
	// trimAfter is how long a sandbox beyond its class's target waits
	// before it is removed: it is paid for already, and demand comes back.
	trimAfter = time.Minute
	// initialCreate is the creation time assumed before one is measured.
	initialCreate = time.Second
	// pressureFor is how long after a call found the pool empty (or left
	// it empty) refills favour count over fit.
	pressureFor = 10 * time.Second
	// urgentOf is how many of the latest arrivals name the classes made
	// under pressure.
	urgentOf = 4
)

// arrival is one transient call the pool saw: when, and its class.
type arrival struct {
	at    time.Time
	class string
}

// demand is what the pool knows of recent calls and of its own creations.
// Not safe for concurrent use (the pool holds its lock).
type demand struct {
	floor, max int
	seed       string    // class before any call was seen (pool.preload)
	arrivals   []arrival // oldest first
	create     time.Duration
}

// record notes a call arriving at now that needs class.
func (d *demand) record(now time.Time, class string) {
	d.arrivals = append(d.arrivals, arrival{now, class})
	if len(d.arrivals) > maxArrivals {
		d.arrivals = slices.Delete(d.arrivals, 0, len(d.arrivals)-maxArrivals)
	}
}

// created folds one creation's wall time into the estimate (a moving
// average: the machine's load changes).
func (d *demand) created(took time.Duration) {
	if d.create == 0 {
		d.create = took
		return
	}
	d.create = time.Duration(0.7*float64(d.create) + 0.3*float64(took))
}

// horizon is the time one refill takes, bounded to a sane range.
func (d *demand) horizon() time.Duration {
	h := d.create
	if h == 0 {
		h = initialCreate
	}
	return min(max(h, 200*time.Millisecond), 10*time.Second)
}

// expire forgets arrivals older than demandWindow.
func (d *demand) expire(now time.Time) {
	i := 0
	for i < len(d.arrivals) && now.Sub(d.arrivals[i].at) > demandWindow {
		i++
	}
	d.arrivals = slices.Delete(d.arrivals, 0, i)
}

// peak is the most calls that arrived within one horizon of each other:
// how many sandboxes the pool must hold so that none of them would have
// waited for a refill.
func (d *demand) peak() int {
	h := d.horizon()
	best, lo := 0, 0
	for hi, a := range d.arrivals {
		for a.at.Sub(d.arrivals[lo].at) >= h {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// plan returns how many sandboxes of each class to keep at now. The total
// is the peak between floor and max; it is shared among the classes of the
// latest calls in proportion to how often each was needed (largest
// remainder). Before any call, the floor is one sandbox of the seed class
// (when the floor is two or more) and bare ones.
func (d *demand) plan(now time.Time) map[string]int {
	d.expire(now)
	total := min(max(d.peak(), d.floor), max(d.max, d.floor))
	out := map[string]int{}
	if total <= 0 {
		return out
	}
	recent := d.arrivals[max(0, len(d.arrivals)-shareOf):]
	if len(recent) == 0 {
		if d.seed != "" && total >= 2 {
			out[d.seed] = 1
		}
		out[""] += total - out[d.seed]
		return out
	}
	count := map[string]int{}
	for _, a := range recent {
		count[a.class]++
	}
	type share struct {
		class string
		n     int
		frac  float64
	}
	var shares []share
	given := 0
	for c, n := range count {
		exact := float64(total) * float64(n) / float64(len(recent))
		whole := int(math.Floor(exact))
		out[c] = whole
		given += whole
		shares = append(shares, share{c, n, exact - float64(whole)})
	}
	sort.Slice(shares, func(i, j int) bool {
		a, b := shares[i], shares[j]
		if a.frac != b.frac {
			return a.frac > b.frac
		}
		if a.n != b.n {
			return a.n > b.n
		}
		return a.class < b.class
	})
	for i := 0; given < total; i++ {
		out[shares[i%len(shares)].class]++
		given++
	}
	for c, n := range out {
		if n == 0 {
			delete(out, c)
		}
	}
	return out
}

// nextClass picks the class the next refill makes: the one furthest below
// its target (counting sandboxes waiting and being made), the cheaper one
// (fewer modules) on a tie. Under pressure (calls recently found the pool
// empty; urgent are the classes of the latest calls) the count matters more
// than the fit: while the pool is below its total target, the cheapest of
// the urgent classes is made, as it is ready soonest (a call in a sandbox
// without some of its modules imports them itself, still sooner than in a
// cold one). ok is false when the pool has enough.
func nextClass(plan, idle, creating map[string]int, urgent []string) (class string, ok bool) {
	if len(urgent) > 0 {
		total, have := 0, 0
		for _, want := range plan {
			total += want
		}
		for _, n := range idle {
			have += n
		}
		for _, n := range creating {
			have += n
		}
		if have >= total {
			return "", false
		}
		for _, c := range urgent {
			if !ok || cheaper(c, class) {
				class, ok = c, true
			}
		}
		return class, ok
	}
	best := 0
	for c, want := range plan {
		short := want - idle[c] - creating[c]
		if short <= 0 {
			continue
		}
		if !ok || short > best || (short == best && cheaper(c, class)) {
			class, best, ok = c, short, true
		}
	}
	return class, ok
}

// latest returns the classes of the last n arrivals.
func (d *demand) latest(n int) []string {
	var out []string
	for _, a := range d.arrivals[max(0, len(d.arrivals)-n):] {
		if !slices.Contains(out, a.class) {
			out = append(out, a.class)
		}
	}
	return out
}

// cheaper orders classes by how many modules they preload, then by name.
func cheaper(a, b string) bool {
	na, nb := len(classModules(a)), len(classModules(b))
	if na != nb {
		return na < nb
	}
	return a < b
}

// classKey names the class that preloads modules.
func classKey(modules []string) string {
	m := slices.Clone(modules)
	slices.Sort(m)
	return strings.Join(slices.Compact(m), ",")
}

// classModules lists the modules of a class.
func classModules(class string) []string {
	class = unowned(class)
	if class == "" {
		return nil
	}
	return strings.Split(class, ",")
}

// ownedClass is the key of class (a classKey) learned from owner's calls;
// the bare class, and any class without an owner, is shared.
func ownedClass(owner, class string) string {
	if owner == "" || class == "" {
		return class
	}
	return owner + "\x00" + class
}

// classOwner is the principal a class key belongs to, "" for a shared one.
func classOwner(class string) string {
	i := strings.LastIndexByte(class, 0)
	if i < 0 {
		return ""
	}
	return class[:i]
}

// unowned is a class key without its owner: the modules' classKey.
func unowned(class string) string {
	return class[strings.LastIndexByte(class, 0)+1:]
}

// preloadable returns the modules a call's imports make worth a warmed
// sandbox, sorted: absolute imports outside the standard library, and for
// `from M import n` also M.n (a submodule such as matplotlib.pyplot; a name
// that is no module fails to preload once and is then left out, see
// pool.unloadable).
func preloadable(imps []analyze.Import) []string {
	var out []string
	for _, im := range imps {
		if im.Level > 0 || im.Module == "" || stdlibModules[topLevel(im.Module)] {
			continue
		}
		out = append(out, im.Module)
		if im.From {
			for _, n := range im.Names {
				if n.Name != "" && n.Name != "*" {
					out = append(out, im.Module+"."+n.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// covers says whether a sandbox that preloaded modules has module m
// imported: m itself, or a submodule of it (which imports m first).
func covers(modules []string, m string) bool {
	for _, x := range modules {
		if x == m || strings.HasPrefix(x, m+".") {
			return true
		}
	}
	return false
}

// pick returns the index in idle of the sandbox that serves a call of
// owner needing need at the least cost: fewest needed modules it has not
// imported (the call would import them itself), then fewest modules the
// call does not need (the cheapest to replace), then the oldest. Sandboxes
// of another principal's class are never picked. -1 when none is left.
func pick(idle []pooled, need []string, owner string) int {
	best, bestMiss, bestExtra := -1, 0, 0
	for i, it := range idle {
		if it.owner != "" && it.owner != owner {
			continue
		}
		miss := 0
		for _, m := range need {
			if !covers(it.modules, m) {
				miss++
			}
		}
		extra := 0
		for _, x := range it.modules {
			if !slices.ContainsFunc(need, func(m string) bool { return x == m || strings.HasPrefix(x, m+".") }) {
				extra++
			}
		}
		if best < 0 || miss < bestMiss || (miss == bestMiss && extra < bestExtra) {
			best, bestMiss, bestExtra = i, miss, extra
		}
	}
	return best
}
