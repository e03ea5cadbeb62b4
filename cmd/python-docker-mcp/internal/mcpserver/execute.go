package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// transientArgs are execute-transient's arguments (its input schema).
type transientArgs struct {
	Code string `json:"code"`
	// State is a JSON object of globals; its description names the
	// argument in backquotes, so it is set in Tools.
	State json.RawMessage `json:"state,omitempty"`
	// StateKeys names more globals to return; its description names
	// arguments in backquotes, so it is set in Tools.
	StateKeys []string `json:"state_keys,omitempty"`
	Timeout   float64  `json:"timeout,omitempty"`
	Language  string   `json:"language,omitempty"`
}

// persistentArgs are execute-persistent's arguments (its input schema).
type persistentArgs struct {
	Code      string  `json:"code"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"Session to run in; empty or absent creates a new session."`
	Timeout   float64 `json:"timeout,omitempty"`
	Language  string  `json:"language,omitempty"`
}

// runOut is the structured content of the execute tools (their output
// schema). The streams are not in it: they are in the text content, once
// (see text); the structured content says how long they were, whether the
// text shows them cut, and where their full text is.
type runOut struct {
	Status          string             `json:"status" jsonschema:"ok: ran to the end; error: the code raised; timeout/oom/killed: stopped by a limit; refused: the sandbox's own check refused; syntax_error: the code does not parse (CPython's message in error), nothing ran; denied: the policy refused, see violations; invalid: bad arguments (e.g. state keys), nothing ran; quota_exceeded: the caller holds all its quota allows, see quota, nothing ran; outcome_unknown: a retry (same _meta.idempotency_key) of a call that began on a server which stopped before it answered: it may have run, it is not run again; already_ran: a retry of a call that ran and was answered by a server whose result is not here: not run again."`
	StdoutBytes     int64              `json:"stdout_bytes" jsonschema:"Length of stdout as the code wrote it. The text itself is in the result's text content, under --- stdout ---."`
	StderrBytes     int64              `json:"stderr_bytes" jsonschema:"Length of stderr as the code wrote it."`
	StdoutTruncated bool               `json:"stdout_truncated" jsonschema:"The text shows only the head and tail of stdout; stdout_uri has the full text."`
	StderrTruncated bool               `json:"stderr_truncated" jsonschema:"The text shows only the head and tail of stderr; stderr_uri has the full text."`
	StdoutURI       string             `json:"stdout_uri,omitempty" jsonschema:"sandbox-output:// resource with the full stdout, when it was cut (read it with resources/read; kept for a limited time)."`
	StderrURI       string             `json:"stderr_uri,omitempty" jsonschema:"sandbox-output:// resource with the full stderr, when it was cut."`
	Result          *string            `json:"result" jsonschema:"repr() of the final expression's value."`
	Error           *runError          `json:"error"`
	State           json.RawMessage    `json:"state,omitempty"`
	DroppedState    []executor.Dropped `json:"dropped_state" jsonschema:"Globals that are not JSON-serialisable and did not survive."`
	StateTooLarge   []stateSize        `json:"state_too_large,omitempty" jsonschema:"Globals left out of state because it would exceed limits.max_state_bytes with them (the largest first), with the size of each one's JSON; the run's status is its own, and warnings says the cap."`
	MissingState    []string           `json:"missing_state,omitempty" jsonschema:"Names sent in state or asked for in state_keys that are not defined after the run."`
	Unreturned      []string           `json:"unreturned_globals,omitempty" jsonschema:"Other globals of JSON types the run left (up to 100 names) that were not returned: name them in state_keys to get them."`
	Images          int                `json:"images" jsonschema:"Number of PNG figures returned as image content."`
	Rich            []richOut          `json:"rich,omitempty" jsonschema:"Rich representations of what the code passed to display() and of its final expression, in the order of the content items after the figures: HTML as an embedded text/html resource, PNG as image content, SVG as an embedded image/svg+xml resource."`
	RichDropped     []richDropped      `json:"rich_dropped,omitempty" jsonschema:"Rich representations left out of the result, with their size and the limit they break (or the error of the _repr_ method that failed); the text content says the same."`
	Files           []string           `json:"files" jsonschema:"sandbox:// URIs of files the run created or changed (execute-persistent)."`
	DiscardedFiles  []string           `json:"discarded_files,omitempty" jsonschema:"Files an execute-transient run wrote into /workspace: they were deleted when it ended."`
	ReturnedFiles   []string           `json:"returned_files,omitempty" jsonschema:"sandbox-output:// URIs of the small discarded files, read before the sandbox went: embedded in the result and readable with resources/read for a while."`
	DurationMS      float64            `json:"duration_ms"`
	SessionID       string             `json:"session_id,omitempty" jsonschema:"The persistent session (execute-persistent)."`
	StateLost       bool               `json:"state_lost" jsonschema:"True once after the session's sandbox had to be restarted: its variables, imports and files are gone."`
	Integrity       string             `json:"integrity,omitempty" jsonschema:"execute-persistent: verified when the session's interpreter ran no code before this call (the reply can only come from it); unverified when earlier calls' code ran in it (it could have changed how requests are read); integrity_reason says why."`
	IntegrityReason string             `json:"integrity_reason,omitempty" jsonschema:"Why integrity is unverified, and anything a call left running (threads, signal handlers) into the next call."`
	IdleCPUMS       float64            `json:"idle_cpu_ms,omitempty" jsonschema:"CPU time the session's processes used between the last call and this one (they are stopped between calls)."`
	Violations      []policy.Violation `json:"violations"`
	Warnings        []policy.Violation `json:"warnings"`
	Live            *liveOut           `json:"live,omitempty" jsonschema:"With a progress token: how much of each stream the progress notifications carried while the code ran."`
	Quota           *quota.Error       `json:"quota,omitempty" jsonschema:"The quota that refused the call (status quota_exceeded): its name, the caller's use, what it asked for, the bound and the config key that raises it."`

	// The streams as shown, for the text content only.
	stdout, stderr string
	// notes are said in the text content after the streams.
	notes []string
}

