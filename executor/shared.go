package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Sessions on a Shared backend (Kubernetes) belong to no one server: their
// record in the backend (backend.SessionRecord) says who owns each, when it
// was last used and which sandbox holds its interpreter, and every call
// takes the record's lock for its duration, so one server at a time talks
// to the sandbox. Any server can then serve any session: the first call a
// server gets for a session it does not know finds the record, attaches to
// the sandbox (backend.Shared.Attach) and pings it; later calls reuse that
// attach stream, whose replies to other servers' requests are skipped by
// nonce. A session's sandbox outlives the server that started it (it is
// Detachable, and its runner ends itself after idleExit without a
// request); sessions expire by their record, whichever server's reaper
// sees that first; a server that closes detaches from them.

// idleExit is how long a shared session sandbox's runner waits for a
// request before it ends itself: past the session's idle TTL or max
// lifetime (by then a reaper has removed it) plus a margin, so that it
// does not outlive every server by long. Zero (sessions never expire)
// disables it.
func (c *Config) idleExit() time.Duration {
	d := c.Sessions.IdleTTL.D()
	if life := c.Sessions.MaxLifetime.D(); life > 0 && (d <= 0 || life < d) {
		d = life
	}
	if d <= 0 {
		return 0
	}
	return d + 2*time.Minute
}

// maxReplyLimit is the largest reply any request may get: what a shared
// sandbox's reader accepts, since it reads other servers' replies too.
func (c *Config) maxReplyLimit() int64 {
	return max(c.runReplyLimit(), c.readReplyLimit(), int64(listReplyLimit), int64(preloadReplyLimit), int64(idleFrameLimit))
}

// Meta keys of a session record.
const (
	metaMemory = "memory"
	metaCPUs   = "cpus"
	metaPids   = "pids"
	// metaRuntime is the session's runtime; absent: docker.runtime.
	metaRuntime = "runtime"
	// metaCall is the last keyed call that began in the session (callHash
	// of its owner and idempotency key); metaInterrupted is set to the same
	// value by the server that took the session over from one that died
	// while that call ran.
	metaCall        = "call"
	metaInterrupted = "call-interrupted"
)

// callHash names a keyed call in a session record: the key is the
// client's, so it is hashed with its owner, never stored.
func callHash(owner, key string) string {
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// claimCall records that the call with this idempotency key begins in
// s, whose lock the caller holds, unless the record says an attempt of it
// began already: then the call is not run again (ErrAlreadyRan, or
// ErrOutcomeUnknown when the server that ran it died mid-call). Only on
// shared sessions; nil elsewhere.
func (m *sessions) claimCall(ctx context.Context, s *session, owner, key string) error {
	m.mu.Lock()
	lk := s.lock
	m.mu.Unlock()
	if m.shared == nil || lk == nil {
		return nil
	}
	h := callHash(owner, key)
	rec := lk.Record()
	if rec.Meta[metaCall] == h {
		if rec.Meta[metaInterrupted] == h {
			return fmt.Errorf("%w: an earlier attempt of this call (the same idempotency key) began in session %s on another server, which stopped before it answered; it may have run, in whole or in part, and is not run again: check the session's state (its variables and files), and send the call with a new idempotency key to run it anyway", ErrOutcomeUnknown, s.id)
		}
		return fmt.Errorf("%w: an earlier attempt of this call (the same idempotency key) ran in session %s and was answered by the server that ran it, which alone keeps its result (for 10 minutes); it is not run again: check the session's state, or send the call with a new idempotency key to run it anyway", ErrAlreadyRan, s.id)
	}
	if err := lk.SetMeta(ctx, map[string]string{metaCall: h, metaInterrupted: ""}); err != nil {
		return fmt.Errorf("session %s: record the call's idempotency key: %w", s.id, err)
	}
	return nil
}

func limitsMeta(l Limits) map[string]string {
	return map[string]string{
		metaMemory:  strconv.FormatInt(l.Memory, 10),
		metaCPUs:    strconv.FormatFloat(l.CPUs, 'g', -1, 64),
		metaPids:    strconv.FormatInt(l.Pids, 10),
		metaRuntime: l.Runtime,
	}
}

// recordLimits reads a record's limits; missing ones take the configured
// defaults.
func (m *sessions) recordLimits(meta map[string]string) Limits {
	lim, _ := resolveLimits(m.core.config().Docker, Limits{})
	if v, err := strconv.ParseInt(meta[metaMemory], 10, 64); err == nil && v > 0 {
		lim.Memory = v
	}
	if v, err := strconv.ParseFloat(meta[metaCPUs], 64); err == nil && v > 0 {
		lim.CPUs = v
	}
	if v, err := strconv.ParseInt(meta[metaPids], 10, 64); err == nil && v > 0 {
		lim.Pids = v
	}
	if v, ok := meta[metaRuntime]; ok {
		lim.Runtime = v
	}
	return lim
}

// expiryAt is when a session created and last used at these times ends
// (zero: never).
func (m *sessions) expiryAt(created, lastUsed time.Time) time.Time {
	exp := time.Time{}
	if ttl := m.core.config().Sessions.IdleTTL.D(); ttl > 0 {
		exp = lastUsed.Add(ttl)
	}
	if life := m.core.config().Sessions.MaxLifetime.D(); life > 0 {
		if end := created.Add(life); exp.IsZero() || end.Before(exp) {
			exp = end
		}
	}
	return exp
}

func (m *sessions) recordExpired(r backend.SessionRecord, now time.Time) bool {
	exp := m.expiryAt(r.Created, r.LastUsed)
	return !exp.IsZero() && now.After(exp)
}

// sharedCtx bounds a record operation that runs after the caller's
// context may have ended.
func sharedCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 15*time.Second)
}

