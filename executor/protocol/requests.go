package protocol

import (
	"encoding/json"
	"io"
)

// Request is one request frame. Head fills in the request's op and gives
// its Header, where the sender sets the id and nonce.
type Request interface {
	Head() *Header
}

// Header holds what every request carries: its op, its id (1, 2, … per
// sandbox) and a nonce (fresh random text per request) that its reply
// must carry back.
type Header struct {
	Op    string `json:"op"`
	ID    uint64 `json:"id,omitempty"`
	Nonce string `json:"nonce,omitempty"`
}

// WriteRequest writes r as one frame, its op filled in.
func WriteRequest(w io.Writer, r Request) error {
	r.Head()
	return WriteFrame(w, r)
}

// Run runs code in the sandbox's worker (OpRun).
type Run struct {
	Header
	Code string `json:"code"`
	// Language is "bash" for bash code; empty for Python.
	Language string `json:"language,omitempty"`
	// Transient: the sandbox serves this one call (the worker exits after
	// it, State and StateKeys apply, the reply carries state).
	Transient bool `json:"transient"`
	// Keep (transient): the server may keep the sandbox for its
	// principal's next call (Reset), so the runner records what a reset
	// restores before this call's code runs, unless it has already.
	Keep bool `json:"keep,omitempty"`
	// Imports are the static gate's import facts, which the runner
	// compares with CPython's AST before anything runs.
	Imports []Import `json:"imports"`
	// Modules and Capabilities are the guard the worker installs at its
	// first run (its audit hook and its kernel filter); a later run with
	// another guard gets a new worker. Capabilities nil: only the
	// always-denied system calls are filtered.
	Modules      ModuleRules   `json:"modules"`
	Capabilities *Capabilities `json:"capabilities"`
	Limits       RunLimits     `json:"limits"`
	// State (transient) is a JSON object whose members become globals
	// before the code runs; StateKeys names the globals the reply's state
	// returns ("*": all).
	State     json.RawMessage `json:"state,omitempty"`
	StateKeys []string        `json:"state_keys,omitempty"`
	// Stream asks for Output frames while the code runs.
	Stream bool `json:"stream,omitempty"`
}

// Head fills in OpRun.
func (r *Run) Head() *Header { r.Op = OpRun; return &r.Header }

// RunLimits are the caps of one run; the runner applies each again to
// what the worker sends. A zero field means the runner's default.
type RunLimits struct {
	TimeoutMS      int64 `json:"timeout_ms"`
	MaxOutputBytes int64 `json:"max_output_bytes"`
	MaxStateBytes  int64 `json:"max_state_bytes"`
	MaxImageBytes  int64 `json:"max_image_bytes"`
	MaxImages      int   `json:"max_images"`
	// GraceMS is how long the worker gets to stop after its time limit
	// or an interrupt before it is killed.
	GraceMS int64 `json:"grace_ms"`
}

// Import is one import statement as the static gate saw it; the runner
// compares these fields with its own parse.
type Import struct {
	Module string  `json:"module"`
	Level  int     `json:"level"`
	From   bool    `json:"from"`
	Names  []Alias `json:"names,omitempty"`
	Alias  string  `json:"alias,omitempty"`
	Line   int     `json:"line"`
}

// Alias is one name of a from-import.
type Alias struct {
	Name   string `json:"name"`
	AsName string `json:"asname,omitempty"`
}

// ModuleRules are the module rules the worker's audit hook enforces, and
// the blocked calls it refuses at run time.
type ModuleRules struct {
	Allowed []string    `json:"allowed"`
	Blocked []string    `json:"blocked"`
	Calls   []CallGuard `json:"calls,omitempty"`
}

// CallGuard is one blocked call the audit hook watches: the call's name
// and the blocked_calls entry (for the message), the audit event, and
// whether only a direct call from user code is refused.
type CallGuard struct {
	Name   string `json:"name"`
	Entry  string `json:"entry"`
	Event  string `json:"event"`
	Direct bool   `json:"direct,omitempty"`
}

