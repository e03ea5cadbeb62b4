package executor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// session is one persistent sandbox. Calls are serialized by sem: a second
// concurrent call waits (honouring its ctx) until the first returns.
type session struct {
	id      string
	owner   string
	created time.Time
	lim     Limits // fixed at creation

	sem chan struct{} // one token: held by the running call

	// guarded by Executor.mu
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
// reports once as StateLost. The caller holds Executor.mu.
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

// FileInfo is one entry of ListFiles; Path is relative to the working dir.
type FileInfo struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Dir     bool      `json:"dir"`
	ModTime time.Time `json:"mod_time"`
}

func (e *Executor) expiry(s *session) time.Time {
	return e.expiryAt(s.created, s.lastUsed)
}

// Sessions lists owner's sessions, oldest first. Safe for concurrent use.
func (e *Executor) Sessions(owner string) []SessionInfo {
	if e.shared != nil {
		out, err := e.sharedSessions(owner)
		if err == nil {
			sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
			return out
		}
		e.log.Warn("listing session records failed; listing this server's sessions only", "error", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []SessionInfo
	for _, s := range e.sessions {
		if s.owner != owner {
			continue
		}
		out = append(out, SessionInfo{ID: s.id, Owner: s.owner, Created: s.created, LastUsed: s.lastUsed, Expires: e.expiry(s), Busy: s.calls > 0})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// newSession reserves a session slot, or fails with ErrTooManySessions.
func (e *Executor) newSession(owner string, lim Limits) (*session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	mine := 0
	for _, s := range e.sessions {
		if s.owner == owner {
			mine++
		}
	}
	if max := e.config().Sessions.MaxPerOwner; max > 0 && mine >= max {
		return nil, fmt.Errorf("%w: you have %d sessions, the maximum per owner (sessions.max_per_owner); clean one up first", ErrTooManySessions, mine)
	}
	if max := e.config().Sessions.MaxTotal; max > 0 && len(e.sessions) >= max {
		return nil, fmt.Errorf("%w: the server holds %d sessions, its maximum (sessions.max_total); try again later", ErrTooManySessions, len(e.sessions))
	}
	now := time.Now()
	s := &session{id: randomHex(16), owner: owner, created: now, lastUsed: now, lim: lim, sem: make(chan struct{}, 1), calls: 1}
	e.sessions[s.id] = s
	return s, nil
}

// acquire finds owner's session and takes its call token, waiting for a
// running call to end. It fails with ErrUnknownSession (also for another
// owner's session) or ErrExpiredSession.
func (e *Executor) acquire(ctx context.Context, owner, id string, progress func(string)) (*session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	s, ok := e.sessions[id]
	if !ok && e.shared != nil {
		// Started by another server (or by this one before a restart):
		// its record says what it is.
		e.mu.Unlock()
		if err := e.findShared(ctx, owner, id); err != nil {
			return nil, err
		}
		e.mu.Lock()
		s, ok = e.sessions[id]
	}
	if ok && e.shared == nil && s.owner == owner && !s.closed && s.calls == 0 && e.expired(s, time.Now()) {
		e.expire(s)
		ok = false
	}
	if !ok || s.owner != owner || s.closed {
		t, dead := e.tombs[id]
		e.mu.Unlock()
		if dead && t.owner == owner {
			return nil, fmt.Errorf("%w: session %s ended at %s after its idle TTL or max lifetime; start a new session", ErrExpiredSession, id, t.at.UTC().Format(time.RFC3339))
		}
		return nil, fmt.Errorf("%w: %q (it never existed, was cleaned up, or belongs to someone else); omit the session id to start a new session", ErrUnknownSession, id)
	}
	s.calls++
	busy := s.running
	e.mu.Unlock()
	if busy && progress != nil {
		progress("waiting for the session's running call")
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		e.release(s, false)
		return nil, fmt.Errorf("waiting for session %s: %w", id, ctx.Err())
	}
	e.mu.Lock()
	closed := s.closed
	s.running = true
	e.mu.Unlock()
	if closed {
		e.release(s, true)
		return nil, fmt.Errorf("%w: %q was cleaned up while this call waited", ErrUnknownSession, id)
	}
	if e.shared != nil {
		if progress != nil {
			progress("waiting for the session's lock")
		}
		if err := e.lockShared(ctx, s); err != nil {
			e.release(s, true)
			return nil, err
		}
	}
	return s, nil
}

// release ends a call; held says whether it holds the token.
func (e *Executor) release(s *session, held bool) {
	e.mu.Lock()
	s.calls--
	s.lastUsed = time.Now()
	if held {
		s.running = false
		if lk := s.lock; lk != nil {
			s.lock = nil
			e.keepShared(s, lk)
		}
	}
	e.mu.Unlock()
	if held {
		<-s.sem
	}
}

func (e *Executor) expired(s *session, now time.Time) bool {
	exp := e.expiry(s)
	return !exp.IsZero() && now.After(exp)
}

// expire removes a session for expiry; e.mu is held. Its sandbox is
// destroyed in the background.
func (e *Executor) expire(s *session) {
	delete(e.sessions, s.id)
	s.closed = true
	if len(e.tombs) >= maxTombs {
		for id := range e.tombs {
			delete(e.tombs, id)
			if len(e.tombs) < maxTombs/2 {
				break
			}
		}
	}
	e.tombs[s.id] = tomb{owner: s.owner, at: time.Now()}
	if sb := s.sb; sb != nil {
		s.sb = nil
		go e.destroy(sb) // removes the package volume too
	} else {
		go e.removeVolume(sessionVolume(s.id))
	}
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
	var s *session
	if sessionID == "" && e.shared != nil {
		if err := e.countShared(ctx, req.Owner); err != nil {
			return nil, "", err
		}
	}
	if sessionID == "" {
		if s, err = e.newSession(req.Owner, lim); err != nil {
			return nil, "", err
		}
		s.sem <- struct{}{}
		e.mu.Lock()
		s.running = true
		e.mu.Unlock()
	} else {
		if s, err = e.acquire(ctx, req.Owner, sessionID, req.progress); err != nil {
			return nil, sessionID, err
		}
		// The session keeps the sandbox limits it started with, whatever
		// the configuration says since; a call may not ask for tighter.
		if r := req.Limits; (r.Memory > 0 && r.Memory < s.lim.Memory) || (r.CPUs > 0 && r.CPUs < s.lim.CPUs) || (r.Pids > 0 && r.Pids < s.lim.Pids) {
			e.release(s, true)
			return nil, s.id, fmt.Errorf("%w: session %s runs with memory %d bytes, %g CPUs, %d pids, fixed when it started; a call cannot tighten them (start a new session)",
				ErrLimitExceeded, s.id, s.lim.Memory, s.lim.CPUs, s.lim.Pids)
		}
		if lim.Runtime != s.lim.Runtime {
			e.release(s, true)
			return nil, s.id, fmt.Errorf("%w: session %s runs under runtime %q, fixed when it started; this call's policy names runtime %q: start a new session",
				ErrInvalidRequest, s.id, s.lim.Runtime, lim.Runtime)
		}
		lim.Memory, lim.CPUs, lim.Pids = s.lim.Memory, s.lim.CPUs, s.lim.Pids
	}
	defer e.release(s, true)
	if sessionID != "" && req.IdempotencyKey != "" {
		if err := e.claimCall(ctx, s, req.Owner, req.IdempotencyKey); err != nil {
			return nil, s.id, err
		}
	}

	if sessionID == "" {
		if sb := e.spool().take(s.lim, nil, s.owner); sb != nil {
			e.adopt(s, sb)
		}
		if e.shared != nil {
			if err := e.recordSession(ctx, s); err != nil {
				e.mu.Lock()
				sb := s.sb
				s.sb = nil
				e.mu.Unlock()
				e.destroy(sb)
				e.drop(s)
				return nil, "", err
			}
		}
	}
	sb, err := e.sessionSandbox(ctx, s, req.progress, lim.Timeout)
	if err != nil {
		if sessionID == "" {
			e.drop(s)
			return nil, "", err
		}
		return nil, s.id, err
	}
	res, err := e.run(ctx, sb, req, lim, false, false)
	if sessionID == "" {
		e.spool().answered(sb) // a new session's sandbox may come from the pool
	}
	dead := sb.dead.Load()
	e.mu.Lock()
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
	e.mu.Unlock()
	if err != nil {
		return nil, s.id, err
	}
	// The runner reports a worker it restarted (a timeout or an OOM that
	// killed only the worker); the session reports a sandbox it lost.
	res.StateLost = res.StateLost || lost
	res.SessionID = s.id
	e.mu.Lock()
	res.Interrupted, s.interrupted = s.interrupted, ""
	e.mu.Unlock()
	return res, s.id, nil
}

// sessionSandbox returns the session's sandbox, starting one when there is
// none yet or the last one was killed; a start waits at most runTimeout plus
// StartAllowance. The caller holds the session token.
func (e *Executor) sessionSandbox(ctx context.Context, s *session, progress func(string), runTimeout time.Duration) (*sandbox, error) {
	e.mu.Lock()
	sb, target, lk := s.sb, s.target, s.lock
	if sb != nil && sb.shared && !sb.alive() {
		// Its stream ended between calls: another server's call may
		// have ended the sandbox, which the record may still name.
		s.sb = nil
	} else if sb != nil {
		e.mu.Unlock()
		return sb, nil
	}
	e.mu.Unlock()
	if sb != nil {
		e.detach(sb)
	}
	meta := sandboxMeta{Kind: KindPersistent, Session: s.id, Owner: s.owner, Created: s.created, Packages: sessionVolume(s.id)}
	if e.shared != nil && target != "" {
		// The session's sandbox was started by another server, or this
		// server detached from it: attach again.
		sb, err := e.attachShared(ctx, target, meta, s.lim, runTimeout+StartAllowance)
		if err == nil {
			return e.setSessionSandbox(s, sb)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// It ended (killed, OOM, idle exit): its state is gone.
		e.log.Info("a session's sandbox is gone; starting a new one", "session", s.id, "sandbox", target, "error", err)
		e.removeContainer(target)
		e.mu.Lock()
		s.lost, s.imported = true, nil
		e.mu.Unlock()
	}
	if progress != nil {
		progress("starting a sandbox")
	}
	sb, err := e.startWithin(ctx, meta, s.lim, runTimeout)
	if err != nil {
		return nil, err
	}
	if lk != nil {
		sctx, cancel := sharedCtx()
		err := lk.SetSandbox(sctx, sb.id)
		cancel()
		if err != nil {
			e.destroy(sb)
			return nil, fmt.Errorf("session %s: record its new sandbox: %w", s.id, err)
		}
		sb.recorded.Store(true)
		e.mu.Lock()
		s.target = sb.id
		e.mu.Unlock()
	}
	return e.setSessionSandbox(s, sb)
}

// setSessionSandbox makes sb s's sandbox, unless s ended meanwhile.
func (e *Executor) setSessionSandbox(s *session, sb *sandbox) (*sandbox, error) {
	e.mu.Lock()
	if s.closed {
		e.mu.Unlock()
		e.destroy(sb)
		return nil, fmt.Errorf("%w: %q was cleaned up", ErrUnknownSession, s.id)
	}
	s.sb = sb
	e.mu.Unlock()
	return sb, nil
}

// adopt gives a new session a pooled sandbox and the session id on its
// label. The session has not been returned to anyone yet.
func (e *Executor) adopt(s *session, sb *sandbox) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sessions, s.id)
	s.id = sb.meta.Session
	s.sb = sb
	e.sessions[s.id] = s
	// The pool imported its preload modules into this interpreter.
	s.imported = map[string]bool{}
	for _, m := range e.config().Pool.Preload {
		s.imported[topLevel(m)] = true
	}
}

// drop forgets a session that never got a sandbox.
func (e *Executor) drop(s *session) {
	e.mu.Lock()
	delete(e.sessions, s.id)
	s.closed = true
	lk := s.lock
	s.lock = nil
	e.mu.Unlock()
	if lk != nil {
		ctx, cancel := sharedCtx()
		if err := lk.Delete(ctx); err != nil {
			e.log.Warn("deleting the record of a session that did not start failed", "session", s.id, "error", err)
		}
		cancel()
	}
	e.removeVolume(sessionVolume(s.id)) // Docker may have created it with the sandbox
}

// Cleanup ends owner's session and removes its sandbox; a running call into
// it ends with status "killed". Unknown, foreign and expired ids fail like
// Persistent does.
func (e *Executor) Cleanup(ctx context.Context, owner, sessionID string) error {
	if e.shared != nil {
		return e.cleanupShared(ctx, owner, sessionID)
	}
	e.mu.Lock()
	s, ok := e.sessions[sessionID]
	if !ok || s.owner != owner || s.closed {
		t, dead := e.tombs[sessionID]
		e.mu.Unlock()
		if dead && t.owner == owner {
			return fmt.Errorf("%w: session %s already ended at %s", ErrExpiredSession, sessionID, t.at.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("%w: %q", ErrUnknownSession, sessionID)
	}
	delete(e.sessions, sessionID)
	s.closed = true
	sb := s.sb
	s.sb = nil
	e.mu.Unlock()
	if sb != nil {
		e.destroy(sb) // removes the package volume too
	} else {
		e.removeVolume(sessionVolume(sessionID))
	}
	return nil
}

// reaper ends sessions past their idle TTL or max lifetime. Busy sessions
// are left alone; they are judged when their call returns.
func (e *Executor) reaper() {
	defer close(e.done)
	every := e.config().Sessions.IdleTTL.D() / 10
	if life := e.config().Sessions.MaxLifetime.D() / 10; life > 0 && (every <= 0 || life < every) {
		every = life
	}
	every = min(max(every, 50*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			if e.shared != nil {
				e.reapShared(now)
			}
			if e.warm != nil {
				e.warm.expire()
			}
			e.mu.Lock()
			for _, s := range e.sessions {
				if e.shared == nil && s.calls == 0 && e.expired(s, now) {
					e.expire(s)
				}
			}
			for id, tb := range e.tombs {
				if now.Sub(tb.at) > tombTTL {
					delete(e.tombs, id)
				}
			}
			retry := len(e.unremoved) > 0
			e.mu.Unlock()
			if retry {
				e.retryRemovals()
			}
		}
	}
}

// fileOp runs one file operation in owner's session, starting its sandbox
// again if it was killed.
func (e *Executor) fileOp(ctx context.Context, owner, sessionID string, frame protocol.Request) (*runnerResponse, error) {
	s, err := e.acquire(ctx, owner, sessionID, nil)
	if err != nil {
		return nil, err
	}
	defer e.release(s, true)
	sb, err := e.sessionSandbox(ctx, s, nil, fileOpTimeout)
	if err != nil {
		return nil, err
	}
	limit := int64(idleFrameLimit)
	switch frame.Head().Op {
	case protocol.OpRead:
		limit = e.readReplyLimit()
	case protocol.OpList:
		limit = listReplyLimit
	}
	resp, fail, err := e.roundTrip(ctx, sb, frame, fileOpTimeout, false, limit)
	if sb.dead.Load() {
		e.mu.Lock()
		s.sandboxDied(sb)
		e.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if fail != nil {
		if sb.dead.Load() {
			return nil, fmt.Errorf("session %s: its sandbox had stopped (%s), so its variables and files are gone; try again: a fresh sandbox starts, and the next execute-persistent result says state_lost", sessionID, fail.reason)
		}
		return nil, fmt.Errorf("session %s: %s", sessionID, fail.reason)
	}
	return resp, errorOf(resp)
}

func (e *Executor) readCap() int64  { return e.config().FileLimits().ReadChunk }
func (e *Executor) writeCap() int64 { return e.config().FileLimits().WriteChunk }
func (e *Executor) fileCap() int64  { return e.config().FileLimits().File }

// FileLimits are the sizes that bound moving a session file in and out.
type FileLimits struct {
	// ReadChunk is the most one ReadFileAt returns, and the largest file
	// ReadFile returns whole: outputs.max_stream_bytes (at least
	// limits.max_output_bytes).
	ReadChunk int64
	// WriteChunk is the most one WriteFile or AppendFile takes:
	// limits.max_code_bytes, at least 1 MiB.
	WriteChunk int64
	// File is the largest file ReadFileAt reads and WriteFile or
	// AppendFile make: limits.max_file_bytes (64 MiB when unset).
	File int64
	// Workspace is the working directory's tmpfs size
	// (docker.workspace_size); every file in it counts.
	Workspace int64
}

// FileLimits are the limits of file operations under c.
func (c Config) FileLimits() FileLimits {
	out := int64(c.Limits.MaxOutputBytes)
	if out <= 0 {
		out = 1 << 20
	}
	file := int64(c.Limits.MaxFileBytes)
	if file <= 0 {
		file = 64 << 20
	}
	return FileLimits{
		ReadChunk:  max(int64(c.Outputs.MaxStreamBytes), out),
		WriteChunk: max(int64(c.Limits.MaxCodeBytes), 1<<20),
		File:       file,
		Workspace:  int64(c.Docker.WorkspaceSize),
	}
}

// FileLimits reports the limits of file operations. Safe for concurrent use.
func (e *Executor) FileLimits() FileLimits { return e.config().FileLimits() }

// Which limit a FileLimitError names.
const (
	LimitReadChunk  = "outputs.max_stream_bytes" // a whole-file read (ReadFile)
	LimitWriteChunk = "limits.max_code_bytes"    // the data of one write
	LimitFile       = "limits.max_file_bytes"    // the file's total size
	LimitWorkspace  = "docker.workspace_size"    // the working directory's tmpfs
)

// FileLimitError is a file operation refused (nothing of it done) because
// it would pass a limit. It wraps ErrLimitExceeded.
type FileLimitError struct {
	Op    string // "read" or "write"
	Path  string
	Limit string // LimitReadChunk, LimitWriteChunk, LimitFile or LimitWorkspace
	Max   int64  // the limit in bytes
	// Size is what would pass it: the file's size (reads, LimitFile), the
	// data of the call (LimitWriteChunk, LimitWorkspace) or the file's size
	// with it (appends, LimitFile).
	Size int64
	// FileSize is the file's size as the operation left it, -1 when
	// unknown.
	FileSize int64
	// Detail is the sandbox's own account, if any (free space, say).
	Detail string
}

func (e *FileLimitError) Error() string {
	var what string
	switch e.Limit {
	case LimitWriteChunk:
		what = fmt.Sprintf("%d bytes in one call; one call takes at most %d bytes (%s, at least 1 MiB)", e.Size, e.Max, e.Limit)
	case LimitWorkspace:
		what = fmt.Sprintf("the session's workspace is full (%s): %s", e.Limit, e.Detail)
		if e.Max > 0 {
			what = fmt.Sprintf("the session's workspace is full: %s of the %d bytes its tmpfs holds for all files (%s)", e.Detail, e.Max, e.Limit)
		}
	case LimitFile:
		if e.Op == "write" {
			what = fmt.Sprintf("the file would be %d bytes; the largest file is %d bytes (%s)", e.Size, e.Max, e.Limit)
		} else {
			what = fmt.Sprintf("the file is %d bytes; the largest file is %d bytes (%s)", e.Size, e.Max, e.Limit)
		}
	default:
		what = fmt.Sprintf("the file is %d bytes; a whole-file read returns at most %d bytes (%s)", e.Size, e.Max, e.Limit)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Op, e.Path, ErrLimitExceeded, what)
}

func (e *FileLimitError) Unwrap() error { return ErrLimitExceeded }

// fileLimitOf turns the runner's FileTooLarge and NoSpace answers into a
// FileLimitError (limit names which cap a FileTooLarge passed, max its
// size); other answers are left to errorOf.
func (e *Executor) fileLimitOf(resp *runnerResponse, op, path, limit string, max, data int64) error {
	if resp.Status != "error" || resp.Error == nil {
		return nil
	}
	switch resp.Error.Type {
	case "FileTooLarge":
		size := resp.FileSize // a read's file; a write's file before the call
		if op == "write" {
			size += data
		}
		return &FileLimitError{Op: op, Path: path, Limit: limit, Max: max, Size: size, FileSize: resp.FileSize, Detail: resp.Error.Message}
	case "NoSpace":
		return &FileLimitError{Op: op, Path: path, Limit: LimitWorkspace, Max: int64(e.config().Docker.WorkspaceSize), Size: data, FileSize: resp.FileSize, Detail: resp.Error.Message}
	case "BadOffset":
		return fmt.Errorf("%s %s: %w: %s", op, path, ErrInvalidRequest, resp.Error.Message)
	}
	return nil
}

// ReadFile returns a whole file of a session's working directory. path is
// relative to it (or absolute inside it); "..", paths outside and symlinks
// leading out fail with ErrInvalidPath; a missing file with fs.ErrNotExist.
// Files larger than outputs.max_stream_bytes (at least
// limits.max_output_bytes) are refused with a FileLimitError; ReadFileAt
// reads them in parts.
func (e *Executor) ReadFile(ctx context.Context, owner, sessionID, path string) ([]byte, error) {
	resp, err := e.fileOp(ctx, owner, sessionID, &protocol.Read{Path: path, MaxBytes: e.readCap()})
	if err != nil {
		if fileLimitErr(resp) {
			return nil, e.fileLimitOf(resp, "read", path, LimitReadChunk, e.readCap(), 0)
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return resp.Data, nil
}

// FileChunk is a part of a session file.
type FileChunk struct {
	Data     []byte
	Offset   int64 // where Data starts in the file
	FileSize int64 // the file's size when it was read
}

// More says whether the file goes on after this part.
func (c FileChunk) More() bool { return c.Offset+int64(len(c.Data)) < c.FileSize }

// ReadFileAt returns up to length bytes of a session file from offset
// (length <= 0, or more than FileLimits().ReadChunk, means ReadChunk),
// with the path rules of ReadFile; an offset past the end is
// ErrInvalidRequest. A file larger than limits.max_file_bytes is refused
// with a FileLimitError. Loop with Offset+len(Data) while More.
func (e *Executor) ReadFileAt(ctx context.Context, owner, sessionID, path string, offset, length int64) (FileChunk, error) {
	if offset < 0 {
		return FileChunk{}, fmt.Errorf("read %s: %w: offset %d is negative", path, ErrInvalidRequest, offset)
	}
	if length <= 0 || length > e.readCap() {
		length = e.readCap()
	}
	resp, err := e.fileOp(ctx, owner, sessionID, &protocol.Read{Path: path, Offset: offset, Length: &length,
		MaxBytes: e.readCap(), MaxFileBytes: e.fileCap()})
	if err != nil {
		if fileLimitErr(resp) {
			return FileChunk{}, e.fileLimitOf(resp, "read", path, LimitFile, e.fileCap(), 0)
		}
		return FileChunk{}, fmt.Errorf("read %s: %w", path, err)
	}
	return FileChunk{Data: resp.Data, Offset: offset, FileSize: resp.FileSize}, nil
}

// WriteFile creates or replaces a file (and its parent directories) in a
// session's working directory, with the path rules of ReadFile. data is at
// most limits.max_code_bytes (at least 1 MiB) and limits.max_file_bytes;
// the workspace tmpfs size (docker.workspace_size) caps all files
// together. Passing a limit is a FileLimitError; a file that did not fit
// the workspace is left empty.
func (e *Executor) WriteFile(ctx context.Context, owner, sessionID, path string, data []byte) error {
	_, err := e.write(ctx, owner, sessionID, path, data, false)
	return err
}

// AppendFile adds data at the end of a session file (creating it and its
// parent directories when missing) and returns the file's new size, with
// the limits of WriteFile; the file grows to at most limits.max_file_bytes.
// A refused or failed append leaves the file as it was.
func (e *Executor) AppendFile(ctx context.Context, owner, sessionID, path string, data []byte) (int64, error) {
	return e.write(ctx, owner, sessionID, path, data, true)
}

func (e *Executor) write(ctx context.Context, owner, sessionID, path string, data []byte, appendTo bool) (int64, error) {
	if int64(len(data)) > e.writeCap() {
		return 0, &FileLimitError{Op: "write", Path: path, Limit: LimitWriteChunk, Max: e.writeCap(), Size: int64(len(data)), FileSize: -1}
	}
	if int64(len(data)) > e.fileCap() {
		return 0, &FileLimitError{Op: "write", Path: path, Limit: LimitFile, Max: e.fileCap(), Size: int64(len(data)), FileSize: -1}
	}
	resp, err := e.fileOp(ctx, owner, sessionID, &protocol.Write{Path: path, Data: data,
		Append: appendTo, MaxFileBytes: e.fileCap()})
	if err != nil {
		if fileLimitErr(resp) {
			return 0, e.fileLimitOf(resp, "write", path, LimitFile, e.fileCap(), int64(len(data)))
		}
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return resp.FileSize, nil
}

// fileLimitErr says whether a file operation's reply is one fileLimitOf
// explains.
func fileLimitErr(resp *runnerResponse) bool {
	if resp == nil || resp.Error == nil {
		return false
	}
	switch resp.Error.Type {
	case "FileTooLarge", "NoSpace", "BadOffset":
		return true
	}
	return false
}

// ListFiles lists a directory of a session's working directory recursively
// ("" or "." is the working directory itself), sorted by path, at most
// 10000 entries. Symlinks are listed, not followed.
func (e *Executor) ListFiles(ctx context.Context, owner, sessionID, path string) ([]FileInfo, error) {
	if path == "" {
		path = "."
	}
	resp, err := e.fileOp(ctx, owner, sessionID, &protocol.List{Path: path})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	out := make([]FileInfo, 0, len(resp.Entries))
	for _, en := range resp.Entries {
		out = append(out, FileInfo{Path: en.Path, Size: en.Size, Dir: en.Dir, ModTime: time.Unix(0, en.MTimeNS)})
	}
	return out, nil
}

// fileOpTimeout bounds one file operation in a session's sandbox.
const fileOpTimeout = 30 * time.Second

// StartAllowance is how long a sandbox start may take on top of the call's
// timeout: a call with timeout T waits at most T + StartAllowance for its
// sandbox to become ready (and never more than the executor's own startup
// cap of 60 s), then fails with an error that says so.
const StartAllowance = 20 * time.Second

// startWithin starts a sandbox, waiting at most runTimeout+StartAllowance.
func (e *Executor) startWithin(ctx context.Context, meta sandboxMeta, lim Limits, runTimeout time.Duration) (*sandbox, error) {
	budget := runTimeout + StartAllowance
	sctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	sb, err := e.start(sctx, meta, lim)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		return nil, fmt.Errorf("start sandbox: the sandbox was not ready within %s (the call's timeout %s plus a start allowance of %s); the Docker daemon may be busy, try again: %w",
			budget, runTimeout, StartAllowance, err)
	}
	return sb, err
}

func topLevel(module string) string {
	top, _, _ := strings.Cut(module, ".")
	return top
}

// Imported reports which of modules (top-level names) the code of owner's
// session has imported since its interpreter last started, so the caller
// can tell that a newly installed version of one needs a restart. An
// unknown session has imported nothing. Safe for concurrent use.
func (e *Executor) Imported(owner, sessionID string, modules []string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[sessionID]
	if !ok || s.owner != owner {
		return nil
	}
	var out []string
	for _, m := range modules {
		if s.imported[topLevel(m)] {
			out = append(out, m)
		}
	}
	return out
}

// WorkspaceFiles lists the files of owner's session like ListFiles("."),
// for listings that must not count as using the session: it does not
// extend the idle TTL, does not wait for a running call and does not start
// a sandbox that is not running; in those cases it returns no files and no
// error. Safe for concurrent use.
func (e *Executor) WorkspaceFiles(ctx context.Context, owner, sessionID string) ([]FileInfo, error) {
	if e.shared != nil {
		// A listing would take the session's lock and count as a use
		// for every server.
		return nil, nil
	}
	e.mu.Lock()
	s, ok := e.sessions[sessionID]
	if !ok || s.owner != owner || s.closed || s.sb == nil || s.calls > 0 || e.expired(s, time.Now()) {
		e.mu.Unlock()
		return nil, nil
	}
	select {
	case s.sem <- struct{}{}:
	default:
		e.mu.Unlock()
		return nil, nil
	}
	s.calls++
	s.running = true
	sb := s.sb
	e.mu.Unlock()
	resp, fail, err := e.roundTrip(ctx, sb, &protocol.List{Path: "."}, fileOpTimeout, false, listReplyLimit)
	e.mu.Lock()
	s.calls--
	s.running = false
	if sb.dead.Load() {
		s.sandboxDied(sb)
	}
	e.mu.Unlock()
	<-s.sem
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return nil, fmt.Errorf("session %s: %s", sessionID, fail.reason)
	}
	if err := errorOf(resp); err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(resp.Entries))
	for _, en := range resp.Entries {
		out = append(out, FileInfo{Path: en.Path, Size: en.Size, Dir: en.Dir, ModTime: time.Unix(0, en.MTimeNS)})
	}
	return out, nil
}