// countShared checks sessions.max_per_owner and max_total against the
// records of every server.
func (m *sessions) countShared(ctx context.Context, owner string) error {
	if m.core.config().Sessions.MaxPerOwner <= 0 && m.core.config().Sessions.MaxTotal <= 0 {
		return nil
	}
	recs, err := m.shared.Sessions(ctx, "")
	if err != nil {
		return fmt.Errorf("count sessions: %w", err)
	}
	mine := 0
	for _, r := range recs {
		if r.Owner == owner {
			mine++
		}
	}
	if max := m.core.config().Sessions.MaxPerOwner; max > 0 && mine >= max {
		return fmt.Errorf("%w: you have %d sessions, the maximum per owner (sessions.max_per_owner); clean one up first", ErrTooManySessions, mine)
	}
	if max := m.core.config().Sessions.MaxTotal; max > 0 && len(recs) >= max {
		return fmt.Errorf("%w: the servers hold %d sessions, their maximum (sessions.max_total); try again later", ErrTooManySessions, len(recs))
	}
	return nil
}

// recordSession stores a new session's record, held by this server for
// the call that starts it.
func (m *sessions) recordSession(ctx context.Context, s *session) error {
	m.mu.Lock()
	rec := backend.SessionRecord{ID: s.id, Owner: s.owner, Created: s.created, LastUsed: s.lastUsed, Meta: limitsMeta(s.lim)}
	if s.sb != nil {
		rec.Sandbox = s.sb.id
		s.target = s.sb.id
		s.sb.recorded.Store(true)
	}
	m.mu.Unlock()
	lk, err := m.shared.CreateSession(ctx, rec, m.instance)
	if err != nil {
		return fmt.Errorf("record the session: %w", err)
	}
	m.mu.Lock()
	s.lock = lk
	m.mu.Unlock()
	return nil
}

// record finds the record of owner's session id among owner's records.
func (m *sessions) record(ctx context.Context, owner, id string) (backend.SessionRecord, bool, error) {
	recs, err := m.shared.Sessions(ctx, owner)
	if err != nil {
		return backend.SessionRecord{}, false, err
	}
	for _, r := range recs {
		if r.ID == id && r.Owner == owner {
			return r, true, nil
		}
	}
	return backend.SessionRecord{}, false, nil
}

