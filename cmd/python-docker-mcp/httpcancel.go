package main

import (
	"context"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// requests cancels the Streamable HTTP requests in flight on
// notifications/cancelled, in place of mcp-go's own bookkeeping, which
// keys a request by session and id only: on protocol 2026-07-28 (no
// sessions) every principal's request 7 shares one key, so anyone could
// cancel anyone's call, and mcp-go refuses a cancellation without _meta
// (as the official go-sdk client sends it) with 400. Here a request is
// known by its principal, its session (none on 2026-07-28) and its id: a
// cancellation reaches only the requests of the principal that sent it,
// on every protocol version, and is answered 202 without reaching
// mcp-go. Safe for concurrent use.
type requests struct {
	mu sync.Mutex
	// m holds every request in flight under its key; one principal's
	// sessionless clients may use the same id at once, and a cancellation
	// of that id reaches all of them.
	m map[requestKey][]*inflightReq
}

// requestKey names a request for cancellation.
type requestKey struct{ sub, session, id string }

type inflightReq struct {
	cancel    context.CancelFunc
	cancelled bool
}

// serve handles one POST whose head is h: a cancellation is applied here;
// a request runs in next with a context that its cancellation ends, and
// once cancelled gets no JSON-RPC reply (an empty event stream unless mcp-go
// had started its response); anything else passes to next untouched.
func (q *requests) serve(w http.ResponseWriter, r *http.Request, next http.Handler, h head, key requestKey) {
	if h.method == string(mcp.MethodNotificationCancelled) {
		key.id = h.requestID
		q.cancel(key)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if h.method == "" || h.id == "" {
		next.ServeHTTP(w, r) // a notification or a response to the server
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	req := &inflightReq{cancel: cancel}
	q.mu.Lock()
	q.m[key] = append(q.m[key], req)
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.remove(key, req)
		q.mu.Unlock()
		cancel()
	}()
	tw := &trackingWriter{ResponseWriter: w}
	next.ServeHTTP(tw, r.WithContext(ctx))
	q.mu.Lock()
	cancelled := req.cancelled
	q.mu.Unlock()
	if cancelled && !tw.wrote.Load() {
		// No reply for a cancelled request: an empty event stream.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
}

// cancel ends the requests in flight under key; mcp-go then writes no
// reply for them (their handlers' contexts end too). A key with nothing in
// flight (finished, never sent, or another principal's) changes nothing.
func (q *requests) cancel(key requestKey) {
	q.mu.Lock()
	reqs := q.m[key]
	delete(q.m, key)
	for _, req := range reqs {
		req.cancelled = true
	}
	q.mu.Unlock()
	for _, req := range reqs {
		req.cancel()
	}
}

// remove forgets req. Called with mu held.
func (q *requests) remove(key requestKey, req *inflightReq) {
	reqs := q.m[key]
	for i, r := range reqs {
		if r == req {
			reqs = append(reqs[:i], reqs[i+1:]...)
			break
		}
	}
	if len(reqs) == 0 {
		delete(q.m, key)
	} else {
		q.m[key] = reqs
	}
}
