// Package backend holds what every sandbox backend shares: the Spec of one
// sandbox, the Sandbox handle (its attach stream), its State, and the Backend
// interface that Docker and Kubernetes implement. It imports neither: the
// executor speaks to a Backend, each backend package translates a Spec into
// its own terms (a container config, a Pod). Package backendtest is the test
// suite every backend passes against its real runtime.
//
// Sizes are bytes, CPU quotas are CPUs (fractions allowed), times are UTC.
// A zero limit means "none set by the spec" (the backend's or node's default
// applies); the executor resolves the operator's limits before it builds a
// Spec, so in practice every limit is set.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors callers branch on. Backends wrap them with context (what, where,
// what to do); test with errors.Is.
var (
	// ErrNotFound: no sandbox with that id (never created, or removed).
	ErrNotFound = errors.New("sandbox not found")
	// ErrUnavailable: the backend (Docker daemon, Kubernetes API) cannot be
	// reached or refused the credentials.
	ErrUnavailable = errors.New("sandbox backend unavailable")
	// ErrImageMissing: the sandbox image is not present where the sandbox
	// runs and cannot be pulled.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrInvalidSpec: the Spec breaks a rule of Validate.
	ErrInvalidSpec = errors.New("invalid sandbox spec")
	// ErrStart: the sandbox was created but did not reach a running,
	// attached state (it exited, was refused by the runtime, or timed
	// out). The backend has already removed it.
	ErrStart = errors.New("sandbox did not start")
)

// Ended is ctx's error, or context.DeadlineExceeded once ctx's deadline
// has passed: a call that failed on the deadline (a dial that says "i/o
// timeout", a request cancelled on it) can return a moment before ctx's
// own timer has marked ctx done. Backends and their callers ask it, not
// ctx.Err(), when they judge whether ctx's end caused a failure.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// Spec is everything a backend needs to create one sandbox. It carries no
// backend-specific type; each backend documents how it maps every field.
type Spec struct {
	// Image is the image reference (e.g. "python-docker-mcp-sandbox:latest").
	Image string
	// Command is the argv the sandbox runs, Command[0] being the program;
	// Args are appended to it. The image's entrypoint is not used.
	Command []string
	Args    []string
	// User is the numeric, non-root "uid:gid" the sandbox runs as.
	User string
	// WorkingDir is an absolute directory other than "/"; it is a private,
	// size-capped in-memory filesystem (WorkspaceBytes) owned by User.
	WorkingDir string
	// Env is the whole environment as "KEY=value" entries, in order;
	// nothing is inherited from the host.
	Env []string
	// Labels identify the sandbox and are what List selects on. Keys and
	// values must be valid Kubernetes label syntax (see Validate), so that
	// every backend can store them; free-form text goes in Annotations.
	Labels map[string]string
	// Annotations are free-form metadata (owner, creation time, ...),
	// returned by List but not selectable. Docker stores them as labels.
	Annotations map[string]string
	// MemoryBytes caps memory; there is no swap (memory+swap = memory).
	MemoryBytes int64
	// CPUs is the CPU quota in CPUs, e.g. 0.5.
	CPUs float64
	// Pids caps processes and threads. Backends that cannot set it per
	// sandbox (Kubernetes: the node's podPidsLimit) document so.
	Pids int64
	// TmpBytes and WorkspaceBytes size the in-memory /tmp and WorkingDir.
	TmpBytes       int64
	WorkspaceBytes int64
	// ReadOnlyRoot makes the root filesystem read-only.
	ReadOnlyRoot bool
	// NetworkDisabled gives the sandbox no network.
	NetworkDisabled bool
	// JoinNetwork, Docker only, is the id of a running container whose
	// network namespace the sandbox joins instead of getting one of its
	// own (which costs Docker a namespace and a prestart hook per
	// container). That container must have no network, so NetworkDisabled
	// must hold; sandboxes that join one namespace share its loopback, so
	// only sandboxes whose code cannot open sockets may join. Other
	// backends refuse a Spec that sets it with ErrInvalidSpec.
	JoinNetwork string
	// Runtime selects an alternative runtime: a Docker runtime name (e.g.
	// "runsc") or a Kubernetes RuntimeClass name. Empty: the default.
	Runtime string
	// Volumes are named volumes mounted into the sandbox (package volumes).
	// Docker creates a named volume on first use; backends without named
	// volumes (Kubernetes) refuse a Spec that has any with ErrInvalidSpec.
	Volumes []Volume
	// Detachable keeps the program's stdin open when an attach stream
	// ends, so that a later Shared.Attach (by this server or another one)
	// can go on talking to it. The program then never sees EOF when its
	// server goes away and must end by itself (the runner's idle exit,
	// PDM_IDLE_EXIT). Backends without Shared ignore it.
	Detachable bool
}