// richOut describes one rich content item of a run (executor.Rich) for
// the output schema.
type richOut struct {
	MIME   string `json:"mime" jsonschema:"text/html, image/png or image/svg+xml."`
	From   string `json:"from" jsonschema:"display: an argument of display(); result: the final expression."`
	N      int    `json:"n,omitempty" jsonschema:"Which display() argument of the run (from 1)."`
	Bytes  int    `json:"bytes"`
	Width  int    `json:"width,omitempty" jsonschema:"A PNG's width in pixels."`
	Height int    `json:"height,omitempty" jsonschema:"A PNG's height in pixels."`
	URI    string `json:"uri,omitempty" jsonschema:"HTML, SVG: the embedded resource's sandbox-output:// URI, readable with resources/read for a while (unless the text content says it was not kept)."`
}

// richDropped describes a rich representation left out of the result
// (executor.RichDropped) for the output schema.
type richDropped struct {
	MIME  string `json:"mime"`
	From  string `json:"from"`
	N     int    `json:"n,omitempty"`
	Bytes int64  `json:"bytes" jsonschema:"Its size; 0 when it could not be made."`
	Why   string `json:"why" jsonschema:"too_large: over the limit per HTML or SVG item; over_total: over the call's total of HTML and SVG; over_count: over the call's count of rich items; over_image_bytes, over_image_count: over the call's image limits, which figures share; failed: the object's _repr_ method raised or returned something unusable."`
	Limit int64  `json:"limit,omitempty" jsonschema:"The limit it breaks: bytes, or a count for over_count and over_image_count."`
	Error string `json:"error,omitempty" jsonschema:"failed: the error."`
}

// stateSize documents executor.StateSize for the output schema.
type stateSize struct {
	Name  string `json:"name" jsonschema:"The global's name."`
	Bytes int64  `json:"bytes" jsonschema:"Size of its value as JSON."`
}

// stateOutDescription, stateInDescription and stateKeysDescription
// describe the state properties (set in Tools: struct tags cannot hold
// backquotes).
const (
	stateOutDescription = "The globals named by the keys of `state` and by `state_keys`, as they are after the run, when JSON-serialisable; " +
		"pass it back as `state` to continue (execute-transient). Empty when the call sent neither."
	stateInDescription = "Variables to define before the code runs, as a JSON object of name to JSON value; the same names come back in the result's `state` with their values after the run. " +
		"Pass the `state` returned by the previous call to continue from it. Only JSON-serialisable values survive; the others are listed in dropped_state. " +
		"Names must be Python identifiers that are not keywords, builtins (list, print, ...) or __dunder__ names."
	stateKeysDescription = "Names of more globals to return in the result's `state` (besides the keys of `state`), e.g. [\"df_summary\", \"total\"]; [\"*\"] returns every JSON-serialisable global. " +
		"Without it only the keys of `state` come back, and unreturned_globals lists the others you could ask for. " +
		"The returned state is capped at limits.max_state_bytes: values that do not fit are left out, largest first, and named in state_too_large with a warning; the run's own result stands."
)

// sent is o as the tools send it: lists that are empty, never null, as
// the output schema says.
func (o runOut) sent() runOut {
	if o.DroppedState == nil {
		o.DroppedState = []executor.Dropped{}
	}
	if o.Files == nil {
		o.Files = []string{}
	}
	if o.Violations == nil {
		o.Violations = []policy.Violation{}
	}
	if o.Warnings == nil {
		o.Warnings = []policy.Violation{}
	}
	return o
}

type runError struct {
	Type      string `json:"type" jsonschema:"Exception type."`
	Message   string `json:"message" jsonschema:"Exception message."`
	Line      int    `json:"line"`
	Col       int    `json:"col,omitempty" jsonschema:"Column of a syntax error (1-based, in characters, as CPython counts)."`
	Traceback string `json:"traceback" jsonschema:"Traceback of the user's code only; for a syntax error, the source line with a caret under the error."`
}

