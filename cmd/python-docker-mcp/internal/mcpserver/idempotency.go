package mcpserver

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// MetaIdempotencyKey is the tools/call _meta member a client sets to make
// a call safe to retry: a string of 1 to 128 printable ASCII characters,
// new for each distinct call (a UUID, say). A retry with the same key (and
// the same tool and arguments) that reaches the same server process never
// runs the call again: it waits for the first attempt if that still runs,
// and returns the first attempt's result (with _meta.replayed true).
//
// Scope: per server process (replica) and per principal; results are kept
// for idempotencyTTL, at most idempotencyMaxPerOwner per principal and
// idempotencyMaxBytes in all (the oldest go first; a retry of a forgotten
// key runs as a new call). On a backend whose sessions are shared between
// replicas (Kubernetes), an execute-persistent call's key is also written
// into the session's record, so that a retry on another replica (after a
// crash, say) is not run again either: it reports that the call already
// ran, or, when the replica that ran it stopped mid-call, that it may have
// run (status outcome_unknown).
const MetaIdempotencyKey = "idempotency_key"

const (
	idempotencyTTL         = 10 * time.Minute
	idempotencyMaxPerOwner = 256
	idempotencyMaxBytes    = 64 << 20
	idempotencyMaxKeyLen   = 128
)

type memoKey struct{ owner, key string }

// memoCall is one keyed call: running until done is closed, then its
// result.
type memoCall struct {
	k           memoKey
	fingerprint [32]byte
	done        chan struct{}
	res         *mcp.CallToolResult
	err         error
	ended       time.Time
	size        int64
	el          *list.Element // in callMemo.order once done
}

// callMemo remembers keyed calls. Safe for concurrent use.
type callMemo struct {
	mu      sync.Mutex
	calls   map[memoKey]*memoCall
	order   *list.List // done calls, oldest first
	perUser map[string]int
	bytes   int64
}

func newCallMemo() *callMemo {
	return &callMemo{calls: map[memoKey]*memoCall{}, order: list.New(), perUser: map[string]int{}}
}

// begin returns the call under k and whether the caller is its first
// attempt (and must run it and call finish).
func (m *callMemo) begin(k memoKey, fp [32]byte, now time.Time) (*memoCall, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	if c, ok := m.calls[k]; ok {
		return c, false
	}
	c := &memoCall{k: k, fingerprint: fp, done: make(chan struct{})}
	m.calls[k] = c
	return c, true
}

// finish records c's outcome; keep false forgets c (a retry runs anew).
func (m *callMemo) finish(c *memoCall, res *mcp.CallToolResult, err error, keep bool, now time.Time) {
	size := int64(256)
	if b, merr := json.Marshal(res); merr == nil {
		size += int64(len(b))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c.res, c.err, c.ended, c.size = res, err, now, size
	close(c.done)
	if !keep || size > idempotencyMaxBytes {
		delete(m.calls, c.k)
		return
	}
	c.el = m.order.PushBack(c)
	m.perUser[c.k.owner]++
	m.bytes += size
	for m.perUser[c.k.owner] > idempotencyMaxPerOwner || m.bytes > idempotencyMaxBytes {
		for e := m.order.Front(); e != nil; e = e.Next() {
			if o := e.Value.(*memoCall); m.bytes > idempotencyMaxBytes || o.k.owner == c.k.owner {
				m.drop(o)
				break
			}
		}
	}
}

// expire drops the calls that ended before now - idempotencyTTL; m.mu is held.
func (m *callMemo) expire(now time.Time) {
	for e := m.order.Front(); e != nil; e = m.order.Front() {
		c := e.Value.(*memoCall)
		if now.Sub(c.ended) < idempotencyTTL {
			return
		}
		m.drop(c)
	}
}

// drop forgets a done call; m.mu is held.
func (m *callMemo) drop(c *memoCall) {
	m.order.Remove(c.el)
	delete(m.calls, c.k)
	if m.perUser[c.k.owner]--; m.perUser[c.k.owner] <= 0 {
		delete(m.perUser, c.k.owner)
	}
	m.bytes -= c.size
}

type idemCtxKey struct{}

// idempotencyKeyFrom is the call's idempotency key ("" = none), for the
// executor's session records.
func idempotencyKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idemCtxKey{}).(string)
	return k
}

