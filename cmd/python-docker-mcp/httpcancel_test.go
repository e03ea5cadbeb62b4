package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequestsCancelPerPrincipal: a cancellation reaches the requests in
// flight of the principal (and session) that sent it, never another's
// request with the same id; a cancelled request gets no reply.
func TestRequestsCancelPerPrincipal(t *testing.T) {
	q := &requests{m: map[requestKey][]*inflightReq{}}
	started := make(chan struct{})
	release := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
			w.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`))
		}
	})
	call := head{id: "7", method: "tools/call"}
	serve := func(sub string) <-chan *httptest.ResponseRecorder {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w := httptest.NewRecorder()
			q.serve(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), next, call, requestKey{sub: sub, id: call.id})
			done <- w
		}()
		<-started
		return done
	}
	cancel := func(sub, session string) int {
		w := httptest.NewRecorder()
		q.serve(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), next, head{method: "notifications/cancelled", requestID: "7"}, requestKey{sub: sub, session: session})
		return w.Code
	}

	alice := serve("alice")
	if code := cancel("bob", ""); code != http.StatusAccepted {
		t.Fatalf("bob's cancellation: %d, want 202", code)
	}
	if code := cancel("alice", "another-session"); code != http.StatusAccepted {
		t.Fatalf("a cancellation on another session: %d, want 202", code)
	}
	close(release)
	if w := <-alice; !strings.Contains(w.Body.String(), `"result"`) {
		t.Errorf("alice's call after bob's cancellation of its id: %q, want its reply", w.Body.String())
	}

	release = make(chan struct{})
	alice = serve("alice")
	cancel("alice", "")
	w := <-alice
	if w.Body.Len() != 0 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("alice's cancelled call: %q %q, want an empty event stream", w.Header().Get("Content-Type"), w.Body.String())
	}
	if len(q.m) != 0 {
		t.Errorf("%d request key(s) still tracked, want none", len(q.m))
	}
}