func (s *Server) executeTransient(ctx context.Context, req mcp.CallToolRequest, args transientArgs) (*mcp.CallToolResult, error) {
	if len(args.State) > 0 && string(args.State) != "null" {
		var globals map[string]json.RawMessage
		if err := json.Unmarshal(args.State, &globals); err != nil {
			return toolError("state is not a JSON object: "+err.Error(), nil), nil
		}
		if bad := checkStateKeys(globals); len(bad) > 0 {
			msg := "invalid state, nothing was run:\n  " + strings.Join(bad, "\n  ")
			return toolError(msg, runOut{Status: "invalid", Error: &runError{Type: "InvalidState", Message: strings.Join(bad, "; ")}}.sent()), nil
		}
	} else {
		args.State = nil
	}
	if bad := checkStateNames(args.StateKeys); len(bad) > 0 {
		msg := "invalid state_keys, nothing was run:\n  " + strings.Join(bad, "\n  ")
		return toolError(msg, runOut{Status: "invalid", Error: &runError{Type: "InvalidState", Message: strings.Join(bad, "; ")}}.sent()), nil
	}
	return s.execute(ctx, req, ToolExecuteTransient, args.Language, args.Code, args.Timeout, "", args.State, args.StateKeys)
}

func (s *Server) executePersistent(ctx context.Context, req mcp.CallToolRequest, args persistentArgs) (*mcp.CallToolResult, error) {
	return s.execute(ctx, req, ToolExecutePersistent, args.Language, args.Code, args.Timeout, args.SessionID, nil, nil)
}

// gate runs the static step and the policy for code. It returns either a
// decision that allows, or a result to send back (a denial).
func (s *Server) gate(ctx context.Context, tool, code string, in policy.Input, progress func(string)) (analyze.Facts, policy.Decision, *mcp.CallToolResult) {
	in.Tool = tool
	release, refusal := s.analysisSlot(ctx, tool, in)
	if refusal != nil {
		return analyze.Facts{}, policy.Decision{}, refusal
	}
	c, err := s.d.Gate.Check(ctx, in, []byte(code))
	release()
	facts, dec := c.Facts, c.Decision
	if c.Syntax != nil && err == nil {
		// CPython's verdict needs a sandbox: only for a caller the policy
		// would let run code at all (judged with no facts: the code does
		// not parse, so nothing of it can be judged).
		if !dec.Allow {
			return facts, dec, s.denied(ctx, tool, dec.Violations, dec.Warnings)
		}
		return facts, policy.Decision{}, s.syntaxError(ctx, tool, code, c.Syntax, in, progress)
	}
	if err != nil {
		return facts, dec, toolError("the policy could not be evaluated (the server's Rego failed; tell the operator): "+err.Error(),
			runOut{Status: "denied", Violations: []policy.Violation{{Rule: "policy.error", Msg: err.Error()}}}.sent())
	}
	if !dec.Allow {
		return facts, dec, s.denied(ctx, tool, dec.Violations, dec.Warnings)
	}
	if in.Language == "bash" && !dec.Capabilities.Processes {
		v := policy.Violation{Rule: "languages.bash_processes",
			Msg: "bash needs to create processes, and the policy denies the processes capability here (policy.capabilities.processes, or blocked_modules/blocked_calls covering subprocess or os.system); ask the operator to allow processes, or use python"}
		return facts, dec, s.denied(ctx, tool, []policy.Violation{v}, dec.Warnings)
	}
	return facts, dec, nil
}

// analysisSlot waits for one of the server's analysis slots for the
// caller (quota.Fair: a principal runs at most its share of them, and
// waits behind its own calls), or takes over the one the transport holds
// for the request (Deps.Analyses), within its quota of calls being analysed
// or waiting (policy.QuotaAnalyses). It returns the slot's release, or
// the result to send back: a quota refusal, or the end of the request
// while it waited.
func (s *Server) analysisSlot(ctx context.Context, tool string, in policy.Input) (func(), *mcp.CallToolResult) {
	sessionID := ""
	if in.Session != nil {
		sessionID = in.Session.ID
	}
	counted := func() {}
	if q, ok := s.principalQuotas(ctx, in.Principal)[policy.QuotaAnalyses]; ok {
		var err error
		counted, err = s.d.Quotas.Take(policy.QuotaAnalyses, in.Principal.Sub, 1, 0, q)
		if err != nil {
			qe := err.(*quota.Error)
			qe.Hint = "wait for the principal's other calls to be judged"
			return nil, s.quotaRefusal(ctx, tool, sessionID, qe)
		}
	}
	slot, held := s.analyses.Take(ctx) // the transport's, waited for before the request was read
	var err error
	if !held {
		slot, err = s.analyses.Acquire(ctx, in.Principal.Sub)
	}
	if err != nil {
		counted()
		msg := "the call ended while its code waited to be analysed, nothing was run: " + err.Error()
		return nil, toolError(msg, runOut{Status: "killed", Error: &runError{Type: "ServerError", Message: msg}, SessionID: sessionID}.sent())
	}
	return func() { slot(); counted() }, nil
}

