// Package executor runs approved Python code in hardened, single-purpose
// Docker containers. Each container runs the embedded runner (package
// executor/runner), which speaks length-prefixed JSON frames over the
// container's attached stdin/stdout.
//
// Transient runs get a container of their own (pre-started in the warm pool,
// or cold) that is removed right after the call, whatever the outcome. Persistent sessions keep one container and
// one interpreter per session until Cleanup, their idle TTL, their max
// lifetime or Close.
//
// An Executor is safe for concurrent use.
package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/clip"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/install"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/owner"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/poolplan"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

var errNotExist = fs.ErrNotExist

// MaxImages caps the PNG images returned by one run (figures and rich
// PNGs, see Rich); their total size is capped by limits.max_image_bytes.
const MaxImages = 16

const maxImages = MaxImages

// MaxStateKeys caps Request.StateKeys.
const MaxStateKeys = 1000

// Request is one piece of approved code to run.
type Request struct {
	// Owner is the principal; sessions are visible only to their owner.
	Owner string
	// Code is the Python source, at most limits.max_code_bytes.
	Code string
	// Language is "python" (or "") or "bash": bash code runs as `bash -c
	// CODE` in the worker, with the same pipes, limits and capabilities
	// (it needs Capabilities.Processes); it takes no State and its Imports
	// are not checked.
	Language string
	// State (transient only) is a JSON object whose members become globals
	// before the code runs; nil means none. At most limits.max_state_bytes.
	State json.RawMessage
	// StateKeys (transient only) names the globals the result's State
	// holds besides the keys of State; "*" means every JSON-serialisable
	// global. With neither, the result has no State, and Unreturned names
	// the globals the caller could ask for. At most MaxStateKeys names.
	StateKeys []string
	// Imports are the gate's import facts for Code. The runner derives them
	// again with CPython's ast and refuses to run (status "refused") when
	// they differ; nil means the gate found no imports.
	Imports []analyze.Import
	// Modules are the module rules the runtime import guard enforces on
	// imports made by user code: the policy decision's, which already
	// merge the configuration's lists. A request with neither list set
	// (a caller without a policy) gets the configuration's
	// allowed_modules / blocked_modules.
	Modules ModuleRules
	// Limits requested for this call; zero fields mean the config's values.
	Limits Limits
	// Capabilities are the capability classes the policy lets this call's
	// code use, enforced in the kernel inside the sandbox (a seccomp filter
	// in the user-code process). nil means no per-call filter: only the
	// container's own hardening applies.
	Capabilities *Capabilities
	// Runtime is the runtime the policy chose for this call (the
	// decision's runtime: a Docker runtime such as "runsc", or a
	// Kubernetes RuntimeClass); "" is the configured default. It must be
	// one of Config.Runtimes. A transient call gets a sandbox of that
	// runtime only (pooled or cold); a persistent session keeps the
	// runtime it started with, and a call naming another is refused.
	Runtime string
	// Progress, when set, is told what the call is waiting for ("starting a
	// sandbox", "waiting for the session's running call", "running"), so the
	// caller can send progress notifications. It is called on the calling
	// goroutine and must not block.
	Progress func(message string)
	// Reuse is the decision's word on kept sandboxes for a transient
	// call: config.ReuseNever keeps this call out of them (it gets a fresh
	// container, which is not kept); "" or config.ReusePrincipal follows
	// pool.reuse. Persistent calls ignore it.
	Reuse string
	// Output, when set, receives the code's stdout and stderr while it
	// runs: each call the next chunk of one stream (see Output). It is
	// called on the calling goroutine and must not block. The Result
	// holds the whole streams, capped, as without it.
	Output func(Output)
	// MaxTimeout, when above docker.timeout, is the largest Limits.Timeout
	// this call may ask for instead (an MCP task's: tasks.max_duration,
	// which the policy judged); 0 means docker.timeout.
	MaxTimeout time.Duration
	// IdempotencyKey is the client's key for this call ("" = none). On a
	// backend whose sessions are shared between servers (Kubernetes), a
	// Persistent call into an existing session records it in the
	// session's record before it runs, and a call whose key the record
	// already holds is not run again: it fails with ErrAlreadyRan, or
	// ErrOutcomeUnknown when the server that ran it died mid-call. Only
	// the last keyed call of a session is remembered. Elsewhere unused
	// (the server answers retries on the same process itself).
	IdempotencyKey string
}

