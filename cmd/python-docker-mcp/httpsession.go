package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// httpSessions issues the Streamable HTTP session ids (Mcp-Session-Id) of
// protocol versions before 2026-07-28 and binds each to the subject of the
// token that initialized it. Safe for concurrent use.
//
// Per the MCP specification (2025-11-25, Streamable HTTP, session
// management): a request other than initialize without an id gets 400; an
// id the server never issued, one that was terminated (DELETE), or one
// used with another subject's token gets 404, so a client starts a new
// session. Protocol version 2026-07-28 has no protocol-level sessions;
// its requests pass through untouched.
//
// With a key (server.session_key_file), an id carries an HMAC of itself and
// its subject, so that replicas sharing the key accept each other's ids:
// behind a load balancer without affinity, any replica serves any
// session. A DELETE ends the id on the replica that received it; the
// others accept it (for the same subject only) until their idle TTL.
type httpSessions struct {
	mu   sync.Mutex
	key  []byte            // nil: ids are this process's only
	subs map[string]string // live session id -> owning subject
	// ended are ids terminated here, which a valid signature must not
	// bring back.
	ended map[string]bool
	// requests are the requests being handled, for notifications/cancelled.
	requests requests
	// ledger counts each subject's live ids against quotas' transport
	// session quota (policy.QuotaTransportSessions; nil quotas: none).
	ledger *quota.Ledger
	quotas quotasFunc
}

// reservation is the transport-session quota an initialize request took;
// the id it is issued takes it over, else it is given back.
type reservation struct {
	release func()
	used    atomic.Bool
}

type reservationKey struct{}

func newHTTPSessions() *httpSessions {
	return &httpSessions{subs: map[string]string{}, ended: map[string]bool{}, requests: requests{m: map[requestKey][]*inflightReq{}}, ledger: quota.New()}
}

// maxEnded bounds the terminated ids remembered.
const maxEnded = 100000

// minSessionKey is the shortest key loadKey accepts.
const minSessionKey = 32

// loadKey reads the key that signs session ids.
func (s *httpSessions) loadKey(path string) error {
	key, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the session id key: %w", err)
	}
	key = bytes.TrimSpace(key)
	if len(key) < minSessionKey {
		return fmt.Errorf("%s holds %d bytes; want at least %d random bytes, e.g. from `openssl rand -hex 32`", path, len(key), minSessionKey)
	}
	s.key = key
	return nil
}

// sign is the signature part of a signed id.
func (s *httpSessions) sign(raw, sub string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(raw))
	m.Write([]byte{0})
	m.Write([]byte(sub))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// signedBy says whether id is a signed id issued to sub (by any replica
// with the same key).
func (s *httpSessions) signedBy(id, sub string) bool {
	raw, sig, ok := strings.Cut(id, ".")
	return s.key != nil && ok && hmac.Equal([]byte(sig), []byte(s.sign(raw, sub)))
}

// Live is the number of sessions issued and not terminated.
func (s *httpSessions) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

var (
	errUnknownSession = errors.New("unknown or terminated session")
	errForeignSession = errors.New("session belongs to another subject")
)

// check says whether id is live and belongs to sub.
func (s *httpSessions) check(id, sub string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.subs[id]
	if !ok && !s.ended[id] && s.signedBy(id, sub) {
		// Issued by another replica to this subject.
		s.subs[id], owner, ok = sub, sub, true
		s.ledger.Add(policy.QuotaTransportSessions, sub, 1)
	}
	switch {
	case !ok:
		return errUnknownSession
	case owner != sub:
		return errForeignSession
	}
	return nil
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager it returns issues ids owned by the request's subject. mcp-go's
// idle sweeper passes a nil request; its manager checks no subject.
func (s *httpSessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	m := &sessionIDs{s: s}
	if r != nil {
		p, _ := auth.PrincipalFrom(r.Context())
		m.sub, m.bound = p.Sub, true
		m.res, _ = r.Context().Value(reservationKey{}).(*reservation)
	}
	return m
}

// sessionIDs is the mcp-go SessionIdManager of one request.
type sessionIDs struct {
	s     *httpSessions
	sub   string
	bound bool
	res   *reservation // the initialize request's quota, if it took one
}

func (m *sessionIDs) Generate() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	if m.s.key != nil {
		id += "." + m.s.sign(id, m.sub)
	}
	m.s.mu.Lock()
	m.s.subs[id] = m.sub
	m.s.mu.Unlock()
	if m.res == nil || !m.res.used.CompareAndSwap(false, true) {
		m.s.ledger.Add(policy.QuotaTransportSessions, m.sub, 1)
	}
	return id
}