// principalQuotas are p's quotas as the policy decides them before any
// decision on a call (the configured ones when the gate cannot say).
func (s *Server) principalQuotas(ctx context.Context, p policy.Principal) policy.Quotas {
	if g, ok := s.d.Gate.(interface{ Engine() *policy.Engine }); ok {
		e := g.Engine()
		if q, err := e.Quotas(ctx, p); err == nil {
			return q
		}
		return e.ConfiguredQuotas()
	}
	cfg := s.d.Config()
	return policy.Quotas{policy.QuotaAnalyses: {Max: int64(cfg.Quotas.Analyses), Key: "quotas.analyses"}}
}

// Parser checks code with CPython's parser without running it;
// *executor.Executor is one. An Executor that is not a Parser leaves syntax
// errors to the static step's message.
type Parser interface {
	Parse(ctx context.Context, req executor.Request) (*executor.SyntaxError, error)
}

// syntaxError answers code the static step could not parse, before any
// policy: status syntax_error with CPython's message, position and source
// line with a caret, from a sandbox's runner that only builds the AST
// (nothing of the code runs). Without a sandbox (no Parser, no image, a
// failed start) the static step's message is shown the same way. When
// CPython parses the code the static step cannot judge it, and it is
// denied (rule "syntax").
func (s *Server) syntaxError(ctx context.Context, tool, code string, aerr *analyze.Error, in policy.Input, progress func(string)) *mcp.CallToolResult {
	se := gateSyntaxError(code, aerr)
	note := ""
	if p, ok := s.d.Exec.(Parser); ok {
		err := s.waitImage(ctx, progress)
		var cse *executor.SyntaxError
		if err == nil {
			cse, err = p.Parse(ctx, executor.Request{Owner: in.Principal.Sub, Code: code, Limits: executor.Limits{Timeout: time.Duration(in.LimitsRequested.Timeout * float64(time.Second))}})
		}
		switch {
		case err != nil:
			note = "(CPython's check was not available, so this is the static checker's message: " + err.Error() + ")"
			s.logClient(ctx, mcp.LoggingLevelWarning, "syntax check in a sandbox failed", map[string]any{"tool": tool, "error": err.Error()})
		case cse == nil:
			v := policy.Violation{Rule: "syntax", Line: aerr.Line, Col: aerr.Col,
				Msg: "the server's static checker cannot parse this code (" + aerr.Msg + "), although CPython can; it was not run. Write the construct at this line another way."}
			return s.denied(ctx, tool, []policy.Violation{v}, nil)
		default:
			se = cse
		}
	}
	out := runOut{Status: "syntax_error", Error: &runError{Type: se.Type, Message: se.Message, Line: se.Line, Col: se.Col,
		Traceback: strings.TrimRight(se.Detail, "\n")}}.sent()
	if in.Session != nil {
		out.SessionID = in.Session.ID // the call's own, as given
	}
	msg := strings.TrimRight(text(out), "\n")
	if note != "" {
		msg += "\n" + note
	}
	s.logClient(ctx, mcp.LoggingLevelInfo, "syntax error", map[string]any{"tool": tool, "line": se.Line})
	return toolError(msg, out)
}

// gateSyntaxError is the static step's syntax error as CPython shows one.
func gateSyntaxError(code string, aerr *analyze.Error) *executor.SyntaxError {
	col, shown := aerr.Show([]byte(code), "<cell>")
	return &executor.SyntaxError{Type: "SyntaxError", Message: aerr.Msg, Line: aerr.Line, Col: col, Detail: shown}
}

// denied renders a refusal: each violation with its rule, line and column.
func (s *Server) denied(ctx context.Context, tool string, vs, ws []policy.Violation) *mcp.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "denied: the code was not run (%d violation(s)):\n", len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "  line %d, col %d: %s: %s\n", v.Line, v.Col, v.Rule, v.Msg)
	}
	for _, w := range ws {
		fmt.Fprintf(&b, "  warning: line %d, col %d: %s: %s\n", w.Line, w.Col, w.Rule, w.Msg)
	}
	s.logClient(ctx, mcp.LoggingLevelWarning, "request denied", map[string]any{"tool": tool, "violations": len(vs)})
	r := mcp.NewToolResultError(strings.TrimRight(b.String(), "\n"))
	r.StructuredContent = runOut{Status: "denied", Violations: vs, Warnings: ws}.sent()
	return r
}

