// Package policy decides every tool call with OPA: the shipped Rego rules
// (package rules) plus the operator's Rego directories (config
// policy.paths) judge an Input — the code's static facts, the request, the
// principal — against the configuration, which the rules read as data.
// Nothing reaches Docker without an allowing Decision.
//
// The Rego sees Input as `input` and the configuration, prepared for
// lookups, as data.pydocker.config. Every package under data.pydocker.rules
// may add to `deny` and `warn`; data.pydocker.decision collects them. See
// policy/README.md for both documents.
package policy

import (
	"bytes"
	"errors"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The tools an Input may name.
const (
	ToolExecuteTransient  = "execute-transient"
	ToolExecutePersistent = "execute-persistent"
	ToolInstallPackage    = "install-package"
	ToolCleanupSession    = "cleanup-session"
	ToolListSessions      = "list-sessions"
	ToolReadFile          = "read-file"
	ToolWriteFile         = "write-file"
	ToolListFiles         = "list-files"
)

// Input is the document the policy judges (`input` in Rego).
type Input struct {
	// Tool is the MCP tool being called, one of the Tool* constants.
	Tool string `json:"tool"`
	// Code is set for the execute tools.
	Code *Code `json:"code,omitempty"`
	// Language is the execute tools' language: "python" or "bash" (the
	// code's facts are empty for bash: it is not analysed).
	Language string `json:"language,omitempty"`
	// Package is set for install-package.
	Package *Package `json:"package,omitempty"`
	// Session is set for calls on a persistent session (existing or about
	// to be created).
	Session *Session `json:"session,omitempty"`
	// LimitsRequested are the limits the caller asked for; zero fields were
	// not asked for and get the configured maximum.
	LimitsRequested Limits `json:"limits_requested"`
	// Principal is who calls: the token's subject and scopes (empty over
	// stdio without auth).
	Principal Principal `json:"principal"`
	// Task is set when the call runs as an MCP task (tools/call with
	// params.task): its time limit may be up to tasks.max_duration.
	Task *Task `json:"task,omitempty"`
}

// Task describes a call that runs as an MCP task.
type Task struct {
	// OwnerCount is how many tasks the principal has running now, this
	// one not counted.
	OwnerCount int `json:"owner_count"`
}

// Code describes the code of an execute call.
type Code struct {
	// Facts are the static facts from analyze.Source.
	Facts analyze.Facts `json:"facts"`
	// Bytes is the size of the source in bytes.
	Bytes int `json:"bytes"`
	// Lines is the number of lines of the source.
	Lines int `json:"lines"`
	// Expression is set when the static step stopped at an expression
	// over limits.max_expression_tokens (Facts are then empty).
	Expression *Expression `json:"expression,omitempty"`
	// Source is the code itself. It is not part of the policy input; the
	// Gate's decision log records its SHA-256 (and the code when
	// policy.decision_log_code is set).
	Source []byte `json:"-"`
}

// Expression is the size of one expression of the code, in tokens (see
// analyze.Options.MaxExpressionTokens), and where it starts.
type Expression struct {
	Tokens int `json:"tokens"`
	Line   int `json:"line"`
	Col    int `json:"col"`
}

// NewCode describes src with its facts: Bytes, Lines and Source are
// filled from src.
func NewCode(facts analyze.Facts, src []byte) *Code {
	lines := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		lines++
	}
	return &Code{Facts: facts, Bytes: len(src), Lines: lines, Source: src}
}

// Package is an install-package request. ParseRequirement builds one from
// a requirement string such as "numpy==1.26.4".
type Package struct {
	// Name as requested; the rules normalise it (PEP 503).
	Name string `json:"name"`
	// Specifier is the PEP 440 version specifier, e.g. "==1.26.4" or
	// ">=1.26,<2"; "" for any version.
	Specifier string `json:"specifier"`
	// Index is the package index URL the request names ("" = the
	// configured one).
	Index string `json:"index"`
	// Resolved is every package the install would add, the requested one
	// and its dependencies, as the installer resolved them; absent in the
	// decision made before resolving (see rules/packages.rego).
	Resolved []ResolvedPackage `json:"resolved,omitempty"`
}

// ResolvedPackage is one package an install would add.
type ResolvedPackage struct {
	// Name as the distribution spells it.
	Name string `json:"name"`
	// Version is the exact version that would be installed.
	Version string `json:"version"`
	// RequiredBy names the packages of the install that require this one;
	// empty for the requested package.
	RequiredBy []string `json:"required_by"`
}

// Session describes the persistent session a call is about.
type Session struct {
	// ID of the session ("" when a new session is being created).
	ID string `json:"id"`
	// Owner is the principal subject that owns the session (for a new
	// session: the caller).
	Owner string `json:"owner"`
	// Exists is false when the call would create the session.
	Exists bool `json:"exists"`
	// OwnerCount is how many live sessions the owner holds now.
	OwnerCount int `json:"owner_count"`
	// Packages is how many packages were installed into the session so far.
	Packages int `json:"packages"`
}

// Principal is the caller.
type Principal struct {
	Sub    string   `json:"sub"`
	Scopes []string `json:"scopes"`
}