// Capabilities are the capability classes the worker's kernel filter
// allows.
type Capabilities struct {
	Processes  bool     `json:"processes"`
	Sockets    []string `json:"sockets"`
	PTY        bool     `json:"pty"`
	NativeCode bool     `json:"native_code"`
}

// Guard is what a spare worker installs ahead of its call (Preload.Arm):
// a run's Modules and Capabilities.
type Guard struct {
	Capabilities *Capabilities `json:"capabilities"`
	Modules      ModuleRules   `json:"modules"`
}

// Preload imports modules into the runner before the sandbox waits for a
// call (OpPreload); workers forked later inherit them.
type Preload struct {
	Header
	Modules []string `json:"modules"`
	// Arm, when set, is the guard the spare worker installs now.
	Arm *Guard `json:"arm,omitempty"`
	// RunnerCode asks for the runner's compiled code and the directory of
	// the sandbox's standard library (Reply.RunnerCode, Reply.Stdlib).
	RunnerCode bool `json:"runner_code,omitempty"`
}

// Head fills in OpPreload.
func (r *Preload) Head() *Header { r.Op = OpPreload; return &r.Header }

// Parse compiles Code to an AST only, a syntax check (OpParse).
type Parse struct {
	Header
	Code string `json:"code"`
}

// Head fills in OpParse.
func (r *Parse) Head() *Header { r.Op = OpParse; return &r.Header }

// Read reads Path of the working directory (OpRead): the whole file, at
// most MaxBytes (refused when larger), or, when Length is set, up to
// Length bytes from Offset of a file of at most MaxFileBytes.
type Read struct {
	Header
	Path         string `json:"path"`
	MaxBytes     int64  `json:"max_bytes"`
	Offset       int64  `json:"offset,omitempty"`
	Length       *int64 `json:"length,omitempty"`
	MaxFileBytes int64  `json:"max_file_bytes,omitempty"`
}

// Head fills in OpRead.
func (r *Read) Head() *Header { r.Op = OpRead; return &r.Header }

// Write writes Data to Path (OpWrite): replacing the file, or appending
// to it; the file is at most MaxFileBytes after it (0: no cap).
type Write struct {
	Header
	Path         string `json:"path"`
	Data         []byte `json:"data"`
	Append       bool   `json:"append,omitempty"`
	MaxFileBytes int64  `json:"max_file_bytes,omitempty"`
}

// Head fills in OpWrite.
func (r *Write) Head() *Header { r.Op = OpWrite; return &r.Header }

// List lists Path, recursively (OpList).
type List struct {
	Header
	Path string `json:"path"`
}

// Head fills in OpList.
func (r *List) Head() *Header { r.Op = OpList; return &r.Header }

// Interrupt interrupts the running request ID (OpInterrupt); it has no
// reply of its own and no nonce.
type Interrupt struct {
	Header
}

// Head fills in OpInterrupt.
func (r *Interrupt) Head() *Header { r.Op = OpInterrupt; return &r.Header }

// Exit ends the runner (OpExit); no reply.
type Exit struct {
	Header
}

// Head fills in OpExit.
func (r *Exit) Head() *Header { r.Op = OpExit; return &r.Header }

// Ping is answered at once (OpPing): an attach stream's first request.
type Ping struct {
	Header
}

// Head fills in OpPing.
func (r *Ping) Head() *Header { r.Op = OpPing; return &r.Header }

// Reset asks a transient sandbox's runner, after a call's reply, to make
// the sandbox as it was before that call (OpReset): every process but the
// runner ended, the writable paths back to their contents before the
// first call, System V IPC objects removed, the runner's descriptors,
// environment, working directory, umask and resource limits as they
// were; each checked afterwards. The reply's status is "ok" only when
// every check passed (Reply.Checked lists them); otherwise "error" with
// Reply.Reason, and the sandbox must not serve another call. On "ok" the
// runner has forked the next call's worker, armed with Arm when given.
type Reset struct {
	Header
	Arm *Guard `json:"arm,omitempty"`
}

// Head fills in OpReset.
func (r *Reset) Head() *Header { r.Op = OpReset; return &r.Header }