// execute judges code and runs it: transient (state is its JSON object of
// globals, or nil; stateKeys the more globals to return) or, for
// ToolExecutePersistent, in session sessionID ("" creates one).
func (s *Server) execute(ctx context.Context, req mcp.CallToolRequest, tool, language, code string, timeout float64, sessionID string, state json.RawMessage, stateKeys []string) (*mcp.CallToolResult, error) {
	persistent := tool == ToolExecutePersistent
	p := s.principal(ctx)
	if language == "" {
		language = "python"
	}
	if language == "bash" && (state != nil || len(stateKeys) > 0) {
		return toolError("state is for python code only: a bash call takes no state or state_keys", runOut{Status: "invalid", Error: &runError{Type: "InvalidArgument", Message: "state is for python code only"}}.sent()), nil
	}
	in := policy.Input{Principal: policyPrincipal(p), LimitsRequested: policy.Limits{Timeout: timeout}, Language: language}
	if persistent {
		in.Session = s.sessionInput(p.Sub, sessionID)
	}
	task := taskFrom(ctx)
	if task != nil {
		in.Task = &policy.Task{OwnerCount: task.others}
	}
	prog := s.progressOf(ctx, req)
	progress := func(string) {}
	if prog != nil {
		progress = prog.say
	}
	facts, dec, refusal := s.gate(ctx, tool, code, in, progress)
	if refusal != nil {
		for _, v := range dec.Violations {
			if v.Rule == "sessions.max_per_owner" {
				s.d.Quotas.Refused(policy.QuotaSessions)
			}
		}
		return refusal, nil
	}
	if persistent && sessionID == "" {
		if q, ok := dec.Quotas[policy.QuotaSessions]; ok && int64(in.Session.OwnerCount) >= q.Max {
			s.d.Quotas.Refused(policy.QuotaSessions)
			return s.quotaRefusal(ctx, tool, sessionID, &quota.Error{Quota: policy.QuotaSessions, Use: int64(in.Session.OwnerCount), Asked: 1, Max: q.Max, Key: q.Key,
				Hint: "end one with " + ToolCleanupSession + " first"}), nil
		}
	}
	if q, ok := dec.Quotas[policy.QuotaSandboxes]; ok && (!persistent || sessionID == "") {
		// A call that starts a sandbox: a transient run, or a new session.
		// Each session the principal holds keeps a sandbox.
		release, err := s.d.Quotas.Take(policy.QuotaSandboxes, p.Sub, 1, int64(len(s.d.Exec.Sessions(p.Sub))), q)
		if err != nil {
			qe := err.(*quota.Error)
			qe.Hint = "wait for a running call to end, or end a persistent session with " + ToolCleanupSession
			return s.quotaRefusal(ctx, tool, sessionID, qe), nil
		}
		defer release()
	}
	if err := s.waitImage(ctx, progress); err != nil {
		return s.failure(tool, sessionID, fmt.Errorf("the sandbox image is not available: %w", err)), nil
	}
	ereq := executor.Request{
		Owner:     p.Sub,
		Code:      code,
		Language:  language,
		State:     state,
		StateKeys: stateKeys,
		Imports:   facts.Imports,
		Modules:   executor.ModuleRules{Allowed: dec.Modules.Allowed, Blocked: dec.Modules.Blocked, Calls: callGuards(dec.Calls.Blocked)},
		// The limits the caller asked for, which the policy judged; the
		// executor fills the others with the maxima in force when the
		// call begins (the decision's are the same, unless a reload came
		// in between: then the executor's are the current ones).
		Limits: executor.Limits{
			Timeout: time.Duration(in.LimitsRequested.Timeout * float64(time.Second)),
			Memory:  in.LimitsRequested.Memory,
			CPUs:    in.LimitsRequested.CPUs,
			Pids:    in.LimitsRequested.Pids,
		},
		Capabilities: &executor.Capabilities{
			Processes:  dec.Capabilities.Processes,
			Sockets:    append([]string{}, dec.Capabilities.Sockets...),
			PTY:        dec.Capabilities.PTY,
			NativeCode: dec.Capabilities.NativeCode,
		},
		// The runtime the policy chose (e.g. runsc for an untrusted
		// principal); the executor never hands the call a sandbox of
		// another.
		Runtime:        dec.Runtime,
		Reuse:          dec.Reuse,
		Progress:       progress,
		IdempotencyKey: idempotencyKeyFrom(ctx),
	}
	if task != nil {
		// The policy let a task's time limit go up to tasks.max_duration.
		ereq.MaxTimeout = s.d.Config().Tasks.MaxDuration.D()
	}
	// With a progress token, the streams go to the client while the code
	// runs (live.go).
	var lv *live
	if prog != nil {
		lv = liveOf(prog)
		ereq.Output = lv.Output
	}
	var liveSent *liveOut
	var res *executor.Result
	var err error
	if persistent {
		asked := sessionID
		res, sessionID, err = s.d.Exec.Persistent(ctx, sessionID, ereq)
		if lv != nil {
			liveSent = lv.finish()
		}
		if asked == "" && sessionID != "" && ctx.Err() != nil {
			// The call that created the session was cancelled (or its
			// client went away): the reply that would tell its id is never
			// read, so nobody could use or end the session.
			s.dropUnseen(ctx, p.Sub, sessionID)
			return s.failure(tool, "", ctx.Err()), nil
		}
	} else {
		res, err = s.d.Exec.Transient(ctx, ereq)
		if lv != nil {
			liveSent = lv.finish()
		}
	}
	if err != nil {
		return s.failure(tool, sessionID, err), nil
	}
	if persistent && res.SessionID == "" {
		res.SessionID = sessionID
	}
	s.logClient(ctx, mcp.LoggingLevelInfo, "run finished", map[string]any{"tool": tool, "status": res.Status, "duration_ms": res.DurationMS})
	r := s.render(p.Sub, res, dec, !persistent)
	if o, ok := r.StructuredContent.(runOut); ok && liveSent != nil {
		o.Live = liveSent
		r.StructuredContent = o
	}
	return r, nil
}