// Output is a chunk of a run's stdout or stderr, sent while it runs. A
// stream's chunks come in order: each starts at or after the end of the
// one before (Offset+Bytes); a later start means the bytes between were
// not sent (the runner sends a stream at most every 50 ms, at most 64 KiB
// a chunk, and skips what more came meanwhile). They are in the Result.
type Output struct {
	Stream string // "stdout" or "stderr"
	// Offset is the stream offset of the chunk's first byte and Bytes its
	// length, in bytes as the code wrote them.
	Offset, Bytes int64
	// Data is the chunk as text (invalid UTF-8 as U+FFFD); it ends on a
	// character boundary unless bytes after it were skipped.
	Data string
}

func (r Request) progress(msg string) {
	if r.Progress != nil {
		r.Progress(msg)
	}
}

// ModuleRules are top-level module rules with prefix semantics: "os"
// matches "os" and "os.path". A non-empty Allowed is an allowlist.
type ModuleRules struct {
	Allowed []string `json:"allowed"`
	Blocked []string `json:"blocked"`
	// Calls are the blocked calls the runner's audit hook enforces at
	// run time (see CallGuards); nil means none.
	Calls []CallGuard `json:"calls,omitempty"`
}

// Capabilities are the kernel-enforced capability classes of one run. The
// zero value denies every class.
type Capabilities struct {
	// Processes allows creating processes: fork, vfork, clone of a new
	// process, execve, execveat (subprocess, os.system, multiprocessing…).
	Processes bool `json:"processes"`
	// Sockets are the socket families the code may open ("unix", "inet",
	// "inet6"); empty denies socket(2) and socketpair(2).
	Sockets []string `json:"sockets"`
	// PTY allows pseudo-terminals (os.openpty, pty).
	PTY bool `json:"pty"`
	// NativeCode allows loading native code the image does not already
	// map (ctypes, cffi, extension modules from writable directories,
	// executable anonymous or memfd mappings).
	NativeCode bool `json:"native_code"`
}

