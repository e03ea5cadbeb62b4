// Package poolplan is the executor's transient pool's sizing and routing,
// as pure functions of what the pool has seen (tested on a fake clock,
// without a daemon). The pool (executor/pool.go) holds the state and the
// lock; this package holds no sandbox and no lock.
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
// key is the principal's name, a NUL, then the modules (Owned), and
// its sandboxes serve that principal only. The bare class "" and the
// operator's pool.preload class have no owner.
package poolplan

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

const (
	// demandWindow is how long an arrival counts for the pool's size: a
	// burst keeps the pool grown for this long after it.
	demandWindow = 5 * time.Minute
	// maxArrivals bounds the arrivals kept.
	maxArrivals = 256
	// shareOf is how many of the latest arrivals set the classes' shares.
	shareOf = 32
	// TrimAfter is how long a sandbox beyond its class's target waits
	// before it is removed: it is paid for already, and demand comes back.
	TrimAfter = time.Minute
	// initialCreate is the creation time assumed before one is measured.
	initialCreate = time.Second
	// PressureFor is how long after a call found the pool empty (or left
	// it empty) refills favour count over fit.
	PressureFor = 10 * time.Second
	// UrgentOf is how many of the latest arrivals name the classes made
	// under pressure.
	UrgentOf = 4
)

// arrival is one transient call the pool saw: when, and its class.
type arrival struct {
	at    time.Time
	class string
}

// Demand is what the pool knows of recent calls and of its own creations.
// Not safe for concurrent use (the pool holds its lock).
type Demand struct {
	Floor, Max int       // the pool's size and max_size
	Seed       string    // class before any call was seen (pool.preload)
	arrivals   []arrival // oldest first
	create     time.Duration
}

// record notes a call arriving at now that needs class.
func (d *Demand) Record(now time.Time, class string) {
	d.arrivals = append(d.arrivals, arrival{now, class})
	if len(d.arrivals) > maxArrivals {
		d.arrivals = slices.Delete(d.arrivals, 0, len(d.arrivals)-maxArrivals)
	}
}

// created folds one creation's wall time into the estimate (a moving
// average: the machine's load changes).
func (d *Demand) Created(took time.Duration) {
	if d.create == 0 {
		d.create = took
		return
	}
	d.create = time.Duration(0.7*float64(d.create) + 0.3*float64(took))
}

// horizon is the time one refill takes, bounded to a sane range.
func (d *Demand) horizon() time.Duration {
	h := d.create
	if h == 0 {
		h = initialCreate
	}
	return min(max(h, 200*time.Millisecond), 10*time.Second)
}

// expire forgets arrivals older than demandWindow.
func (d *Demand) expire(now time.Time) {
	i := 0
	for i < len(d.arrivals) && now.Sub(d.arrivals[i].at) > demandWindow {
		i++
	}
	d.arrivals = slices.Delete(d.arrivals, 0, i)
}

// peak is the most calls that arrived within one horizon of each other:
// how many sandboxes the pool must hold so that none of them would have
// waited for a refill.
func (d *Demand) peak() int {
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
func (d *Demand) Plan(now time.Time) map[string]int {
	d.expire(now)
	total := min(max(d.peak(), d.Floor), max(d.Max, d.Floor))
	out := map[string]int{}
	if total <= 0 {
		return out
	}
	recent := d.arrivals[max(0, len(d.arrivals)-shareOf):]
	if len(recent) == 0 {
		if d.Seed != "" && total >= 2 {
			out[d.Seed] = 1
		}
		out[""] += total - out[d.Seed]
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

// Next picks the class the next refill makes: the one furthest below
// its target (counting sandboxes waiting and being made), the cheaper one
// (fewer modules) on a tie. Under pressure (calls recently found the pool
// empty; urgent are the classes of the latest calls) the count matters more
// than the fit: while the pool is below its total target, the cheapest of
// the urgent classes is made, as it is ready soonest (a call in a sandbox
// without some of its modules imports them itself, still sooner than in a
// cold one). ok is false when the pool has enough.
func Next(plan, idle, creating map[string]int, urgent []string) (class string, ok bool) {
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
func (d *Demand) Latest(n int) []string {
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
	na, nb := len(Modules(a)), len(Modules(b))
	if na != nb {
		return na < nb
	}
	return a < b
}

// Key names the class that preloads modules.
func Key(modules []string) string {
	m := slices.Clone(modules)
	slices.Sort(m)
	return strings.Join(slices.Compact(m), ",")
}

// Modules lists the modules of a class.
func Modules(class string) []string {
	class = Unowned(class)
	if class == "" {
		return nil
	}
	return strings.Split(class, ",")
}

// Owned is the key of class (a Key) learned from owner's calls;
// the bare class, and any class without an owner, is shared.
func Owned(owner, class string) string {
	if owner == "" || class == "" {
		return class
	}
	return owner + "\x00" + class
}

// Owner is the principal a class key belongs to, "" for a shared one.
func Owner(class string) string {
	i := strings.LastIndexByte(class, 0)
	if i < 0 {
		return ""
	}
	return class[:i]
}

// Unowned is a class key without its owner: the modules' Key.
func Unowned(class string) string {
	return class[strings.LastIndexByte(class, 0)+1:]
}

// Preloadable returns the modules a call's imports make worth a warmed
// sandbox, sorted: absolute imports outside the standard library, and for
// `from M import n` also M.n (a submodule such as matplotlib.pyplot; a name
// that is no module fails to preload once and is then left out, see
// pool.unloadable).
func Preloadable(imps []analyze.Import) []string {
	var out []string
	for _, im := range imps {
		if im.Level > 0 || im.Module == "" || stdlibModules[strings.SplitN(im.Module, ".", 2)[0]] {
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

// Covers says whether a sandbox that preloaded modules has module m
// imported: m itself, or a submodule of it (which imports m first).
func Covers(modules []string, m string) bool {
	for _, x := range modules {
		if x == m || strings.HasPrefix(x, m+".") {
			return true
		}
	}
	return false
}