// Limits are sandbox resource limits. In Input.LimitsRequested a zero
// field means "not requested"; in Decision.Limits every field is set.
type Limits struct {
	// Timeout is the wall-clock limit of one call, in seconds.
	Timeout float64 `json:"timeout_seconds,omitempty"`
	// Memory is the memory limit in bytes (memory+swap).
	Memory int64 `json:"memory_bytes,omitempty"`
	// CPUs is the CPU limit in CPUs (fractions allowed).
	CPUs float64 `json:"cpus,omitempty"`
	// Pids caps processes and threads.
	Pids int64 `json:"pids,omitempty"`
}

// Violation is one reason to deny (or, among warnings, to worry). Line is
// 1-based and Col 0-based (CPython's), both 0 when the reason is not about
// a place in the code.
type Violation struct {
	Rule string `json:"rule"`
	Msg  string `json:"msg"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// Decision is the policy's answer. Lists are never nil.
type Decision struct {
	// Allow is true only when there are no violations.
	Allow bool `json:"allow"`
	// Violations and Warnings are sorted by line, column, rule, message.
	Violations []Violation `json:"violations"`
	Warnings   []Violation `json:"warnings"`
	// Limits are the effective limits: each requested value, or the
	// configured maximum where none was requested. Never above the
	// configuration.
	Limits Limits `json:"limits"`
	// Modules are handed to the sandbox runner's import guard, which
	// applies them with the same prefix semantics to imports made by the
	// user's code at run time (not to imports libraries make for
	// themselves). Allowed is an allowlist only when non-empty.
	Modules struct {
		Allowed []string `json:"allowed"`
		Blocked []string `json:"blocked"`
	} `json:"modules"`
	// Calls.Blocked are the blocked dotted call names.
	Calls struct {
		Blocked []string `json:"blocked"`
	} `json:"calls"`
	// Capabilities are the capability classes the call's code may use,
	// enforced in the kernel inside the sandbox.
	Capabilities Capabilities `json:"capabilities"`
	// Quotas are the principal's quotas, one for each Quota* name; never
	// above the configuration. The server enforces them.
	Quotas Quotas `json:"quotas"`
	// Runtime is the runtime the call's sandbox runs under: a Docker
	// runtime (e.g. "runsc") or a Kubernetes RuntimeClass (e.g. "gvisor"),
	// the one an operator rule chose (a `runtime` rule, e.g. untrusted
	// principals -> runsc) or else the configured default; always one of
	// config.SandboxRuntimes ("" is the daemon's or cluster's default).
	Runtime string `json:"runtime"`
	// Reuse says whether a transient call may run in a sandbox kept for
	// its principal: config.ReusePrincipal when pool.reuse says so and no
	// rule turned it off for this input, else config.ReuseNever.
	Reuse string `json:"reuse"`
}

// The quotas a Decision carries (cmd/python-docker-mcp/README.md, "Quotas").
const (
	// QuotaSandboxes: sandboxes one principal uses at once (running
	// execute calls plus its persistent sessions' containers).
	QuotaSandboxes = "sandboxes"
	// QuotaSessions: persistent sessions one principal holds.
	QuotaSessions = "sessions"
	// QuotaTransportSessions: Streamable HTTP sessions one subject holds.
	QuotaTransportSessions = "transport_sessions"
	// QuotaOutputBytes: bytes of kept outputs of one principal.
	QuotaOutputBytes = "output_bytes"
	// QuotaInflightBytes: bytes of one principal's requests being handled.
	QuotaInflightBytes = "inflight_bytes"
	// QuotaAnalyses: one principal's code analyses (the static step and
	// the policy of an execute call) running or waiting for the server's
	// analysis slots.
	QuotaAnalyses = "analyses"
)

// QuotaNames lists the quotas, in the order the quota table of
// cmd/python-docker-mcp/README.md gives them.
var QuotaNames = []string{QuotaSandboxes, QuotaSessions, QuotaTransportSessions, QuotaOutputBytes, QuotaInflightBytes, QuotaAnalyses}

// Quota is one bound of a principal.
type Quota struct {
	// Max is the bound: a count, or bytes for the *_bytes quotas.
	Max int64 `json:"max"`
	// Key is the config key that sets it, for messages that say how to
	// raise it.
	Key string `json:"key"`
}

// Quotas are a principal's quotas by name.
type Quotas map[string]Quota

// Capabilities are the capability classes of a decision: what the code may
// do whatever it imports (see executor.Capabilities for their meaning).
type Capabilities struct {
	Processes  bool     `json:"processes"`
	Sockets    []string `json:"sockets"`
	PTY        bool     `json:"pty"`
	NativeCode bool     `json:"native_code"`
}

// AnalyzeViolation is the violation reported when the static step refuses
// the code (analyze.Source's error): rule "syntax" for a syntax error,
// "input.KIND" for a failed pre-check (encoding, nul, coding, cr, size,
// depth), with the error's line and column. The server and `policy check`
// report the same.
func AnalyzeViolation(err error) Violation {
	var aerr *analyze.Error
	if !errors.As(err, &aerr) {
		return Violation{Rule: "syntax", Msg: err.Error()}
	}
	rule, msg := "input."+aerr.Kind, aerr.Msg
	switch aerr.Kind {
	case "syntax":
		rule = "syntax"
	case "expression":
		rule, msg = "limits.expression_size", msg+" (limits.max_expression_tokens)"
	}
	return Violation{Rule: rule, Msg: msg, Line: aerr.Line, Col: aerr.Col}
}