// quotaRefusal renders a call a quota refused: status quota_exceeded, the
// quota's figures and how to raise it.
func (s *Server) quotaRefusal(ctx context.Context, tool, sessionID string, qe *quota.Error) *mcp.CallToolResult {
	s.logClient(ctx, mcp.LoggingLevelWarning, "quota exceeded", map[string]any{"tool": tool, "quota": qe.Quota, "use": qe.Use, "max": qe.Max})
	msg := "quota_exceeded: nothing was run: " + qe.Error()
	return toolError(msg, runOut{Status: "quota_exceeded", Quota: qe, SessionID: sessionID,
		Error: &runError{Type: "QuotaExceeded", Message: qe.Error()}}.sent())
}

// dropUnseen removes a session whose id never reached its client.
func (s *Server) dropUnseen(ctx context.Context, owner, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.d.Exec.Cleanup(cctx, owner, id); err != nil {
		s.d.Logger.Warn("removing a session its client never learned of", "session", id, "err", err)
		return
	}
	s.d.Logger.Info("removed a new session: the call that created it was cancelled", "session", id)
}

// sessionInput describes the session for the policy.
func (s *Server) sessionInput(owner, id string) *policy.Session {
	sess := s.d.Exec.Sessions(owner)
	in := &policy.Session{ID: id, Owner: owner, OwnerCount: len(sess)}
	for _, si := range sess {
		if si.ID == id {
			in.Exists = true
		}
	}
	return in
}

// failure renders an executor error as an isError result that says what to
// do; ctx cancellation is reported as such.
func (s *Server) failure(tool, sessionID string, err error) *mcp.CallToolResult {
	status := "error"
	msg := err.Error()
	switch {
	case errors.Is(err, executor.ErrUnknownSession):
		msg = fmt.Sprintf("unknown session %q: it does not exist (or is not yours). Call %s without session_id to create one, or list-sessions to see yours.", sessionID, ToolExecutePersistent)
	case errors.Is(err, executor.ErrExpiredSession):
		msg = fmt.Sprintf("session %q has expired and its state is gone. Call %s without session_id to start a new one.", sessionID, ToolExecutePersistent)
	case errors.Is(err, context.Canceled):
		status, msg = "killed", "the request was cancelled; the run was stopped and its sandbox removed"
	case errors.Is(err, executor.ErrOutcomeUnknown):
		status, msg = "outcome_unknown", "outcome_unknown: "+msg
	case errors.Is(err, executor.ErrAlreadyRan):
		status, msg = "already_ran", "already_ran: "+msg
	}
	if tool != ToolExecutePersistent && tool != ToolExecuteTransient {
		return toolError(msg, nil)
	}
	return toolError(msg, runOut{Status: status, Error: &runError{Type: "ServerError", Message: msg}, SessionID: sessionID}.sent())
}