// idempotencyKey reads _meta.idempotency_key; ok false when absent.
func idempotencyKey(req mcp.CallToolRequest) (string, bool, error) {
	if req.Params.Meta == nil || req.Params.Meta.AdditionalFields == nil {
		return "", false, nil
	}
	v, ok := req.Params.Meta.AdditionalFields[MetaIdempotencyKey]
	if !ok || v == nil {
		return "", false, nil
	}
	k, isString := v.(string)
	if !isString || k == "" || len(k) > idempotencyMaxKeyLen {
		return "", true, fmt.Errorf("_meta.%s must be a string of 1 to %d printable ASCII characters, new for each call (e.g. a UUID)", MetaIdempotencyKey, idempotencyMaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", true, fmt.Errorf("_meta.%s holds a character other than printable ASCII at byte %d; use e.g. a UUID", MetaIdempotencyKey, i)
		}
	}
	return k, true, nil
}

// callFingerprint identifies what a keyed call asked for: its tool and
// arguments.
func callFingerprint(req mcp.CallToolRequest) [32]byte {
	h := sha256.New()
	h.Write([]byte(req.Params.Name))
	h.Write([]byte{0})
	if len(req.Params.RawArguments) > 0 {
		h.Write(req.Params.RawArguments)
	} else {
		b, _ := json.Marshal(req.Params.Arguments)
		h.Write(b)
	}
	var fp [32]byte
	copy(fp[:], h.Sum(nil))
	return fp
}

// idempotent runs a call with _meta.idempotency_key at most once per
// server process and principal (see MetaIdempotencyKey).
func (s *Server) idempotent(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key, ok, err := idempotencyKey(req)
		if err != nil {
			return toolError("invalid: nothing was run: "+err.Error(), nil), nil
		}
		if !ok {
			return next(ctx, req)
		}
		k := memoKey{owner: s.principal(ctx).Sub, key: key}
		fp := callFingerprint(req)
		c, first := s.memo.begin(k, fp, time.Now())
		if c.fingerprint != fp {
			return toolError(fmt.Sprintf("invalid: nothing was run: _meta.%s %q was already used for another call (another tool or other arguments); use a new key for each distinct call", MetaIdempotencyKey, key), nil), nil
		}
		if !first {
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			s.d.Logger.Info("a retried call was answered with its first attempt's result; not run again", "tool", req.Params.Name, "idempotency_key", key)
			return replayed(c.res, key), c.err
		}
		finished := false
		defer func() {
			if !finished { // next panicked: its retries must not wait forever
				s.memo.finish(c, nil, errors.New("the first attempt of this call failed inside the server; send it with a new idempotency key"), false, time.Now())
			}
		}()
		res, err := next(context.WithValue(ctx, idemCtxKey{}, key), req)
		finished = true
		// A transient call whose client went away ran in a sandbox that
		// is gone with everything it did: its retry may run it anew.
		// Anything else may have changed a session: a retry gets this
		// outcome and decides with a new key.
		keep := ctx.Err() == nil || req.Params.Name != ToolExecuteTransient
		s.memo.finish(c, res, err, keep, time.Now())
		return res, err
	}
}

// replayed is res marked as the replay of the call with this key.
func replayed(res *mcp.CallToolResult, key string) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	r := *res
	meta := &mcp.Meta{AdditionalFields: map[string]any{}}
	if res.Meta != nil {
		meta.ProgressToken = res.Meta.ProgressToken
		for k, v := range res.Meta.AdditionalFields {
			meta.AdditionalFields[k] = v
		}
	}
	meta.AdditionalFields[MetaIdempotencyKey] = key
	meta.AdditionalFields["replayed"] = true
	r.Meta = meta
	return &r
}
