package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// OutputTemplate is the URI template of what a call left for its caller:
// the full text of a stream the result showed cut
// (sandbox-output://CALL_ID/stdout or /stderr), the small files of an
// execute-transient run (sandbox-output://CALL_ID/files/PATH), and the HTML
// and SVG of display() and of a final expression
// (sandbox-output://CALL_ID/display/display-N.html, .../result.svg).
const OutputTemplate = "sandbox-output://{call_id}/{+stream}"

// output is one kept stream.
type output struct {
	uri     string
	owner   string
	call    string
	stream  string
	text    string
	total   int64 // the stream's length as written (text may be cut too)
	created time.Time
	expires time.Time
}

// outputStore keeps the full text of cut streams for their owner, each for
// ttl. Each owner's outputs stay within that owner's quota (its oldest go
// first), and all of them within maxTotal bytes: an output that does not
// fit beside the other owners' is not kept, so that one owner never evicts
// another's. Safe for concurrent use.
type outputStore struct {
	mu       sync.Mutex
	byURI    map[string]*output
	order    []*output // oldest first
	size     int64
	owners   map[string]int64 // owner -> bytes kept
	maxTotal int64
	ttl      time.Duration
	now      func() time.Time
}

func newOutputStore() *outputStore {
	return &outputStore{byURI: map[string]*output{}, owners: map[string]int64{}, now: time.Now}
}

func newCallID() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func outputURI(call, stream string) string { return "sandbox-output://" + call + "/" + stream }

// setLimits applies the configuration in force (it may change on reload).
func (o *outputStore) setLimits(maxTotal int64, ttl time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxTotal, o.ttl = maxTotal, ttl
	o.evict("", 0)
}

// put keeps a stream of call for owner, within q (owner's quota of kept
// bytes), and returns its URI. It evicts owner's oldest outputs to make
// room, never another owner's; a *quota.Error says why it kept nothing:
// the stream is larger than the owner's quota, or the store is full of
// other owners' outputs.
func (o *outputStore) put(owner, call, stream, text string, total int64, q policy.Quota) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evict("", 0)
	n := int64(len(text))
	if n > q.Max {
		return "", &quota.Error{Quota: policy.QuotaOutputBytes, Use: o.owners[owner], Asked: n, Max: q.Max, Key: q.Key,
			Hint: "the stream alone is larger than the quota"}
	}
	if others := o.size - o.owners[owner]; others+n > o.maxTotal {
		return "", &quota.Error{Quota: policy.QuotaOutputBytes, Use: o.owners[owner], Asked: n, Max: min(q.Max, max(o.maxTotal-others, 0)), Key: "outputs.max_total_bytes",
			Hint: fmt.Sprintf("the server's store (outputs.max_total_bytes, %d bytes) is full of other principals' outputs, kept for %s", o.maxTotal, o.ttl)}
	}
	now := o.now()
	out := &output{uri: outputURI(call, stream), owner: owner, call: call, stream: stream, text: text, total: total, created: now, expires: now.Add(o.ttl)}
	if old, ok := o.byURI[out.uri]; ok {
		o.drop(old)
	}
	o.byURI[out.uri] = out
	o.order = append(o.order, out)
	o.size += n
	o.owners[owner] += n
	o.evict(owner, q.Max)
	return out.uri, nil
}

// evict drops expired entries and, while owner ("" for none) is over
// ownerMax or the store over maxTotal, owner's oldest; o.mu is held.
func (o *outputStore) evict(owner string, ownerMax int64) {
	now := o.now()
	keep := o.order[:0]
	for _, out := range o.order {
		mine := owner != "" && out.owner == owner
		if now.After(out.expires) || (mine && (o.owners[owner] > ownerMax || o.size > o.maxTotal)) {
			o.drop(out)
			continue
		}
		keep = append(keep, out)
	}
	clear(o.order[len(keep):])
	o.order = keep
}

// drop forgets out's bytes and URI (o.order is the caller's); o.mu is held.
func (o *outputStore) drop(out *output) {
	if o.byURI[out.uri] == out {
		delete(o.byURI, out.uri)
	}
	o.size -= int64(len(out.text))
	if o.owners[out.owner] -= int64(len(out.text)); o.owners[out.owner] <= 0 {
		delete(o.owners, out.owner)
	}
}

// use is the bytes kept, in all and by the owner that keeps most.
func (o *outputStore) use() quota.Use {
	o.mu.Lock()
	defer o.mu.Unlock()
	u := quota.Use{Total: o.size}
	for _, n := range o.owners {
		u.Top = max(u.Top, n)
	}
	return u
}

// get returns owner's kept stream at uri. Another owner's output is
// reported like a missing one.
func (o *outputStore) get(owner, uri string) (*output, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evict("", 0)
	out, ok := o.byURI[uri]
	if !ok || out.owner != owner {
		return nil, fmt.Errorf("resource %s: no such output (outputs are kept for %s after the call, and only for its caller)", uri, o.ttl)
	}
	return out, nil
}

// list returns owner's kept streams, newest first.
func (o *outputStore) list(owner string) []output {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evict("", 0)
	var out []output
	for _, e := range o.order {
		if e.owner == owner {
			out = append(out, *e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].created.After(out[j].created) })
	return out
}

// parseOutputURI splits sandbox-output://CALL/STREAM.
func parseOutputURI(uri string) (call, stream string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "sandbox-output://")
	if !ok {
		return "", "", false
	}
	call, stream, _ = strings.Cut(rest, "/")
	prefixed := func(p string) bool { return strings.HasPrefix(stream, p) && len(stream) > len(p) }
	return call, stream, call != "" && (stream == "stdout" || stream == "stderr" || prefixed("files/") || prefixed("display/"))
}