// Result is the outcome of one run. Status is one of:
//
//	ok       the code ran to the end
//	error    the code raised (Error says what and where)
//	timeout  the time limit was hit (persistent: see StateLost)
//	oom      the memory limit was hit
//	killed   the sandbox died or the run was interrupted
//	refused  the runner's own checks refused the code before it ran
//	syntax_error  CPython could not parse the code (the static gate
//	         could): nothing ran; Error has CPython's message, line,
//	         column and the source line with a caret (Traceback)
type Result struct {
	Status          string `json:"status"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// StdoutBytes and StderrBytes are the streams' lengths as the code wrote
	// them; Stdout and Stderr hold at most limits.max_output_bytes of each
	// (head and tail). When a stream was cut for that, StdoutFull or
	// StderrFull keep up to outputs.max_stream_bytes of it (head and tail
	// again when even longer: compare their length with the byte count).
	StdoutBytes  int64           `json:"stdout_bytes"`
	StderrBytes  int64           `json:"stderr_bytes"`
	StdoutFull   string          `json:"-"`
	StderrFull   string          `json:"-"`
	Result       *string         `json:"result,omitempty"` // repr of a final expression's value, unless None
	Error        *RunError       `json:"error,omitempty"`
	State        json.RawMessage `json:"state,omitempty"` // transient: the JSON-serialisable user globals
	DroppedState []Dropped       `json:"dropped_state,omitempty"`
	// StateTooLarge (transient) names the globals left out of State, with
	// their sizes, so that it fits limits.max_state_bytes: the largest go
	// first. The run's status is not changed by it.
	StateTooLarge []StateSize `json:"state_too_large,omitempty"`
	// MissingState (transient) names the keys sent or asked for that are
	// not defined after the run.
	MissingState []string `json:"missing_state,omitempty"`
	// Unreturned (transient) names other globals of JSON types that were
	// not asked for (at most 100): ask with StateKeys.
	Unreturned []string `json:"unreturned_globals,omitempty"`
	Images     []Image  `json:"images,omitempty"`
	// Rich holds the rich representations (HTML, PNG, SVG) of what the
	// code passed to display() and of a final expression, in order;
	// RichDropped those left out, each with its size and the bound it
	// breaks (see protocol.Rich for the bounds).
	Rich        []Rich        `json:"rich,omitempty"`
	RichDropped []RichDropped `json:"rich_dropped,omitempty"`
	Files       []string      `json:"files,omitempty"` // workspace files the run created or changed, relative paths
	// FileData (transient runs) holds the small ones among Files, read
	// before the sandbox was removed: see WorkspaceFile.
	FileData   []WorkspaceFile `json:"file_data,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	// StateLost says a persistent session's interpreter was restarted:
	// every variable, import and function of earlier calls is gone.
	StateLost bool   `json:"state_lost,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Integrity (persistent) is "verified" when the session's interpreter
	// ran no code before this call, so the reply can only come from it,
	// and "unverified" otherwise; IntegrityReason says why, and what a
	// call left running into the next one. IdleCPUMS is the CPU time the
	// session's processes used between the last call and this one (they
	// are stopped then, so anything but 0 is reported).
	Integrity       string  `json:"integrity,omitempty"`
	IntegrityReason string  `json:"integrity_reason,omitempty"`
	IdleCPUMS       float64 `json:"idle_cpu_ms,omitempty"`
	// Interrupted (persistent, on a backend whose sessions are shared
	// between servers) names the server that died during an earlier call
	// into this session, which this call's server took the session over
	// from: that call may have run, in whole or in part, so the session's
	// state may hold its effects. Reported once, by the first call that
	// runs after the takeover.
	Interrupted string `json:"interrupted,omitempty"`
}

// RunError, Dropped and Image are the runner protocol's (see package
// protocol): a Result passes them on as the runner sent them, capped.
type (
	RunError = protocol.RunError
	Dropped  = protocol.Dropped
	// StateSize is a global left out of State to keep it under its cap.
	StateSize = protocol.StateSize
	Image     = protocol.Image
	// Rich is one rich representation of a run; RichDropped one left out.
	Rich        = protocol.Rich
	RichDropped = protocol.RichDropped
)

// Executor runs code in sandboxes. Create it with New; Close removes every
// sandbox it started.
type Executor struct {
	// cfg is the configuration in force (see Reload); a call reads it
	// once, when it begins.
	cfg      atomic.Pointer[Config]
	be       backend.Backend
	log      *slog.Logger
	instance string
	pid      int
	host     string
	self     owner.Identity // pid namespace and server container, for the reaper
	// liveness is the backend's record of live servers (Kubernetes), nil
	// on backends without one; releaseLive deletes this server's record.
	liveness    backend.Liveness
	releaseLive func(context.Context) error
	// shared is the backend's session records (Kubernetes), nil on
	// backends where a session lives in one server (see shared.go).
	shared backend.Shared

	mu       sync.Mutex
	closed   bool
	live     map[string]*sandbox
	sessions *sessions        // persistent sessions, under their own lock (session.go)
	volumes  *install.Volumes // package volumes (install.go)
	// unremoved are containers whose removal failed, retried by the reaper.
	unremoved map[string]bool
	stop      chan struct{}
	done      chan struct{}
	topping   atomic.Bool    // a Preparer backend readies a namespace (topUpNetworks)
	bg        sync.WaitGroup // pool upkeep, creations, background removals
	// bgMu guards bg.Add against Close's bg.Wait (bgShut): a leaf lock, as
	// the pools call bgAdd under their locks, which Reload takes under mu.
	bgMu   sync.Mutex
	bgShut bool
	calls  atomic.Int64   // runs in progress
	armed  atomic.Int64   // runs whose worker had installed their guard ahead (a pooled spare)
	counts startCounters  // for Stats
	runner protocol.Codes // the runner's compiled code, handed to new sandboxes

	pools    atomic.Pointer[poolSet] // the warm pools of the configuration in force
	warm     *keeper                 // transient sandboxes kept for their principal (reuse.go)
	reloadMu sync.Mutex              // serialises Reload
}

// liveInstances are the executors of this process that are not closed: the
// reaper never touches their containers.
var liveInstances sync.Map

// NewWithBackend returns an executor whose sandboxes live in b (Docker:
// docker.Open; Kubernetes: kubernetes.New; a test's fake). What b offers
// beyond backend.Backend it finds by type assertion (see
// backend.Preparer, Tree, Packages, Stepper, Host, Liveness, Shared):
// package volumes and install-package need Packages, and fail saying so
// without. The executor takes b over: its Close (or a failed
// NewWithBackend) calls b's Close when b has one. It removes labelled
// sandboxes that no live executor owns (crash leftovers) and starts the
// session reaper and, with pool.enabled, the warm pool. log nil means
// slog.Default().
func NewWithBackend(ctx context.Context, cfg Config, b backend.Backend, log *slog.Logger) (*Executor, error) {
	if err := checkConfig(cfg); err != nil {
		closeBackend(b)
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return newExecutor(ctx, cfg, b, log)
}

func checkConfig(cfg Config) error {
	if cfg.Docker.Image == "" {
		return errors.New("docker.image is empty")
	}
	if uid, _, ok := numericUser(cfg.Docker.User); !ok || uid == "0" {
		return fmt.Errorf("docker.user %q must be a numeric non-root uid:gid such as 1000:1000", cfg.Docker.User)
	}
	return nil
}

func newExecutor(ctx context.Context, cfg Config, b backend.Backend, log *slog.Logger) (*Executor, error) {
	host, _ := os.Hostname()
	e := &Executor{
		be:        b,
		log:       log,
		instance:  randomHex(8),
		pid:       os.Getpid(),
		host:      host,
		live:      map[string]*sandbox{},
		unremoved: map[string]bool{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	e.cfg.Store(&cfg)
	pk, _ := b.(backend.Packages)
	e.volumes = install.NewVolumes(pk, e.instance, log)
	e.warm = newKeeper(e)
	e.self = owner.Self(ctx, b)
	if l, ok := b.(backend.Liveness); ok {
		release, err := l.Hold(ctx, e.instance)
		if err != nil {
			closeBackend(b)
			return nil, fmt.Errorf("record this server as alive, so other servers leave its sandboxes alone: %w", err)
		}
		e.liveness, e.releaseLive = l, release
	}
	if sh, ok := b.(backend.Shared); ok && e.liveness != nil {
		e.shared = sh
	}
	e.sessions = newSessions(e, log, e.instance, e.shared)
	if n, err := e.reapOrphans(ctx); err != nil {
		if e.releaseLive != nil {
			e.releaseLive(context.WithoutCancel(ctx))
		}
		closeBackend(b)
		return nil, err
	} else if n > 0 {
		log.Info("removed leftover sandboxes", "count", n)
	}
	liveInstances.Store(e.instance, true)
	go e.reaper()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		e.sweepOrphans()
	}()
	e.pools.Store(e.startPools(cfg))
	return e, nil
}

// closeBackend closes b when it has a Close (Docker: its namespace
// holders and its client).
func closeBackend(b backend.Backend) error {
	if c, ok := b.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b)
}

// reaper does the executor's periodic work until Close: sessions past
// their life (sessions.reap), idle kept sandboxes past theirs
// (warm.expire), and container removals to retry.
func (e *Executor) reaper() {
	defer close(e.done)
	t := time.NewTicker(e.sessions.reapEvery())
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.sessions.reap(now)
			if e.warm != nil {
				e.warm.Expire()
			}
			e.retryRemovals()
		}
	}
}

// reapOrphans removes sandboxes and package volumes left by servers that
// are gone (see owner.Check.Alive): crashed or closed executors of this
// host or pid namespace, servers whose container no longer runs, and, on
// a backend with liveness records (Kubernetes), servers whose record is
// gone or stale.
func (e *Executor) reapOrphans(ctx context.Context) (int, error) {
	check := &owner.Check{Self: e.self, PID: e.pid, Host: e.host, Open: instanceOpen, Liveness: e.liveness, Log: e.log}
	check.Runtime, _ = e.be.(backend.Host)
	alive := func(l map[string]string) bool { return check.Alive(ctx, ownerOf(l)) }
	n, err := e.sweep().Orphans(ctx, alive)
	if err != nil {
		return 0, err
	}
	n += e.volumes.Reap(ctx, backend.LabelKind, leftoverVolumes(alive))
	if h, ok := e.be.(backend.Host); ok {
		n += h.RemoveLeftovers(ctx)
	}
	return n, nil
}

// sweep finds the sandboxes no server would remove otherwise.
func (e *Executor) sweep() owner.Sweep {
	return owner.Sweep{Backend: e.be, Instance: e.instance, Named: e.sessions.recorded, Log: e.log,
		Known:  func(id string) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.live[id] != nil },
		Remove: func(id string) { e.removeContainer(id) }}
}

// sweepEvery is how often a server sweeps for dead servers' sandboxes
// (with liveness records: a crashed replica never comes back for them)
// and its own strays older than strayAge (when no start can own them).
var (
	sweepEvery   = time.Minute
	strayAge     = startupTimeout + time.Minute
	sandboxKinds = []string{backend.KindTransient, backend.KindPersistent, KindInstaller}
)

// sweepOrphans sweeps every sweepEvery until the executor closes.
func (e *Executor) sweepOrphans() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if e.liveness != nil {
				n, err := e.reapOrphans(ctx)
				switch {
				case err != nil:
					e.log.Warn("looking for sandboxes of servers that are gone failed", "error", err)
				case n > 0:
					e.log.Info("removed sandboxes of servers that are gone", "count", n)
				}
			}
			if _, err := e.sweep().Strays(ctx, strayAge, sandboxKinds...); err != nil {
				e.log.Warn("looking for sandboxes this server lost track of failed", "error", err)
			}
			cancel()
		}
	}
}

func (e *Executor) track(sb *sandbox) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.live[sb.id] = sb
	return true
}

func (e *Executor) untrack(sb *sandbox) {
	e.mu.Lock()
	delete(e.live, sb.id)
	e.mu.Unlock()
}

// Close removes every sandbox this executor started and ends every
// session. Calls after Close fail with ErrClosed. Call it on SIGINT/SIGTERM.
func (e *Executor) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.stop)
	e.bgMu.Lock()
	e.bgShut = true
	e.bgMu.Unlock()
	var all []*sandbox
	for _, sb := range e.live {
		all = append(all, sb)
	}
	e.mu.Unlock()
	e.sessions.close()
	<-e.done
	var wg sync.WaitGroup
	for _, sb := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sb.recorded.Load() {
				e.detach(sb) // a session's: other servers go on with it
				return
			}
			e.destroy(sb)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); e.bg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		// What is left is removed by the next server to start, or by a
		// replica's sweep once this server's record is gone.
		e.dropLiveness(ctx)
		return fmt.Errorf("close executor: %w", ctx.Err())
	}
	e.retryRemovals()
	if _, err := e.sweep().Strays(ctx, 0, sandboxKinds...); err != nil {
		e.log.Warn("looking for sandboxes this server lost track of failed; the next server to start removes them", "error", err)
	}
	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	e.volumes.Reap(vctx, backend.LabelKind, leftoverVolumes(func(l map[string]string) bool { return l[backend.LabelInstance] != e.instance }))
	vcancel()
	e.mu.Lock()
	n := len(e.unremoved)
	e.mu.Unlock()
	if n > 0 {
		e.log.Warn("sandboxes left behind; the next start removes them", "count", n)
	}
	liveInstances.Delete(e.instance)
	e.dropLiveness(ctx)
	return closeBackend(e.be)
}

// dropLiveness deletes this server's liveness record, if the backend keeps
// one, and stops renewing it.
func (e *Executor) dropLiveness(ctx context.Context) {
	if e.releaseLive == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.releaseLive(rctx); err != nil {
		e.log.Warn("deleting this server's liveness record failed; it goes stale by itself", "error", err)
	}
}

// prepare validates a request and resolves its limits.
func (e *Executor) prepare(req Request, transient bool) (Limits, error) {
	rt, err := e.config().runtime(req.Runtime)
	if err != nil {
		return Limits{}, err
	}
	req.Limits.Runtime = rt
	d := e.config().Docker
	if req.MaxTimeout > d.Timeout.D() {
		d.Timeout = config.Duration(req.MaxTimeout) // a task's (MaxTimeout)
	}
	lim, err := resolveLimits(d, req.Limits)
	if err != nil {
		return Limits{}, err
	}
	if max := int64(e.config().Limits.MaxCodeBytes); max > 0 && int64(len(req.Code)) > max {
		return Limits{}, fmt.Errorf("%w: code is %d bytes; the maximum is %d bytes (limits.max_code_bytes)", ErrLimitExceeded, len(req.Code), max)
	}
	switch req.Language {
	case "", "python":
	case "bash":
		if len(req.State) > 0 {
			return Limits{}, fmt.Errorf("%w: state is for python code only", ErrInvalidRequest)
		}
		if req.Capabilities != nil && !req.Capabilities.Processes {
			return Limits{}, fmt.Errorf("%w: bash needs the processes capability, which this request denies", ErrInvalidRequest)
		}
	default:
		return Limits{}, fmt.Errorf("%w: language %q is not supported (python or bash)", ErrInvalidRequest, req.Language)
	}
	if len(req.StateKeys) > 0 {
		if !transient {
			return Limits{}, fmt.Errorf("%w: state_keys is only for transient runs; a persistent session keeps its own globals", ErrInvalidRequest)
		}
		if req.Language == "bash" {
			return Limits{}, fmt.Errorf("%w: state_keys is for python code only", ErrInvalidRequest)
		}
		if len(req.StateKeys) > MaxStateKeys {
			return Limits{}, fmt.Errorf("%w: state_keys has %d names; the maximum is %d", ErrInvalidRequest, len(req.StateKeys), MaxStateKeys)
		}
		for _, k := range req.StateKeys {
			if k == "" || len(k) > 256 {
				return Limits{}, fmt.Errorf("%w: state_keys holds a name of %d bytes: each is 1 to 256 bytes", ErrInvalidRequest, len(k))
			}
		}
	}
	if len(req.State) > 0 {
		if !transient {
			return Limits{}, fmt.Errorf("%w: state is only for transient runs; a persistent session keeps its own globals", ErrInvalidRequest)
		}
		if max := int64(e.config().Limits.MaxStateBytes); max > 0 && int64(len(req.State)) > max {
			return Limits{}, fmt.Errorf("%w: state is %d bytes; the maximum is %d bytes (limits.max_state_bytes)", ErrLimitExceeded, len(req.State), max)
		}
		trimmed := bytes.TrimSpace(req.State)
		if !bytes.Equal(trimmed, []byte("null")) && (len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed)) {
			return Limits{}, fmt.Errorf("%w: state must be a JSON object of globals", ErrInvalidRequest)
		}
	}
	return lim, nil
}

// modules are the rules the import guard gets: the request's as they are
// (the decision merged the configuration's), the configuration's when the
// request carries none.
func (e *Executor) modules(m ModuleRules) ModuleRules {
	if m.Allowed == nil && m.Blocked == nil {
		m = ModuleRules{Allowed: e.config().AllowedModules, Blocked: e.config().BlockedModules, Calls: m.Calls}
	}
	if m.Allowed == nil {
		m.Allowed = []string{}
	}
	if m.Blocked == nil {
		m.Blocked = []string{}
	}
	return m
}

// Transient runs code in a sandbox that serves this call only: a pooled
// one when the pool is enabled and the limits match, else a cold one. On
// success, error, timeout, cancellation and kill alike the runner is told
// to exit before Transient returns and the container is removed right
// after (in the background; Close waits). A runtime failure of the code is a Result (see
// Status); an error means the run could not happen (bad request, limits,
// Docker) or ctx ended. Safe for concurrent use.
func (e *Executor) Transient(ctx context.Context, req Request) (*Result, error) {
	lim, err := e.prepare(req, true)
	if err != nil {
		return nil, err
	}
	// An owner who installed packages needs a sandbox that mounts their
	// package volume: pooled sandboxes have no owner, so it starts cold.
	pkgs := e.volumes.Owner(req.Owner)
	pl := e.pool() // one pool for the call, whatever a reload does meanwhile
	need := poolplan.Preloadable(req.Imports)
	reuse := e.reuses(req, pkgs)
	class := limitsClass(lim)
	var sb *sandbox
	var k *kept
	reserved := false
	if reuse {
		pooled := func() bool { return pkgs == "" && pl.Ready(class, need, req.Owner) }
		if k, reserved = e.warm.Take(ctx, req.Owner, class, need, pooled); k != nil {
			sb = k.Sandbox()
		}
	}
	if sb == nil && pkgs == "" {
		sb, _ = pl.Take(class, need, req.Owner)
	}
	if sb == nil {
		req.progress("starting a sandbox")
		// While it starts, one of the principal's own sandboxes that is
		// being reset may come back first: the call then takes that one
		// and its start is cancelled (a pool's cold start then joins the
		// pool).
		sctx, stop := ctx, func(bool) *kept { return nil }
		if reserved {
			c, cancel := context.WithCancel(ctx)
			defer cancel()
			if watch := e.warm.Watch(req.Owner, class, need, cancel); watch != nil {
				sctx, stop = c, watch
			}
		}
		if pkgs == "" && pl.Fits(class) {
			// Cold, no preload, raced against the pool's refills; the loser
			// joins the pool, so it carries no owner label.
			sb, err = pl.ColdStart(sctx, need, req.Owner, func(sctx context.Context) (*sandbox, error) {
				return e.startWithin(sctx, sandboxMeta{Kind: backend.KindTransient}, lim, lim.Timeout)
			})
		} else {
			sb, err = e.startWithin(sctx, sandboxMeta{Kind: backend.KindTransient, Owner: req.Owner, Packages: pkgs}, lim, lim.Timeout)
		}
		if own := stop(err != nil && ctx.Err() == nil); own != nil {
			e.warm.Unreserve(req.Owner)
			k, sb, err, reserved = own, own.Sandbox(), nil, false
		}
		if err != nil {
			if reserved {
				e.warm.Unreserve(req.Owner)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("start sandbox: %w", ctx.Err())
			}
			return nil, err
		}
	}
	if reuse && k == nil {
		k = e.warm.Adopt(sb, req.Owner, class, reserved)
	}
	res, err := e.run(ctx, sb, req, lim, true, k != nil)
	if err == nil && len(res.Files) > 0 {
		e.keepSmallFiles(ctx, sb, res)
	}
	if k != nil {
		// No valid reply, or a timeout, OOM or kill: the sandbox is not
		// reused.
		retire := err != nil || res.Status == "timeout" || res.Status == "oom" || res.Status == "killed"
		e.pool().Answered(sb)
		e.warm.GiveBack(k, retire, &guard{Capabilities: wireCapabilities(req.Capabilities), Modules: wireModules(e.modules(req.Modules))})
	} else {
		e.finish(sb)
	}
	return res, err
}

// closing says Close has begun. It takes no lock (see bgMu).
func (e *Executor) closing() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// finish ends a transient sandbox after its one call: the runner is told to
// exit (its processes end with it) and the container is removed in the
// background; Close waits for those removals.
func (e *Executor) finish(sb *sandbox) {
	defer e.pool().Answered(sb) // the pool's refill may start now
	if sb.dead.Load() {
		return
	}
	_ = protocol.WriteRequest(sb.box.Stdin, &protocol.Exit{})
	if !e.bgAdd() {
		e.destroy(sb)
		return
	}
	go func() {
		defer e.bg.Done()
		e.destroy(sb)
	}()
}

// bgAdd counts a background job Close waits for; false once closed.
func (e *Executor) bgAdd() bool {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	if e.bgShut {
		return false
	}
	e.bg.Add(1)
	return true
}

// run sends one run request to a started sandbox.
func (e *Executor) run(ctx context.Context, sb *sandbox, req Request, lim Limits, transient, keep bool) (*Result, error) {
	c := e.config() // the caps this call is sent and answered with
	e.calls.Add(1)
	defer func() {
		e.calls.Add(-1)
		e.pool().Signal()
		e.spool().Signal()
	}()
	g := &guard{Capabilities: wireCapabilities(req.Capabilities), Modules: wireModules(e.modules(req.Modules))}
	p := e.spool()
	if transient {
		p = e.pool()
	}
	p.SetGuard(g) // the next pooled sandboxes' workers install it early
	frame := &protocol.Run{
		Code:         req.Code,
		Transient:    transient,
		Keep:         keep,
		Imports:      wireImports(req.Imports),
		Modules:      g.Modules,
		Capabilities: g.Capabilities,
		Limits: protocol.RunLimits{
			TimeoutMS:      lim.Timeout.Milliseconds(),
			MaxOutputBytes: c.retainCap(),
			MaxStateBytes:  c.stateCap(),
			MaxImageBytes:  c.imageCap(),
			MaxImages:      maxImages,
			GraceMS:        runnerGrace.Milliseconds(),
		},
	}
	if transient {
		frame.State, frame.StateKeys = req.State, req.StateKeys
	}
	if req.Language == "bash" {
		frame.Language = "bash"
	}
	var output func(*protocol.Output) error
	if req.Output != nil {
		frame.Stream = true
		ends := map[string]int64{}
		output = func(o *protocol.Output) error {
			if o.Offset < ends[o.Stream] {
				return fmt.Errorf("an output frame of %s at offset %d, before the end of the last one (%d)", o.Stream, o.Offset, ends[o.Stream])
			}
			ends[o.Stream] = o.Offset + o.Bytes
			req.Output(Output{Stream: o.Stream, Offset: o.Offset, Bytes: o.Bytes, Data: o.Data})
			return nil
		}
	}
	req.progress("running")
	t0 := time.Now()
	resp, fail, err := e.exchange(ctx, sb, frame, lim.Timeout+interruptGrace, !transient, c.runReplyLimit(), output)
	if err != nil {
		return nil, fmt.Errorf("run cancelled: %w", err)
	}
	if fail != nil {
		typ := map[string]string{"timeout": "Timeout", "oom": "OutOfMemory"}[fail.status]
		if typ == "" {
			typ = "SandboxKilled"
		}
		res := &Result{
			Status:     fail.status,
			Error:      &RunError{Type: typ, Message: fail.reason},
			DurationMS: float64(time.Since(t0).Microseconds()) / 1000,
		}
		explainOOM(res, sb.lim.Memory)
		return res, nil
	}
	if resp.Armed {
		e.armed.Add(1)
	}
	c.caps().Reply(resp, transient)
	res := &Result{
		Status:        resp.Status,
		Result:        resp.Result,
		Error:         resp.Error,
		DroppedState:  resp.DroppedState,
		StateTooLarge: resp.StateTooLarge,
		MissingState:  resp.MissingState,
		Unreturned:    resp.Unreturned,
		Images:        resp.Images,
		Rich:          resp.Rich,
		RichDropped:   resp.RichDropped,
		Files:         resp.Files,
		DurationMS:    resp.DurationMS,
		StateLost:     !transient && resp.StateLost,
	}
	if !transient {
		res.Integrity, res.IntegrityReason, res.IdleCPUMS = resp.Integrity, resp.IntegrityReason, resp.IdleCPUMS
	}
	explainOOM(res, sb.lim.Memory)
	res.Stdout, res.StdoutTruncated, res.StdoutFull, res.StdoutBytes = clip.Display(resp.Stdout, resp.StdoutTruncated, c.outputCap())
	res.Stderr, res.StderrTruncated, res.StderrFull, res.StderrBytes = clip.Display(resp.Stderr, resp.StderrTruncated, c.outputCap())
	if transient && len(resp.State) > 0 && !bytes.Equal(resp.State, []byte("null")) {
		res.State = resp.State
	}
	return res, nil
}

// explainOOM names the sandbox's memory limit (memory bytes, 0: none) in a
// result's error: as the cause of an oom, and how to raise it; as the likely
// cause of a SIGKILL the runner did not send (its own kills read otherwise):
// an OOM kill the runtime did not count (gVisor's on Kubernetes may not).
func explainOOM(res *Result, memory int64) {
	limit := "the sandbox's memory limit is " + sizeText(memory) + " (docker.memory_limit in the server's config; only an operator can raise it, e.g. docker.memory_limit: 1g)"
	if memory <= 0 {
		limit = "the sandbox has no memory limit of its own (docker.memory_limit is 0), so the host's memory ran out"
	}
	switch {
	case res.Status == "killed" && res.Error != nil && strings.Contains(res.Error.Message, "(signal 9)"):
		res.Error.Message += "; the runner did not send that SIGKILL: most often it is an out-of-memory kill the sandbox's runtime did not count, so the code likely ran out of memory: " + limit + "; else the code itself or something outside the sandbox sent it"
		return
	case res.Status != "oom":
		return
	case res.Error == nil:
		res.Error = &RunError{Type: "OutOfMemory"}
	}
	msg := "the code ran out of memory: " + limit
	if memory > 0 {
		msg += ". Use less memory: work in chunks, free large objects, or use smaller dtypes"
	}
	if d := strings.TrimSpace(res.Error.Message); d != "" {
		msg += " (" + d + ")"
	}
	res.Error.Message = msg
}

// sizeText is n bytes as a person writes it: 512 MiB, 1 GiB, 1000 bytes.
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
