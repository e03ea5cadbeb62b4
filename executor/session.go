package executor

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// sessions are an executor's persistent sessions: the sessions this server
// serves, the tombstones of expired ones, the reaper that ends them and,
// on a Shared backend, their records (shared.go). It reaches sandboxes
// only through core.
//
// Lock order: sessions.mu guards the map, the tombstones and every
// session's mutable fields. It is never held while calling core (whose
// methods take Executor.mu, or block), config alone excepted, and the
// core never calls into sessions while it holds Executor.mu: the two
// mutexes are never nested.
type sessions struct {
	core     sessionCore
	log      *slog.Logger
	instance string         // this server's id, the holder of its records' locks
	shared   backend.Shared // nil: sessions live in this server only

	mu     sync.Mutex
	closed bool
	byID   map[string]*session
	tombs  map[string]tomb
}

// sessionCore is what sessions use of the executor core: the configuration
// in force, and starting, attaching to, talking to and ending sandboxes.
// *Executor implements it. Only config (an atomic load) may be called
// with sessions.mu held.
type sessionCore interface {
	config() *Config
	// spool is the pool of sandboxes for new sessions (nil: none).
	spool() *sandboxPool
	startWithin(ctx context.Context, meta sandboxMeta, lim Limits, runTimeout time.Duration) (*sandbox, error)
	// wrap and track make a sandbox of an attached stream (shared.go).
	wrap(box *backend.Sandbox, meta sandboxMeta, lim Limits, shared, ready bool) *sandbox
	track(sb *sandbox) bool
	run(ctx context.Context, sb *sandbox, req Request, lim Limits, transient, keep bool) (*Result, error)
	roundTrip(ctx context.Context, sb *sandbox, req protocol.Request, hard time.Duration, interrupt bool, limit int64) (*runnerResponse, *failure, error)
	destroy(sb *sandbox)
	detach(sb *sandbox)
	removeContainer(id string) bool
	removeVolume(name string)
}

func newSessions(core sessionCore, log *slog.Logger, instance string, shared backend.Shared) *sessions {
	return &sessions{core: core, log: log, instance: instance, shared: shared,
		byID: map[string]*session{}, tombs: map[string]tomb{}}
}

// session is one persistent sandbox. Calls are serialized by sem: a second
// concurrent call waits (honouring its ctx) until the first returns.
type session struct {
	id      string
	owner   string
	created time.Time
	lim     Limits // fixed at creation

	sem chan struct{} // one token: held by the running call

	// guarded by sessions.mu
	lastUsed time.Time
	calls    int      // calls waiting or running; the reaper skips busy sessions
	running  bool     // a call holds sem
	packages []string // requirements installed by Install
	closed   bool
	sb       *sandbox // nil after a kill until the next call restarts it
	// lost says a sandbox of the session died (noticed by a file operation
	// or a cancelled run) and no execute result has reported it yet: the
	// next Persistent result says StateLost once.
	lost bool
	// imported are the top-level modules the session's interpreter has
	// loaded for it since it started: the pool's preload modules and the
	// gate's import facts of its runs; see Imported.
	imported map[string]bool
	// On a Shared backend: lock is the session's record, held while a
	// call runs (nil between calls); target is the sandbox the record
	// names, which sessionSandbox attaches to when sb is nil.
	lock   backend.SessionLock
	target string
	// interrupted is the server whose call in this session was cut
	// short when it died (this server took the session over from it),
	// until a call reports it (Result.Interrupted).
	interrupted string
	// kept is the lock of the last call, still held for holdGrace after
	// it (a call that follows at once takes it over without a write);
	// releasing is closed once a release of it has been written.
	kept      backend.SessionLock
	keptTimer *time.Timer
	releasing chan struct{}
}

// sandboxDied records that sb, a sandbox of s, died outside an execute
// call (a file operation or a listing noticed it): s stops using it, and
// its state and loaded modules are gone, which the next Persistent result
// reports once as StateLost. The caller holds sessions.mu.
func (s *session) sandboxDied(sb *sandbox) {
	if s.sb == sb {
		s.sb = nil
	}
	s.lost = true
	s.imported = nil
}

// tomb remembers a session removed for expiry, so a later call gets
// ErrExpiredSession instead of ErrUnknownSession.
type tomb struct {
	owner string
	at    time.Time
}

const (
	tombTTL  = 24 * time.Hour
	maxTombs = 10000
)