// render turns an executor result into the tool result: structured
// content, one readable text block with the streams, figures as images,
// created files and the full text of cut streams as resource links.
func (s *Server) render(owner string, res *executor.Result, dec policy.Decision, transient bool) *mcp.CallToolResult {
	warnings := dec.Warnings
	out := runOut{
		Status: res.Status, stdout: res.Stdout, stderr: res.Stderr,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		Result: res.Result, State: res.State, DroppedState: res.DroppedState,
		MissingState: res.MissingState, Unreturned: res.Unreturned,
		Images: len(res.Images), DurationMS: res.DurationMS, SessionID: res.SessionID, StateLost: res.StateLost,
		Integrity: res.Integrity, IntegrityReason: res.IntegrityReason, IdleCPUMS: res.IdleCPUMS,
		Warnings: warnings,
	}.sent()
	if res.Interrupted != "" {
		out.Warnings = append(append([]policy.Violation{}, out.Warnings...), policy.Violation{Rule: "session.interrupted_call",
			Msg: "an earlier call into this session was cut short when its server (" + res.Interrupted + ") stopped, and this server took the session over: that call may have run, in whole or in part, and its effects may be in the session's state"})
	}
	if len(res.StateTooLarge) > 0 {
		parts := make([]string, len(res.StateTooLarge))
		for i, st := range res.StateTooLarge {
			out.StateTooLarge = append(out.StateTooLarge, stateSize{Name: st.Name, Bytes: st.Bytes})
			parts[i] = fmt.Sprintf("%s (%d bytes)", st.Name, st.Bytes)
		}
		maxState := int64(s.d.Config().Limits.MaxStateBytes)
		if maxState <= 0 {
			maxState = 1 << 20
		}
		out.Warnings = append(append([]policy.Violation{}, out.Warnings...), policy.Violation{Rule: "limits.max_state_bytes",
			Msg: fmt.Sprintf("not returned in state, too large: %s; the returned state is capped at %d bytes (limits.max_state_bytes). "+
				"The run itself is not affected: keep large data in a file, return a summary, or use execute-persistent", strings.Join(parts, ", "), maxState)})
	}
	if out.StdoutBytes == 0 {
		out.StdoutBytes = int64(len(res.Stdout))
	}
	if out.StderrBytes == 0 {
		out.StderrBytes = int64(len(res.Stderr))
	}
	if res.Error != nil {
		out.Error = &runError{Type: res.Error.Type, Message: res.Error.Message, Line: res.Error.Line, Col: res.Error.Col, Traceback: res.Error.Traceback}
	}
	var links []mcp.Content
	richURIs := make([]string, len(res.Rich))
	if res.StdoutFull != "" || res.StderrFull != "" || len(res.FileData) > 0 || len(res.Rich) > 0 {
		cfg := s.d.Config()
		s.outputs.setLimits(int64(cfg.Outputs.MaxTotalBytes), cfg.Outputs.TTL.D())
		call := newCallID()
		q, ok := dec.Quotas[policy.QuotaOutputBytes]
		if !ok {
			q = policy.Quota{Max: int64(cfg.Outputs.MaxTotalBytes), Key: "outputs.max_total_bytes"}
		}
		keep := func(what, stream, text string, total int64) string {
			uri, err := s.outputs.put(owner, call, stream, text, total, q)
			if err != nil {
				s.d.Quotas.Refused(policy.QuotaOutputBytes)
				out.notes = append(out.notes, what+" not kept: "+err.Error())
			}
			return uri
		}
		for _, f := range res.FileData {
			uri := keep("file "+f.Path, "files/"+relPath(cfg.Docker.WorkingDir, f.Path), string(f.Data), int64(len(f.Data)))
			if uri == "" {
				continue
			}
			out.ReturnedFiles = append(out.ReturnedFiles, uri)
			links = append(links, mcp.NewEmbeddedResource(resourceContents(uri, f.Path, f.Data)))
		}
		if res.StdoutFull != "" {
			if out.StdoutURI = keep("full stdout", "stdout", res.StdoutFull, out.StdoutBytes); out.StdoutURI != "" {
				links = append(links, mcp.NewResourceLink(out.StdoutURI, "stdout", fmt.Sprintf("full stdout of this call (%d bytes)", len(res.StdoutFull)), "text/plain"))
			}
		}
		if res.StderrFull != "" {
			if out.StderrURI = keep("full stderr", "stderr", res.StderrFull, out.StderrBytes); out.StderrURI != "" {
				links = append(links, mcp.NewResourceLink(out.StderrURI, "stderr", fmt.Sprintf("full stderr of this call (%d bytes)", len(res.StderrFull)), "text/plain"))
			}
		}
		// HTML and SVG are embedded whether kept or not; kept, their URIs
		// can be read again for a while.
		for i, it := range res.Rich {
			if name := richName(it); name != "" {
				what := richKind(it.MIME) + " of " + richSource(it.From, it.N) + " (embedded in this result, but not readable with resources/read)"
				if richURIs[i] = keep(what, "display/"+name, string(it.Data), int64(len(it.Data))); richURIs[i] == "" {
					richURIs[i] = outputURI(call, "display/"+name)
				}
			}
		}
	}
	for _, f := range res.Files {
		switch {
		case res.SessionID != "":
			out.Files = append(out.Files, s.fileURI(res.SessionID, f))
		case transient:
			out.DiscardedFiles = append(out.DiscardedFiles, f)
		}
	}
	rich := richContent(res.Rich, richURIs)
	for i, it := range res.Rich {
		out.Rich = append(out.Rich, richOut{MIME: it.MIME, From: it.From, N: it.N, Bytes: len(it.Data), Width: it.Width, Height: it.Height, URI: richURIs[i]})
	}
	for _, d := range res.RichDropped {
		out.RichDropped = append(out.RichDropped, richDropped{MIME: d.MIME, From: d.From, N: d.N, Bytes: d.Bytes, Why: d.Why, Limit: d.Limit, Error: d.Error})
	}
	content := []mcp.Content{mcp.NewTextContent(text(out))}
	for _, img := range res.Images {
		content = append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img.PNG), "image/png"))
	}
	content = append(content, rich...)
	content = append(content, links...)
	for _, f := range res.Files {
		if res.SessionID != "" {
			content = append(content, mcp.NewResourceLink(s.fileURI(res.SessionID, f), f, "file written by the run in /workspace", mimeFor(f)))
		}
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: out,
		IsError:           res.Status != "ok",
	}
}

