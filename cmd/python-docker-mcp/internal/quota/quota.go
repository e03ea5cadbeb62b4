// Package quota keeps what each principal holds against its quotas (the
// policy decides the bounds, see policy.Quotas) and counts the refusals,
// for the server's metrics. Use and refusals are kept per quota name and
// principal, and reported per quota name only.
package quota

import (
	"fmt"
	"sort"
	"sync"

	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Error is a refusal: taking more would put the principal past a quota.
type Error struct {
	// Quota is the quota's name (policy.QuotaSandboxes, …).
	Quota string `json:"quota"`
	// Use is what the principal holds now; Asked is what it asked for.
	Use   int64 `json:"use"`
	Asked int64 `json:"asked"`
	// Max is the principal's bound and Key the config key that raises it.
	Max int64  `json:"max"`
	Key string `json:"key"`
	// Hint says what the caller can do itself ("" for none).
	Hint string `json:"-"`
}

func (e *Error) Error() string {
	what := map[string]string{
		policy.QuotaSandboxes:         "sandboxes at once",
		policy.QuotaSessions:          "persistent sessions",
		policy.QuotaTransportSessions: "transport sessions (Mcp-Session-Id)",
		policy.QuotaOutputBytes:       "bytes of kept outputs",
		policy.QuotaInflightBytes:     "bytes of requests in flight",
		policy.QuotaAnalyses:          "calls whose code is being analysed or waits for it",
	}[e.Quota]
	msg := fmt.Sprintf("quota %s: this principal holds %d of its %d %s and asked for %d more", e.Quota, e.Use, e.Max, what, e.Asked)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg + fmt.Sprintf("; the operator raises it with %s", e.Key)
}

// Ledger holds each principal's use of each quota it counts itself (the
// executor counts sessions, the output store its bytes). Safe for
// concurrent use.
type Ledger struct {
	mu      sync.Mutex
	use     map[string]map[string]int64 // quota -> principal -> use
	refused map[string]int64            // quota -> refusals
	sources map[string]func() Use
}

// New returns an empty ledger.
func New() *Ledger {
	return &Ledger{use: map[string]map[string]int64{}, refused: map[string]int64{}, sources: map[string]func() Use{}}
}

// Take adds n to principal's use of quota q (named name) when held (what
// it holds that the ledger does not count) plus its use plus n stays
// within q.Max; otherwise it counts a refusal and returns an *Error. The
// returned release gives n back (once; later calls do nothing).
func (l *Ledger) Take(name, principal string, n, held int64, q policy.Quota) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.uses(name)
	if cur := held + m[principal]; cur+n > q.Max {
		l.refused[name]++
		return func() {}, &Error{Quota: name, Use: cur, Asked: n, Max: q.Max, Key: q.Key}
	}
	m[principal] += n
	var once sync.Once
	return func() { once.Do(func() { l.Add(name, principal, -n) }) }, nil
}

// uses is quota name's use per principal, made on first use; l.mu held.
func (l *Ledger) uses(name string) map[string]int64 {
	m := l.use[name]
	if m == nil {
		m = map[string]int64{}
		l.use[name] = m
	}
	return m
}

// Add changes principal's use of quota name by delta without a check (a
// use the ledger learns of after the fact).
func (l *Ledger) Add(name, principal string, delta int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.uses(name)
	m[principal] += delta
	if m[principal] <= 0 {
		delete(m, principal)
	}
}

// Refused counts a refusal the ledger did not make (by the policy, or by
// a store that keeps its own use).
func (l *Ledger) Refused(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused[name]++
}

// Source reports quota name's use from elsewhere (a store that counts its
// own bytes) instead of from the ledger.
func (l *Ledger) Source(name string, use func() Use) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources[name] = use
}

// Use is a quota's use now, over every principal.
type Use struct {
	// Total is the sum over principals; Top the largest of one principal
	// (-1 when the source does not know it).
	Total, Top int64
}

// Stat is one quota's figures for the metrics.
type Stat struct {
	Name    string
	Use     Use
	Refused int64
}

// Stats returns every quota's use and refusals, for each of names and any
// other the ledger has seen, sorted by name.
func (l *Ledger) Stats(names []string) []Stat {
	l.mu.Lock()
	all := map[string]bool{}
	for _, n := range names {
		all[n] = true
	}
	for n := range l.use {
		all[n] = true
	}
	for n := range l.refused {
		all[n] = true
	}
	out := make([]Stat, 0, len(all))
	var sourced []int
	for n := range all {
		s := Stat{Name: n, Refused: l.refused[n]}
		if _, ok := l.sources[n]; ok {
			sourced = append(sourced, len(out))
		}
		for _, u := range l.use[n] {
			s.Use.Total += u
			s.Use.Top = max(s.Use.Top, u)
		}
		out = append(out, s)
	}
	sources := make([]func() Use, len(sourced))
	for i, j := range sourced {
		sources[i] = l.sources[out[j].Name]
	}
	l.mu.Unlock()
	for i, j := range sourced { // outside the lock: a source has its own
		out[j].Use = sources[i]()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