// SessionInfo describes one persistent session. Expires is when the idle
// TTL or the max lifetime ends it, whichever is first (a running call is
// never cut short by the idle TTL).
type SessionInfo struct {
	ID       string    `json:"id"`
	Owner    string    `json:"owner"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	Expires  time.Time `json:"expires"`
	Busy     bool      `json:"busy"`
}

// Persistent runs code in a session's long-lived interpreter: variables,
// imports and functions persist between calls. An empty sessionID starts a
// new session (limited by sessions.max_per_owner and max_total); the
// session id is returned either way, also in Result.SessionID.
//
// Calls into one session are serialized: a concurrent call waits for the
// running one (honouring its ctx). The sandbox limits (memory, CPUs, pids)
// are fixed when the session starts; a later call may change the timeout
// but must not ask for tighter resource limits than the session has.
//
// On timeout the runner interrupts the code and the session keeps its
// state; if the code does not stop within a grace period, or the sandbox
// dies (oom, killed), the interpreter is restarted at the next call and the
// Result says StateLost. When ctx ends mid-run the code is interrupted the
// same way and ctx's error returned.
func (e *Executor) Persistent(ctx context.Context, sessionID string, req Request) (*Result, string, error) {
	lim, err := e.prepare(req, false)
	if err != nil {
		return nil, sessionID, err
	}
	return e.sessions.persistent(ctx, sessionID, req, lim)
}

// Sessions lists owner's sessions, oldest first. Safe for concurrent use.
func (e *Executor) Sessions(owner string) []SessionInfo { return e.sessions.list(owner) }

// Cleanup ends owner's session and removes its sandbox; a running call into
// it ends with status "killed". Unknown, foreign and expired ids fail like
// Persistent does.
func (e *Executor) Cleanup(ctx context.Context, owner, sessionID string) error {
	return e.sessions.cleanup(ctx, owner, sessionID)
}

// Imported reports which of modules (top-level names) the code of owner's
// session has imported since its interpreter last started, so the caller
// can tell that a newly installed version of one needs a restart. An
// unknown session has imported nothing. Safe for concurrent use.
func (e *Executor) Imported(owner, sessionID string, modules []string) []string {
	return e.sessions.imported(owner, sessionID, modules)
}

func (m *sessions) expiry(s *session) time.Time {
	return m.expiryAt(s.created, s.lastUsed)
}

// list lists owner's sessions, oldest first.
func (m *sessions) list(owner string) []SessionInfo {
	if m.shared != nil {
		out, err := m.sharedSessions(owner)
		if err == nil {
			sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
			return out
		}
		m.log.Warn("listing session records failed; listing this server's sessions only", "error", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SessionInfo
	for _, s := range m.byID {
		if s.owner != owner {
			continue
		}
		out = append(out, SessionInfo{ID: s.id, Owner: s.owner, Created: s.created, LastUsed: s.lastUsed, Expires: m.expiry(s), Busy: s.calls > 0})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// newSession reserves a session slot, or fails with ErrTooManySessions.
func (m *sessions) newSession(owner string, lim Limits) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	mine := 0
	for _, s := range m.byID {
		if s.owner == owner {
			mine++
		}
	}
	if max := m.core.config().Sessions.MaxPerOwner; max > 0 && mine >= max {
		return nil, fmt.Errorf("%w: you have %d sessions, the maximum per owner (sessions.max_per_owner); clean one up first", ErrTooManySessions, mine)
	}
	if max := m.core.config().Sessions.MaxTotal; max > 0 && len(m.byID) >= max {
		return nil, fmt.Errorf("%w: the server holds %d sessions, its maximum (sessions.max_total); try again later", ErrTooManySessions, len(m.byID))
	}
	now := time.Now()
	s := &session{id: randomHex(16), owner: owner, created: now, lastUsed: now, lim: lim, sem: make(chan struct{}, 1), calls: 1}
	m.byID[s.id] = s
	return s, nil
}

// acquire finds owner's session and takes its call token, waiting for a
// running call to end. It fails with ErrUnknownSession (also for another
// owner's session) or ErrExpiredSession.
func (m *sessions) acquire(ctx context.Context, owner, id string, progress func(string)) (*session, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	s, ok := m.byID[id]
	if !ok && m.shared != nil {
		// Started by another server (or by this one before a restart):
		// its record says what it is.
		m.mu.Unlock()
		if err := m.findShared(ctx, owner, id); err != nil {
			return nil, err
		}
		m.mu.Lock()
		s, ok = m.byID[id]
	}
	if ok && m.shared == nil && s.owner == owner && !s.closed && s.calls == 0 && m.expired(s, time.Now()) {
		m.expire(s)
		ok = false
	}
	if !ok || s.owner != owner || s.closed {
		t, dead := m.tombs[id]
		m.mu.Unlock()
		if dead && t.owner == owner {
			return nil, fmt.Errorf("%w: session %s ended at %s after its idle TTL or max lifetime; start a new session", ErrExpiredSession, id, t.at.UTC().Format(time.RFC3339))
		}
		return nil, fmt.Errorf("%w: %q (it never existed, was cleaned up, or belongs to someone else); omit the session id to start a new session", ErrUnknownSession, id)
	}
	s.calls++
	busy := s.running
	m.mu.Unlock()
	if busy && progress != nil {
		progress("waiting for the session's running call")
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		m.release(s, false)
		return nil, fmt.Errorf("waiting for session %s: %w", id, ctx.Err())
	}
	m.mu.Lock()
	closed := s.closed
	s.running = true
	m.mu.Unlock()
	if closed {
		m.release(s, true)
		return nil, fmt.Errorf("%w: %q was cleaned up while this call waited", ErrUnknownSession, id)
	}
	if m.shared != nil {
		if progress != nil {
			progress("waiting for the session's lock")
		}
		if err := m.lockShared(ctx, s); err != nil {
			m.release(s, true)
			return nil, err
		}
	}
	return s, nil
}

// release ends a call; held says whether it holds the token.
func (m *sessions) release(s *session, held bool) {
	m.mu.Lock()
	s.calls--
	s.lastUsed = time.Now()
	if held {
		s.running = false
		if lk := s.lock; lk != nil {
			s.lock = nil
			m.keepShared(s, lk)
		}
	}
	m.mu.Unlock()
	if held {
		<-s.sem
	}
}

func (m *sessions) expired(s *session, now time.Time) bool {
	exp := m.expiry(s)
	return !exp.IsZero() && now.After(exp)
}

// expire removes a session for expiry; m.mu is held. Its sandbox is
// destroyed in the background.
func (m *sessions) expire(s *session) {
	delete(m.byID, s.id)
	s.closed = true
	if len(m.tombs) >= maxTombs {
		for id := range m.tombs {
			delete(m.tombs, id)
			if len(m.tombs) < maxTombs/2 {
				break
			}
		}
	}
	m.tombs[s.id] = tomb{owner: s.owner, at: time.Now()}
	if sb := s.sb; sb != nil {
		s.sb = nil
		go m.core.destroy(sb) // removes the package volume too
	} else {
		go m.core.removeVolume(sessionVolume(s.id))
	}
}

// persistent runs one call of Executor.Persistent, whose limits lim the
// core resolved.
func (m *sessions) persistent(ctx context.Context, sessionID string, req Request, lim Limits) (*Result, string, error) {
	var s *session
	var err error
	if sessionID == "" && m.shared != nil {
		if err := m.countShared(ctx, req.Owner); err != nil {
			return nil, "", err
		}
	}
	if sessionID == "" {
		if s, err = m.newSession(req.Owner, lim); err != nil {
			return nil, "", err
		}
		s.sem <- struct{}{}
		m.mu.Lock()
		s.running = true
		m.mu.Unlock()
	} else {
		if s, err = m.acquire(ctx, req.Owner, sessionID, req.progress); err != nil {
			return nil, sessionID, err
		}
		// The session keeps the sandbox limits it started with, whatever
		// the configuration says since; a call may not ask for tighter.
		if r := req.Limits; (r.Memory > 0 && r.Memory < s.lim.Memory) || (r.CPUs > 0 && r.CPUs < s.lim.CPUs) || (r.Pids > 0 && r.Pids < s.lim.Pids) {
			m.release(s, true)
			return nil, s.id, fmt.Errorf("%w: session %s runs with memory %d bytes, %g CPUs, %d pids, fixed when it started; a call cannot tighten them (start a new session)",
				ErrLimitExceeded, s.id, s.lim.Memory, s.lim.CPUs, s.lim.Pids)
		}
		if lim.Runtime != s.lim.Runtime {
			m.release(s, true)
			return nil, s.id, fmt.Errorf("%w: session %s runs under runtime %q, fixed when it started; this call's policy names runtime %q: start a new session",
				ErrInvalidRequest, s.id, s.lim.Runtime, lim.Runtime)
		}
		lim.Memory, lim.CPUs, lim.Pids = s.lim.Memory, s.lim.CPUs, s.lim.Pids
	}
	defer m.release(s, true)
	if sessionID != "" && req.IdempotencyKey != "" {
		if err := m.claimCall(ctx, s, req.Owner, req.IdempotencyKey); err != nil {
			return nil, s.id, err
		}
	}

	if sessionID == "" {
		if sb, ok := m.core.spool().Take(limitsClass(s.lim), nil, s.owner); ok {
			m.adopt(s, sb)
		}
		if m.shared != nil {
			if err := m.recordSession(ctx, s); err != nil {
				m.mu.Lock()
				sb := s.sb
				s.sb = nil
				m.mu.Unlock()
				m.core.destroy(sb)
				m.drop(s)
				return nil, "", err
			}
		}
	}
	sb, err := m.sessionSandbox(ctx, s, req.progress, lim.Timeout)
	if err != nil {
		if sessionID == "" {
			m.drop(s)
			return nil, "", err
		}
		return nil, s.id, err
	}
	res, err := m.core.run(ctx, sb, req, lim, false, false)
	if sessionID == "" {
		m.core.spool().Answered(sb) // a new session's sandbox may come from the pool
	}
	dead := sb.dead.Load()
	m.mu.Lock()
	if dead {
		if s.sb == sb {
			s.sb = nil
		}
		s.imported = nil
	} else {
		if s.imported == nil {
			s.imported = map[string]bool{}
		}
		for _, im := range req.Imports {
			s.imported[topLevel(im.Module)] = true
		}
	}
	var lost bool
	if err != nil {
		s.lost = s.lost || dead
	} else {
		lost = s.lost || dead
		s.lost = false
	}
	m.mu.Unlock()
	if err != nil {
		return nil, s.id, err
	}
	// The runner reports a worker it restarted (a timeout or an OOM that
	// killed only the worker); the session reports a sandbox it lost.
	res.StateLost = res.StateLost || lost
	res.SessionID = s.id
	m.mu.Lock()
	res.Interrupted, s.interrupted = s.interrupted, ""
	m.mu.Unlock()
	return res, s.id, nil
}

// sessionSandbox returns the session's sandbox, starting one when there is
// none yet or the last one was killed; a start waits at most runTimeout plus
// StartAllowance. The caller holds the session token.
func (m *sessions) sessionSandbox(ctx context.Context, s *session, progress func(string), runTimeout time.Duration) (*sandbox, error) {
	m.mu.Lock()
	sb, target, lk := s.sb, s.target, s.lock
	if sb != nil && sb.shared && !sb.alive() {
		// Its stream ended between calls: another server's call may
		// have ended the sandbox, which the record may still name.
		s.sb = nil
	} else if sb != nil {
		m.mu.Unlock()
		return sb, nil
	}
	m.mu.Unlock()
	if sb != nil {
		m.core.detach(sb)
	}
	meta := sandboxMeta{Kind: backend.KindPersistent, Session: s.id, Owner: s.owner, Created: s.created, Packages: sessionVolume(s.id)}
	if m.shared != nil && target != "" {
		// The session's sandbox was started by another server, or this
		// server detached from it: attach again.
		sb, err := m.attachShared(ctx, target, meta, s.lim, runTimeout+StartAllowance)
		if err == nil {
			return m.setSessionSandbox(s, sb)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// It ended (killed, OOM, idle exit): its state is gone.
		m.log.Info("a session's sandbox is gone; starting a new one", "session", s.id, "sandbox", target, "error", err)
		m.core.removeContainer(target)
		m.mu.Lock()
		s.lost, s.imported = true, nil
		m.mu.Unlock()
	}
	if progress != nil {
		progress("starting a sandbox")
	}
	sb, err := m.core.startWithin(ctx, meta, s.lim, runTimeout)
	if err != nil {
		return nil, err
	}
	if lk != nil {
		sctx, cancel := sharedCtx()
		err := lk.SetSandbox(sctx, sb.id)
		cancel()
		if err != nil {
			m.core.destroy(sb)
			return nil, fmt.Errorf("session %s: record its new sandbox: %w", s.id, err)
		}
		sb.recorded.Store(true)
		m.mu.Lock()
		s.target = sb.id
		m.mu.Unlock()
	}
	return m.setSessionSandbox(s, sb)
}

// setSessionSandbox makes sb s's sandbox, unless s ended meanwhile.
func (m *sessions) setSessionSandbox(s *session, sb *sandbox) (*sandbox, error) {
	m.mu.Lock()
	if s.closed {
		m.mu.Unlock()
		m.core.destroy(sb)
		return nil, fmt.Errorf("%w: %q was cleaned up", ErrUnknownSession, s.id)
	}
	s.sb = sb
	m.mu.Unlock()
	return sb, nil
}

// adopt gives a new session a pooled sandbox and the session id on its
// label. The session has not been returned to anyone yet.
func (m *sessions) adopt(s *session, sb *sandbox) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byID, s.id)
	s.id = sb.meta.Session
	s.sb = sb
	m.byID[s.id] = s
	// The pool imported its preload modules into this interpreter.
	s.imported = map[string]bool{}
	for _, mod := range m.core.config().Pool.Preload {
		s.imported[topLevel(mod)] = true
	}
}

// drop forgets a session that never got a sandbox.
func (m *sessions) drop(s *session) {
	m.mu.Lock()
	delete(m.byID, s.id)
	s.closed = true
	lk := s.lock
	s.lock = nil
	m.mu.Unlock()
	if lk != nil {
		ctx, cancel := sharedCtx()
		if err := lk.Delete(ctx); err != nil {
			m.log.Warn("deleting the record of a session that did not start failed", "session", s.id, "error", err)
		}
		cancel()
	}
	m.core.removeVolume(sessionVolume(s.id)) // Docker may have created it with the sandbox
}

// cleanup ends owner's session (Executor.Cleanup).
func (m *sessions) cleanup(ctx context.Context, owner, sessionID string) error {
	if m.shared != nil {
		return m.cleanupShared(ctx, owner, sessionID)
	}
	m.mu.Lock()
	s, ok := m.byID[sessionID]
	if !ok || s.owner != owner || s.closed {
		t, dead := m.tombs[sessionID]
		m.mu.Unlock()
		if dead && t.owner == owner {
			return fmt.Errorf("%w: session %s already ended at %s", ErrExpiredSession, sessionID, t.at.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("%w: %q", ErrUnknownSession, sessionID)
	}
	delete(m.byID, sessionID)
	s.closed = true
	sb := s.sb
	s.sb = nil
	m.mu.Unlock()
	if sb != nil {
		m.core.destroy(sb) // removes the package volume too
	} else {
		m.core.removeVolume(sessionVolume(sessionID))
	}
	return nil
}

// reapEvery is how often the executor's reaper calls reap: a tenth of
// the sessions' idle TTL or max lifetime, whichever is shorter, between
// 50 ms and 30 s.
func (m *sessions) reapEvery() time.Duration {
	every := m.core.config().Sessions.IdleTTL.D() / 10
	if life := m.core.config().Sessions.MaxLifetime.D() / 10; life > 0 && (every <= 0 || life < every) {
		every = life
	}
	return min(max(every, 50*time.Millisecond), 30*time.Second)
}

// reap ends sessions past their idle TTL or max lifetime at now, and
// forgets tombstones past tombTTL. Busy sessions are left alone; they
// are judged when their call returns.
func (m *sessions) reap(now time.Time) {
	if m.shared != nil {
		m.reapShared(now)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.byID {
		if m.shared == nil && s.calls == 0 && m.expired(s, now) {
			m.expire(s)
		}
	}
	for id, tb := range m.tombs {
		if now.Sub(tb.at) > tombTTL {
			delete(m.tombs, id)
		}
	}
}

// close ends this server's part in every session (Executor.Close): calls
// after it fail with ErrClosed. The sessions' sandboxes are the core's to
// remove, or, on a Shared backend, to detach from; kept record locks are
// released now, so other servers need not wait for them to go stale.
func (m *sessions) close() {
	m.mu.Lock()
	m.closed = true
	var all []*session
	for _, s := range m.byID {
		all = append(all, s)
	}
	m.byID = map[string]*session{}
	m.mu.Unlock()
	if m.shared != nil {
		m.releaseAllKept(all)
	}
}

// count is how many sessions this server serves.
func (m *sessions) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// gone says whether no live session uses a persistent sandbox's package
// volume any more.
func (m *sessions) gone(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	return !ok || s.closed
}

// installed is how many packages were installed into owner's session id;
// unknown and foreign sessions fail with ErrUnknownSession.
func (m *sessions) installed(owner, id string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if !ok || s.owner != owner || s.closed {
		return 0, fmt.Errorf("%w: %q", ErrUnknownSession, id)
	}
	return len(s.packages), nil
}

// addPackage records a requirement installed into s.
func (m *sessions) addPackage(s *session, req string) {
	m.mu.Lock()
	s.packages = append(s.packages, req)
	m.mu.Unlock()
}

func topLevel(module string) string {
	top, _, _ := strings.Cut(module, ".")
	return top
}

// imported is Executor.Imported.
func (m *sessions) imported(owner, sessionID string, modules []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[sessionID]
	if !ok || s.owner != owner {
		return nil
	}
	var out []string
	for _, mod := range modules {
		if s.imported[topLevel(mod)] {
			out = append(out, mod)
		}
	}
	return out
}