// text is the readable block: what an LLM or a person reads first.
func text(o runOut) string {
	var b strings.Builder
	switch o.Status {
	case "ok":
		fmt.Fprintf(&b, "ok (%.0f ms)\n", o.DurationMS)
	case "timeout":
		fmt.Fprintf(&b, "timeout: the code ran past its time limit and was stopped (%.0f ms)\n", o.DurationMS)
	case "oom":
		// The message names the memory limit and how it is raised: shown
		// here, since a MemoryError's traceback would hide it below.
		if o.Error != nil && o.Error.Message != "" {
			b.WriteString("oom: " + o.Error.Message + "\n")
		} else {
			b.WriteString("oom: the code ran out of memory and was stopped\n")
		}
	case "killed":
		b.WriteString("killed: the sandbox was stopped\n")
	case "refused":
		b.WriteString("refused: the sandbox refused to run the code\n")
	case "syntax_error":
		b.WriteString("syntax_error: the code does not parse, nothing was run")
		if o.Error != nil {
			fmt.Fprintf(&b, " (line %d, col %d)", o.Error.Line, o.Error.Col)
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "%s (%.0f ms)\n", o.Status, o.DurationMS)
	}
	if o.StateLost {
		b.WriteString("state lost: the session's sandbox had stopped and was restarted, so variables, imports and files from earlier calls are gone\n")
	}
	if o.Integrity == "unverified" && o.IntegrityReason != "" && !strings.HasPrefix(o.IntegrityReason, "earlier calls") {
		b.WriteString("integrity unverified: " + o.IntegrityReason + "\n")
	}
	stream := func(name, shown string, cut bool, total int64, uri string) {
		if shown == "" {
			return
		}
		b.WriteString("--- " + name + " ---\n" + shown)
		if !strings.HasSuffix(shown, "\n") {
			b.WriteString("\n")
		}
		if cut {
			fmt.Fprintf(&b, "(%s cut: %d bytes written, %d shown", name, total, len(shown))
			if uri != "" {
				b.WriteString("; full text: " + uri)
			}
			b.WriteString(")\n")
		}
	}
	stream("stdout", o.stdout, o.StdoutTruncated, o.StdoutBytes, o.StdoutURI)
	stream("stderr", o.stderr, o.StderrTruncated, o.StderrBytes, o.StderrURI)
	if o.Result != nil {
		b.WriteString("result: " + *o.Result + "\n")
	}
	if o.Error != nil {
		switch {
		case o.Error.Traceback != "":
			b.WriteString(strings.TrimRight(o.Error.Traceback, "\n") + "\n")
		case o.Status == "oom": // the first line says it
		default:
			fmt.Fprintf(&b, "%s: %s\n", o.Error.Type, o.Error.Message)
		}
	}
	if len(o.DroppedState) > 0 {
		parts := make([]string, len(o.DroppedState))
		for i, d := range o.DroppedState {
			parts[i] = d.Name + " (" + d.Type + ")"
		}
		b.WriteString("not kept in state (not JSON-serialisable): " + strings.Join(parts, ", ") + "\n")
	}
	if len(o.MissingState) > 0 {
		b.WriteString("not defined after the run, so not in state: " + strings.Join(o.MissingState, ", ") + "\n")
	}
	if len(o.Unreturned) > 0 {
		b.WriteString("globals not returned as state (name them in state_keys to get them): " + strings.Join(o.Unreturned, ", ") + "\n")
	}
	if o.Images > 0 {
		fmt.Fprintf(&b, "%d figure(s) attached\n", o.Images)
	}
	if len(o.Rich) > 0 {
		parts := make([]string, len(o.Rich))
		for i, r := range o.Rich {
			parts[i] = fmt.Sprintf("%s of %s (%d bytes)", richKind(r.MIME), richSource(r.From, r.N), r.Bytes)
		}
		b.WriteString("rich output attached: " + strings.Join(parts, ", ") + "\n")
	}
	for _, d := range o.RichDropped {
		b.WriteString("rich output not attached: " + richDroppedNote(d) + "\n")
	}
	for _, f := range o.Files {
		b.WriteString("file: " + f + "\n")
	}
	if len(o.DiscardedFiles) > 0 {
		b.WriteString("files written to /workspace were deleted when this call ended: " + strings.Join(o.DiscardedFiles, ", ") + "\n")
		if len(o.ReturnedFiles) > 0 {
			fmt.Fprintf(&b, "the %d small one(s) are embedded in this result and readable for a while at: %s\n", len(o.ReturnedFiles), strings.Join(o.ReturnedFiles, ", "))
		}
		if len(o.ReturnedFiles) < len(o.DiscardedFiles) {
			b.WriteString("to keep larger files, use execute-persistent and read-file\n")
		}
	}
	for _, n := range o.notes {
		b.WriteString(n + "\n")
	}
	for _, w := range o.Warnings {
		if w.Line == 0 {
			fmt.Fprintf(&b, "warning: %s: %s\n", w.Rule, w.Msg)
			continue
		}
		fmt.Fprintf(&b, "warning: line %d: %s: %s\n", w.Line, w.Rule, w.Msg)
	}
	if o.SessionID != "" {
		b.WriteString("session_id: " + o.SessionID + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// callGuards are the decision's blocked calls the runner enforces at run
// time too.
func callGuards(blocked []string) []executor.CallGuard {
	g, _ := executor.CallGuards(blocked)
	return g
}