func (m *sessionIDs) Validate(id string) (bool, error) {
	if !m.bound {
		m.s.mu.Lock()
		_, ok := m.s.subs[id]
		m.s.mu.Unlock()
		if !ok {
			return false, errUnknownSession
		}
		return false, nil
	}
	return false, m.s.check(id, m.sub)
}

func (m *sessionIDs) Terminate(id string) (bool, error) {
	if m.bound {
		if err := m.s.check(id, m.sub); err != nil {
			return false, err
		}
	}
	m.s.mu.Lock()
	if owner, ok := m.s.subs[id]; ok {
		m.s.ledger.Add(policy.QuotaTransportSessions, owner, -1)
	}
	delete(m.s.subs, id)
	if m.s.key != nil {
		if len(m.s.ended) >= maxEnded {
			clear(m.s.ended) // bounded memory; a cleared id still needs its subject's token
		}
		m.s.ended[id] = true
	}
	m.s.mu.Unlock()
	return false, nil
}

// idKey is the canonical text of a JSON-RPC id ("" when absent or null).
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Middleware enforces the session rules in front of mcp-go's handler (it
// runs after authentication, so the principal is in the request context)
// and handles notifications/cancelled itself, on every protocol version
// (see requests).
func (s *httpSessions) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modern := mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
		var h head
		var body []byte
		if r.Method == http.MethodPost {
			var ok bool
			if body, ok = readBody(w, r); !ok {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h = scanHead(body)
		}
		p, _ := auth.PrincipalFrom(r.Context())
		if modern {
			// No protocol-level sessions: requests are told apart by
			// principal and id alone.
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			s.requests.serve(w, r, next, h, requestKey{sub: p.Sub, id: h.id})
			return
		}
		if h.method == string(mcp.MethodInitialize) {
			s.initialize(w, r, body, next)
			return
		}
		switch r.Method {
		case http.MethodPost, http.MethodGet, http.MethodDelete:
		default:
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(server.HeaderKeySessionID)
		if id == "" {
			http.Error(w, "missing Mcp-Session-Id header: send initialize first, then the session id it returned", http.StatusBadRequest)
			return
		}
		if err := s.check(id, p.Sub); err != nil {
			// Another subject's session is "not found" too: existence does not leak.
			http.Error(w, "session not found (unknown, terminated or not yours): initialize a new session", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		s.requests.serve(w, r, next, h, requestKey{sub: p.Sub, session: id, id: h.id})
	})
}

// initialize lets an initialize request through when its subject holds
// fewer transport sessions than its quota; the id it is issued counts.
func (s *httpSessions) initialize(w http.ResponseWriter, r *http.Request, body []byte, next http.Handler) {
	if s.quotas == nil {
		next.ServeHTTP(w, r)
		return
	}
	p, _ := auth.PrincipalFrom(r.Context())
	q, ok := s.quotas(r.Context(), p)[policy.QuotaTransportSessions]
	if !ok {
		next.ServeHTTP(w, r)
		return
	}
	release, err := s.ledger.Take(policy.QuotaTransportSessions, p.Sub, 1, 0, q)
	if err != nil {
		qe := err.(*quota.Error)
		qe.Hint = "end sessions this subject no longer uses (HTTP DELETE with their Mcp-Session-Id)"
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &msg)
		writeQuotaError(w, msg.ID, qe)
		return
	}
	res := &reservation{release: release}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reservationKey{}, res)))
	if !res.used.Load() {
		release() // no id was issued
	}
}

// trackingWriter records whether a response was started.
type trackingWriter struct {
	http.ResponseWriter
	wrote atomic.Bool // mcp-go writes from more than one goroutine
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote.Store(true)
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.wrote.Store(true)
	return t.ResponseWriter.Write(p)
}

func (t *trackingWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// readBody reads a request's whole body; a body over the server's limit
// is answered 413 and an unreadable one 400, and ok is false.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}