// findShared makes a local session of the record of owner's session id,
// which another server started. It fails like acquire for unknown and
// foreign ids.
func (m *sessions) findShared(ctx context.Context, owner, id string) error {
	r, found, err := m.record(ctx, owner, id)
	if err != nil {
		return fmt.Errorf("find session %s: %w", id, err)
	}
	if found {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			return ErrClosed
		}
		if _, ok := m.byID[id]; !ok {
			m.byID[id] = &session{id: id, owner: owner, created: r.Created, lastUsed: r.LastUsed,
				lim: m.recordLimits(r.Meta), sem: make(chan struct{}, 1), target: r.Sandbox}
		}
		return nil
	}
	return fmt.Errorf("%w: %q (it never existed, ended, or belongs to someone else); omit the session id to start a new session", ErrUnknownSession, id)
}

// holdGrace is how long a server keeps a session's lock after a call
// before it releases it: a call that follows at once (a client's tight
// loop) takes it over without writing to the backend, while another
// server waits at most this much longer for it.
var holdGrace = 10 * time.Millisecond

// keepShared keeps the lock of a call that ended for holdGrace, then
// releases it in the background. m.mu is held.
func (m *sessions) keepShared(s *session, lk backend.SessionLock) {
	s.kept = lk
	s.keptTimer = time.AfterFunc(holdGrace, func() { m.releaseKept(s, lk) })
}

// releaseKept releases lk if it is still s's kept lock.
func (m *sessions) releaseKept(s *session, lk backend.SessionLock) {
	m.mu.Lock()
	if s.kept != lk {
		m.mu.Unlock()
		return
	}
	s.kept, s.keptTimer = nil, nil
	done := make(chan struct{})
	s.releasing = done
	m.mu.Unlock()
	m.unlockShared(s, lk)
	close(done)
}

// releaseAllKept releases every kept lock now (Close: other servers must
// not wait for this one's holds to go stale).
func (m *sessions) releaseAllKept(sessions []*session) {
	for _, s := range sessions {
		m.mu.Lock()
		lk, t, rel := s.kept, s.keptTimer, s.releasing
		s.kept, s.keptTimer = nil, nil
		m.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		if lk != nil {
			m.unlockShared(s, lk)
		}
		if rel != nil {
			<-rel
		}
	}
}