// Volume is a named volume mounted at Path.
type Volume struct {
	// Name is the backend's volume name.
	Name string
	// Path is the absolute mount point inside the sandbox.
	Path     string
	ReadOnly bool
	// Labels label the volume when the backend creates it on first use.
	Labels map[string]string
}

// Validate checks the rules every backend relies on and says which field is
// wrong and what is wanted. The error wraps ErrInvalidSpec.
func (s Spec) Validate() error {
	bad := func(field string, got any, want string) error {
		return fmt.Errorf("%w: %s %v: %s", ErrInvalidSpec, field, got, want)
	}
	switch {
	case strings.TrimSpace(s.Image) == "":
		return bad("Image", `""`, "want an image reference")
	case len(s.Command) == 0 || s.Command[0] == "":
		return bad("Command", s.Command, "want a program and its arguments")
	case s.JoinNetwork != "" && !s.NetworkDisabled:
		return bad("JoinNetwork", s.JoinNetwork, "want NetworkDisabled too: only a namespace without network may be shared")
	}
	if _, _, err := s.UIDGID(); err != nil {
		return err
	}
	if !path.IsAbs(s.WorkingDir) || path.Clean(s.WorkingDir) == "/" || path.Clean(s.WorkingDir) == "/tmp" {
		return bad("WorkingDir", strconv.Quote(s.WorkingDir), "want an absolute directory other than / and /tmp, e.g. /workspace")
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return bad("Env entry", strconv.Quote(e), `want "KEY=value"`)
		}
	}
	if s.MemoryBytes < 0 || s.CPUs < 0 || s.CPUs != s.CPUs || s.Pids < 0 || s.TmpBytes < 0 || s.WorkspaceBytes < 0 {
		return fmt.Errorf("%w: limits must not be negative (memory %d, cpus %g, pids %d, tmp %d, workspace %d)",
			ErrInvalidSpec, s.MemoryBytes, s.CPUs, s.Pids, s.TmpBytes, s.WorkspaceBytes)
	}
	for _, v := range s.Volumes {
		if v.Name == "" || !path.IsAbs(v.Path) || path.Clean(v.Path) == "/" {
			return bad("Volume", fmt.Sprintf("%+v", v), "want a volume name and an absolute mount point other than /")
		}
	}
	if err := ValidateLabels(s.Labels); err != nil {
		return err
	}
	for k := range s.Annotations {
		if err := labelKey(k); err != nil {
			return bad("annotation key", strconv.Quote(k), err.Error())
		}
	}
	return nil
}

