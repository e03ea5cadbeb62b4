package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// OutputTemplate is the URI template of what a call left for its caller:
// the full text of a stream the result showed cut
// (sandbox-output://CALL_ID/stdout or /stderr), and the small files of an
// execute-transient run (sandbox-output://CALL_ID/files/PATH).
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
// ttl, all within maxTotal bytes (the oldest go first). Safe for concurrent
// use.
type outputStore struct {
	mu       sync.Mutex
	byURI    map[string]*output
	order    []*output // oldest first
	size     int64
	maxTotal int64
	ttl      time.Duration
	now      func() time.Time
}

func newOutputStore() *outputStore {
	return &outputStore{byURI: map[string]*output{}, now: time.Now}
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
	o.evict()
}

// put keeps a stream of call for owner and returns its URI, or "" when it
// is larger than the whole store.
func (o *outputStore) put(owner, call, stream, text string, total int64) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if int64(len(text)) > o.maxTotal {
		return ""
	}
	now := o.now()
	out := &output{uri: outputURI(call, stream), owner: owner, call: call, stream: stream, text: text, total: total, created: now, expires: now.Add(o.ttl)}
	o.byURI[out.uri] = out
	o.order = append(o.order, out)
	o.size += int64(len(text))
	o.evict()
	return out.uri
}

// evict drops expired entries and, while over maxTotal, the oldest; o.mu
// is held.
func (o *outputStore) evict() {
	now := o.now()
	keep := o.order[:0]
	for _, out := range o.order {
		if now.After(out.expires) || o.size > o.maxTotal {
			delete(o.byURI, out.uri)
			o.size -= int64(len(out.text))
			continue
		}
		keep = append(keep, out)
	}
	clear(o.order[len(keep):])
	o.order = keep
}

// get returns owner's kept stream at uri. Another owner's output is
// reported like a missing one.
func (o *outputStore) get(owner, uri string) (*output, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evict()
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
	o.evict()
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
	return call, stream, call != "" && (stream == "stdout" || stream == "stderr" || (strings.HasPrefix(stream, "files/") && len(stream) > len("files/")))
}