// lockShared takes s's record for the call that holds s's token. A record
// gone (cleaned up or expired by any server) ends s here too; one past its
// expiry is ended now. A record naming another sandbox than the one this
// server is attached to (another server restarted the interpreter) makes
// sessionSandbox attach to that one.
func (m *sessions) lockShared(ctx context.Context, s *session) error {
	m.mu.Lock()
	if lk := s.kept; lk != nil {
		// The last call's lock, not released yet: go on holding it.
		s.kept = nil
		s.keptTimer.Stop()
		s.keptTimer = nil
		s.lock = lk
		m.mu.Unlock()
		return nil
	}
	rel := s.releasing
	m.mu.Unlock()
	if rel != nil {
		select { // the release in flight comes first
		case <-rel:
		case <-ctx.Done():
			return fmt.Errorf("session %s: %w", s.id, ctx.Err())
		}
	}
	lk, err := m.shared.LockSession(ctx, s.id, m.instance)
	if errors.Is(err, backend.ErrNotFound) {
		m.forget(s)
		return fmt.Errorf("%w: %q ended (cleaned up, or expired after its idle TTL or max lifetime); omit the session id to start a new session", ErrUnknownSession, s.id)
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	rec := lk.Record()
	if rec.TakenOver != "" {
		m.log.Warn("took over a session from a server that stopped mid-call (its hold went stale); that call may have run", "session", s.id, "server", rec.TakenOver)
		m.mu.Lock()
		s.interrupted = rec.TakenOver
		m.mu.Unlock()
		if c := rec.Meta[metaCall]; c != "" && rec.Meta[metaInterrupted] != c {
			// A retry of that call with its key learns it may have run.
			if err := lk.SetMeta(ctx, map[string]string{metaInterrupted: c}); err != nil {
				m.log.Warn("recording the interrupted call in the session's record failed", "session", s.id, "error", err)
			}
		}
	}
	if m.recordExpired(rec, time.Now()) {
		m.endShared(s, lk, rec)
		return fmt.Errorf("%w: session %s ended at %s after its idle TTL or max lifetime; start a new session", ErrExpiredSession, s.id, m.expiryAt(rec.Created, rec.LastUsed).UTC().Format(time.RFC3339))
	}
	m.mu.Lock()
	s.lock = lk
	s.target = rec.Sandbox
	var old *sandbox
	if s.sb != nil && s.sb.id != rec.Sandbox {
		old, s.sb = s.sb, nil
	}
	m.mu.Unlock()
	if old != nil {
		m.core.detach(old)
	}
	return nil
}

// unlockShared releases the record a call held.
func (m *sessions) unlockShared(s *session, lk backend.SessionLock) {
	ctx, cancel := sharedCtx()
	defer cancel()
	if err := lk.Release(ctx); err != nil {
		m.log.Warn("releasing a session's lock failed; it goes stale by itself", "session", s.id, "error", err)
	}
}

// forget drops this server's view of a session that ended elsewhere,
// detaching from its sandbox.
func (m *sessions) forget(s *session) {
	m.mu.Lock()
	if m.byID[s.id] == s {
		delete(m.byID, s.id)
	}
	s.closed = true
	sb := s.sb
	s.sb = nil
	m.mu.Unlock()
	m.dropKept(s)
	if sb != nil {
		m.core.detach(sb)
	}
}

// dropKept ends the kept lock of a session whose record is gone.
func (m *sessions) dropKept(s *session) {
	m.mu.Lock()
	lk, t := s.kept, s.keptTimer
	s.kept, s.keptTimer = nil, nil
	m.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if lk != nil {
		ctx, cancel := sharedCtx()
		lk.Delete(ctx) // stops its renewal; the record is gone already
		cancel()
	}
}

// endShared ends an expired session whose record lk holds: its sandbox
// and record go, and this server remembers it as expired.
func (m *sessions) endShared(s *session, lk backend.SessionLock, rec backend.SessionRecord) {
	ctx, cancel := sharedCtx()
	defer cancel()
	if rec.Sandbox != "" {
		m.core.removeContainer(rec.Sandbox)
	}
	if err := lk.Delete(ctx); err != nil {
		m.log.Warn("deleting an expired session's record failed", "session", rec.ID, "error", err)
	}
	m.mu.Lock()
	m.tombs[rec.ID] = tomb{owner: rec.Owner, at: time.Now()}
	m.mu.Unlock()
	if s != nil {
		m.forget(s)
	}
}

// attachShared attaches to a session's running sandbox that this server
// did not start, and pings its runner until it answers (the stream is
// then known to carry both ways). It waits at most budget (the runner
// may first finish a call of a server that died).
func (m *sessions) attachShared(ctx context.Context, id string, meta sandboxMeta, lim Limits, budget time.Duration) (*sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	box, err := m.shared.Attach(ctx, id)
	if err != nil {
		return nil, err
	}
	sb := m.core.wrap(box, meta, lim, true, false)
	sb.recorded.Store(true)
	if !m.core.track(sb) {
		box.Close()
		return nil, ErrClosed
	}
	if err := ping(ctx, sb); err != nil {
		m.core.detach(sb)
		return nil, err
	}
	return sb, nil
}

// pingEvery is how often ping asks again: the first request on a new
// attach stream can reach the runner before the stream carries its reply.
const pingEvery = 250 * time.Millisecond

// ping sends ping requests until one is answered or ctx ends.
func ping(ctx context.Context, sb *sandbox) error {
	sb.waiting.Store(true)
	defer sb.waiting.Store(false)
	sent := map[string]bool{}
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	send := func() error {
		sb.nextID++
		nonce := randomHex(16)
		sent[nonce] = true
		return protocol.WriteRequest(sb.box.Stdin, &protocol.Ping{Header: protocol.Header{ID: sb.nextID, Nonce: nonce}})
	}
	if err := send(); err != nil {
		return fmt.Errorf("ping sandbox %s: %w", sb.id, err)
	}
	for {
		select {
		case f, ok := <-sb.frames:
			if !ok || f.err != nil {
				err := errors.New("the stream ended")
				if ok {
					err = f.err
				}
				return fmt.Errorf("ping sandbox %s: %w: %v", sb.id, backend.ErrNotFound, err)
			}
			for n := range sent {
				if protocol.NonceIs(f.data, n) {
					return nil
				}
			}
		case <-tick.C:
			if err := send(); err != nil {
				return fmt.Errorf("ping sandbox %s: %w", sb.id, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("ping sandbox %s: no answer: %w", sb.id, ctx.Err())
		}
	}
}

// reapShared ends the sessions whose records are past their expiry and
// not held, whichever server started them, and drops this server's view
// of sessions whose record is gone.
func (m *sessions) reapShared(now time.Time) {
	ctx, cancel := sharedCtx()
	defer cancel()
	recs, err := m.shared.Sessions(ctx, "")
	if err != nil {
		m.log.Warn("listing session records failed", "error", err)
		return
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.ID] = true
		if r.Held(now) || !m.recordExpired(r, now) {
			continue
		}
		lctx, lcancel := context.WithTimeout(ctx, time.Second)
		lk, err := m.shared.LockSession(lctx, r.ID, m.instance)
		lcancel()
		if err != nil {
			continue // taken meanwhile, or gone
		}
		rec := lk.Record()
		if !m.recordExpired(rec, time.Now()) {
			lk.Release(ctx)
			continue
		}
		m.mu.Lock()
		s := m.byID[rec.ID]
		m.mu.Unlock()
		m.endShared(s, lk, rec)
	}
	m.mu.Lock()
	var gone []*session
	for id, s := range m.byID {
		if !known[id] && s.calls == 0 && s.created.Before(now) {
			gone = append(gone, s)
		}
	}
	m.mu.Unlock()
	for _, s := range gone {
		m.forget(s)
	}
}

// cleanupShared ends owner's session for every server: its record and
// sandbox go at once, also while another server runs a call in it (that
// call ends with status killed).
func (m *sessions) cleanupShared(ctx context.Context, owner, id string) error {
	m.mu.Lock()
	t, dead := m.tombs[id]
	m.mu.Unlock()
	r, found, err := m.record(ctx, owner, id)
	if err != nil {
		return fmt.Errorf("cleanup session %s: %w", id, err)
	}
	if found {
		if err := m.shared.DeleteSession(ctx, id); err != nil {
			return fmt.Errorf("cleanup session %s: %w", id, err)
		}
		m.mu.Lock()
		s := m.byID[id]
		var sb *sandbox
		if s != nil {
			delete(m.byID, id)
			s.closed = true
			sb, s.sb = s.sb, nil
		}
		m.mu.Unlock()
		if s != nil {
			m.dropKept(s)
		}
		if sb != nil {
			m.core.destroy(sb)
		}
		if r.Sandbox != "" && (sb == nil || sb.id != r.Sandbox) {
			m.core.removeContainer(r.Sandbox)
		}
		return nil
	}
	if dead && t.owner == owner {
		return fmt.Errorf("%w: session %s already ended at %s", ErrExpiredSession, id, t.at.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: %q", ErrUnknownSession, id)
}

// sharedSessions lists owner's sessions from their records.
func (m *sessions) sharedSessions(owner string) ([]SessionInfo, error) {
	ctx, cancel := sharedCtx()
	defer cancel()
	recs, err := m.shared.Sessions(ctx, owner)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]SessionInfo, 0, len(recs))
	for _, r := range recs {
		if m.recordExpired(r, now) && !r.Held(now) {
			continue // ended; the next reaper pass removes it
		}
		out = append(out, SessionInfo{ID: r.ID, Owner: r.Owner, Created: r.Created, LastUsed: r.LastUsed,
			Expires: m.expiryAt(r.Created, r.LastUsed), Busy: r.Held(now)})
	}
	return out, nil
}

// recorded are the sandboxes that session records name (none without a
// Shared backend): they outlive the server that started them, and the
// records' expiry decides their end.
func (m *sessions) recorded(ctx context.Context) (map[string]bool, error) {
	named := map[string]bool{}
	if m.shared == nil {
		return named, nil
	}
	recs, err := m.shared.Sessions(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list session records: %w", err)
	}
	for _, r := range recs {
		named[r.Sandbox] = true
	}
	return named, nil
}