var (
	labelNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$`)
	dnsSubRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
)

// ValidateLabels checks labels (of a Spec, or a List selector) against
// Kubernetes' label syntax, which every backend can store. The error wraps
// ErrInvalidSpec and names the label.
func ValidateLabels(labels map[string]string) error {
	for k, v := range labels {
		if err := labelKey(k); err != nil {
			return fmt.Errorf("%w: label key %q: %v", ErrInvalidSpec, k, err)
		}
		if !labelValueRE.MatchString(v) {
			return fmt.Errorf("%w: label %s value %q: want at most 63 characters [A-Za-z0-9_.-], starting and ending alphanumeric (put free text in Annotations)", ErrInvalidSpec, k, v)
		}
	}
	return nil
}

// labelKey checks Kubernetes' qualified-name syntax: [prefix/]name, the
// prefix a DNS subdomain of at most 253 characters, the name at most 63.
func labelKey(k string) error {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok {
		prefix, name = "", k
	} else if prefix == "" || len(prefix) > 253 || !dnsSubRE.MatchString(prefix) {
		return errors.New("want a DNS subdomain prefix before '/'")
	}
	if !labelNameRE.MatchString(name) {
		return errors.New("want a name of at most 63 characters [A-Za-z0-9_.-], starting and ending alphanumeric")
	}
	return nil
}

// UIDGID parses User. It refuses a missing gid, non-numeric ids and uid 0.
func (s Spec) UIDGID() (uid, gid int64, err error) {
	u, g, ok := strings.Cut(s.User, ":")
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%w: User %q: want a numeric non-root \"uid:gid\", e.g. \"1000:1000\"", ErrInvalidSpec, s.User)
	}
	return uid, gid, nil
}

// Sandbox is a created, started sandbox with its attach stream: the runner's
// stdin, stdout and stderr. Output written by the sandbox's program is never
// lost before the caller can read it: backends attach before the program
// starts (Docker) or hold it until attached (Kubernetes).
//
// Stdout and Stderr must both be drained, concurrently: a backend may carry
// them on one connection, so an unread stream can stall the other. They
// return io.EOF when the program's stream ends, or the stream's error.
// Closing Stdin closes the program's stdin (it sees EOF); sandboxes are
// single-attach, so a program that exits on EOF ends with it.
//
// A Sandbox is used by one goroutine per stream; Close is safe to call
// concurrently with the streams and more than once.
type Sandbox struct {
	// ID names the sandbox in the backend (a container id, a Pod name).
	ID     string
	Stdin  io.WriteCloser
	Stdout io.Reader
	Stderr io.Reader

	closeOnce sync.Once
	closeFn   func() error
	closeErr  error
}

// NewSandbox is for backends: close ends the attach stream and releases its
// connection; it is called once, by the first Close.
func NewSandbox(id string, stdin io.WriteCloser, stdout, stderr io.Reader, close func() error) *Sandbox {
	return &Sandbox{ID: id, Stdin: stdin, Stdout: stdout, Stderr: stderr, closeFn: close}
}

// Close detaches: it ends the attach stream (Stdout and Stderr then return
// EOF or an error) and releases its connection. It does not remove the
// sandbox: call Backend.Remove for that.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		if s.closeFn != nil {
			s.closeErr = s.closeFn()
		}
	})
	return s.closeErr
}

// State is what the backend knows about a sandbox's program.
type State struct {
	// Running: the program runs now.
	Running bool
	// Exited: the program has ended; ExitCode is then its exit status
	// (128+signal when killed by a signal).
	Exited   bool
	ExitCode int
	// OOMKilled: the kernel's OOM killer ended the program.
	OOMKilled bool
	// Reason is the backend's short word for the state ("OOMKilled",
	// "Error", "Completed", "ContainerCreating", ...), for messages only.
	Reason string
	// StartedAt and FinishedAt are zero when unknown.
	StartedAt, FinishedAt time.Time
}

// Info is one sandbox as List sees it.
type Info struct {
	ID          string
	Labels      map[string]string
	Annotations map[string]string
	// Created is when the backend created the sandbox.
	Created time.Time
	// Removing: removal was requested and is in progress (Kubernetes'
	// graceful deletion); the sandbox must not be used or reaped again.
	Removing bool
}

// All is Labels and Annotations in one map (Labels win on a clash).
func (i Info) All() map[string]string {
	m := make(map[string]string, len(i.Labels)+len(i.Annotations))
	for k, v := range i.Annotations {
		m[k] = v
	}
	for k, v := range i.Labels {
		m[k] = v
	}
	return m
}

// Backend creates and finds sandboxes. Implementations are safe for
// concurrent use by many goroutines; each method honours ctx (a cancelled
// Create removes what it had created).
type Backend interface {
	// Create validates spec, creates the sandbox, attaches its stdin,
	// stdout and stderr and starts its program, in whatever order the
	// backend needs so that no output is lost. On error nothing is left
	// behind. Errors wrap ErrInvalidSpec, ErrImageMissing, ErrStart or
	// ErrUnavailable where they apply.
	Create(ctx context.Context, spec Spec) (*Sandbox, error)
	// Remove kills the sandbox's program and removes the sandbox. An
	// unknown id is not an error. It may return before the backend has
	// finished (List then reports Removing).
	Remove(ctx context.Context, id string) error
	// List returns the backend's sandboxes whose labels include all of
	// labels (nil: every sandbox this backend manages), in no set order.
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	// State reports the program's state; an unknown id wraps ErrNotFound.
	// It may lag the program where the backend learns of changes
	// asynchronously (Kubernetes: up to the kubelet's status relist, about
	// a second): a sandbox just created may not be Running yet, one just
	// ended not yet Exited.
	State(ctx context.Context, id string) (State, error)
}

// Pinger is implemented by backends that can say whether what runs their
// sandboxes answers now (the Kubernetes API server): the server's
// readiness (/healthz) asks it. An error wraps ErrUnavailable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Liveness is implemented by backends on which several servers share one
// set of sandboxes and cannot see each other's processes (replicas of a
// Kubernetes Deployment): each server holds a record of its own that it
// keeps fresh, and a reaper removes another server's sandboxes only once
// that server's record is gone or stale. Backends without it (Docker)
// judge owners by host, pid namespace, pid and container instead.
type Liveness interface {
	// Hold creates the record of the server with this instance id and
	// keeps it fresh until release is called (which deletes it) or the
	// process dies (then it goes stale). An error means the record could
	// not be written at all (e.g. the server may not write it).
	Hold(ctx context.Context, instance string) (release func(context.Context) error, err error)
	// Alive says whether the server with this instance id holds a fresh
	// record. A missing or stale record is (false, nil); an error means the
	// backend could not tell, and the caller must assume alive.
	Alive(ctx context.Context, instance string) (bool, error)
}

// Shared is implemented by backends on which several servers share one
// set of sandboxes (replicas of a Kubernetes Deployment behind one
// Service): a persistent session outlives the server that started it, and
// any server can serve any session. The session's record lives in the
// backend and says who owns the session, when it was last used, which
// sandbox holds its interpreter, and which server talks to that sandbox
// now: one writer at a time, because the sandbox's stdin is one stream
// that every attached server writes to.
type Shared interface {
	// Attach opens another attach stream to a running sandbox created
	// with Spec.Detachable. Nothing the program wrote before the stream
	// connected is replayed, and every stream attached to the sandbox
	// receives what it writes from then on (so a server drops the replies
	// to requests it did not send). Closing the stream leaves the program
	// running. An unknown or ended sandbox wraps ErrNotFound.
	Attach(ctx context.Context, id string) (*Sandbox, error)
	// CreateSession stores rec, held by holder, and returns its lock. A
	// record with rec.ID already present is an error.
	CreateSession(ctx context.Context, rec SessionRecord, holder string) (SessionLock, error)
	// LockSession takes session id's record for holder, waiting (until
	// ctx ends) while another server holds it and keeps its hold fresh. A
	// hold not renewed for twice SessionHold is taken over: its server
	// died. A missing record wraps ErrNotFound.
	LockSession(ctx context.Context, id, holder string) (SessionLock, error)
	// Sessions returns the records of owner's sessions ("" = everyone's).
	Sessions(ctx context.Context, owner string) ([]SessionRecord, error)
	// DeleteSession removes the record, held or not. Unknown is no error.
	DeleteSession(ctx context.Context, id string) error
}

// SessionHold is how long a session lock stays valid without renewal; a
// holder renews it every third of that (500 ms) while it holds it, and
// another server takes over a hold not renewed for twice SessionHold
// (3 s): a crashed server's session is served again about 3 s after its
// last renewal, plus the attach. The factor two absorbs clock skew
// between servers (renewals carry the holder's clock, staleness is judged
// by the reader's) and a renewal delayed by a slow API server. The cost is
// two record writes a second per session call in progress.
const SessionHold = 1500 * time.Millisecond

// SessionRecord is a session's record in a Shared backend.
type SessionRecord struct {
	ID    string
	Owner string
	// Created is when the session started; LastUsed when its last call
	// ended (the lock's release).
	Created, LastUsed time.Time
	// Sandbox is the id of the sandbox holding the session's interpreter
	// ("" before one is started).
	Sandbox string
	// Holder is the server holding the lock ("" = free); Renewed is when
	// it last renewed its hold.
	Holder  string
	Renewed time.Time
	// Meta is the executor's data about the session (its limits), kept as
	// given.
	Meta map[string]string
	// TakenOver, in the Record of a lock that LockSession took from a
	// holder whose hold had gone stale (that server died mid-call), names
	// that holder; "" otherwise.
	TakenOver string
}

// Held says whether the record's lock is held by a server that renewed it
// within twice SessionHold of now.
func (r SessionRecord) Held(now time.Time) bool {
	return r.Holder != "" && now.Sub(r.Renewed) < 2*SessionHold
}

// SessionLock is a held session record. The holder renews it in the
// background until Release or Delete.
type SessionLock interface {
	// Record is the record as of taking the lock, with the holder's
	// later SetSandbox applied.
	Record() SessionRecord
	// SetSandbox records the session's current sandbox.
	SetSandbox(ctx context.Context, id string) error
	// SetMeta sets these keys of the record's Meta (an empty value
	// removes its key).
	SetMeta(ctx context.Context, meta map[string]string) error
	// Release frees the record and sets LastUsed to now.
	Release(ctx context.Context) error
	// Delete removes the record, ending the session for every server.
	Delete(ctx context.Context) error
}
