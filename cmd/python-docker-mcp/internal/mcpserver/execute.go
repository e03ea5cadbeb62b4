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

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// runOut is the structured content of the execute tools. The streams are
// not in it: they are in the text content, once (see text).
type runOut struct {
	Status          string             `json:"status"`
	StdoutBytes     int64              `json:"stdout_bytes"`
	StderrBytes     int64              `json:"stderr_bytes"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	StderrTruncated bool               `json:"stderr_truncated"`
	StdoutURI       string             `json:"stdout_uri,omitempty"`
	StderrURI       string             `json:"stderr_uri,omitempty"`
	Result          *string            `json:"result"`
	Error           *runError          `json:"error"`
	State           json.RawMessage    `json:"state,omitempty"`
	DroppedState    []executor.Dropped `json:"dropped_state"`
	Images          int                `json:"images"`
	Files           []string           `json:"files"`
	DiscardedFiles  []string           `json:"discarded_files,omitempty"`
	ReturnedFiles   []string           `json:"returned_files,omitempty"`
	DurationMS      float64            `json:"duration_ms"`
	SessionID       string             `json:"session_id,omitempty"`
	StateLost       bool               `json:"state_lost"`
	Violations      []policy.Violation `json:"violations"`
	Warnings        []policy.Violation `json:"warnings"`

	// The streams as shown, for the text content only.
	stdout, stderr string
}

type runError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Line      int    `json:"line"`
	Traceback string `json:"traceback"`
}

func (s *Server) executeTransient(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.execute(ctx, req, false)
}

func (s *Server) executePersistent(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.execute(ctx, req, true)
}

// gate runs the static step and the policy for code. It returns either a
// decision that allows, or a result to send back (a denial).
func (s *Server) gate(ctx context.Context, tool, code string, in policy.Input) (analyze.Facts, policy.Decision, *mcp.CallToolResult) {
	cfg := s.d.Config()
	facts, err := analyze.Source([]byte(code), analyze.Options{MaxBytes: int(cfg.Limits.MaxCodeBytes)})
	if err != nil {
		return facts, policy.Decision{}, s.denied(ctx, tool, []policy.Violation{policy.AnalyzeViolation(err)}, nil)
	}
	in.Tool = tool
	in.Code = policy.NewCode(facts, []byte(code))
	dec, err := s.d.Gate.Decide(ctx, in)
	if err != nil {
		return facts, dec, toolError("the policy could not be evaluated (the server's Rego failed; tell the operator): "+err.Error(),
			structured(runOut{Status: "denied", Violations: []policy.Violation{{Rule: "policy.error", Msg: err.Error()}}, Warnings: []policy.Violation{}, DroppedState: []executor.Dropped{}, Files: []string{}}))
	}
	if !dec.Allow {
		return facts, dec, s.denied(ctx, tool, dec.Violations, dec.Warnings)
	}
	return facts, dec, nil
}

// denied renders a refusal: each violation with its rule, line and column.
func (s *Server) denied(ctx context.Context, tool string, vs, ws []policy.Violation) *mcp.CallToolResult {
	if ws == nil {
		ws = []policy.Violation{}
	}
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
	r.StructuredContent = structured(runOut{Status: "denied", Violations: vs, Warnings: ws, DroppedState: []executor.Dropped{}, Files: []string{}})
	return r
}

func (s *Server) execute(ctx context.Context, req mcp.CallToolRequest, persistent bool) (*mcp.CallToolResult, error) {
	tool := ToolExecuteTransient
	if persistent {
		tool = ToolExecutePersistent
	}
	code := req.GetString("code", "")
	timeout := req.GetFloat("timeout", 0)
	sessionID := req.GetString("session_id", "")
	var state json.RawMessage
	if v, ok := req.GetArguments()["state"]; ok && v != nil && !persistent {
		if m, ok := v.(map[string]any); ok {
			if bad := checkStateKeys(m); len(bad) > 0 {
				msg := "invalid state, nothing was run:\n  " + strings.Join(bad, "\n  ")
				return toolError(msg, structured(runOut{Status: "invalid", Error: &runError{Type: "InvalidState", Message: strings.Join(bad, "; ")},
					DroppedState: []executor.Dropped{}, Files: []string{}, Violations: []policy.Violation{}, Warnings: []policy.Violation{}})), nil
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return toolError("state is not a JSON object: "+err.Error(), nil), nil
		}
		state = b
	}
	p := s.principal(ctx)
	in := policy.Input{Principal: policyPrincipal(p), LimitsRequested: policy.Limits{Timeout: timeout}}
	if persistent {
		in.Session = s.sessionInput(p.Sub, sessionID)
	}
	facts, dec, refusal := s.gate(ctx, tool, code, in)
	if refusal != nil {
		return refusal, nil
	}
	progress := s.progressFunc(ctx, req)
	if err := s.waitImage(ctx, progress); err != nil {
		return s.failure(tool, sessionID, fmt.Errorf("the sandbox image is not available: %w", err)), nil
	}
	ereq := executor.Request{
		Owner:   p.Sub,
		Code:    code,
		State:   state,
		Imports: facts.Imports,
		Modules: executor.ModuleRules{Allowed: dec.Modules.Allowed, Blocked: dec.Modules.Blocked},
		Limits: executor.Limits{
			Timeout: time.Duration(dec.Limits.Timeout * float64(time.Second)),
			Memory:  dec.Limits.Memory,
			CPUs:    dec.Limits.CPUs,
			Pids:    dec.Limits.Pids,
		},
		Capabilities: &executor.Capabilities{
			Processes:  dec.Capabilities.Processes,
			Sockets:    append([]string{}, dec.Capabilities.Sockets...),
			PTY:        dec.Capabilities.PTY,
			NativeCode: dec.Capabilities.NativeCode,
		},
		Progress: progress,
	}
	var res *executor.Result
	var err error
	if persistent {
		res, sessionID, err = s.d.Exec.Persistent(ctx, sessionID, ereq)
	} else {
		res, err = s.d.Exec.Transient(ctx, ereq)
	}
	if err != nil {
		return s.failure(tool, sessionID, err), nil
	}
	if persistent && res.SessionID == "" {
		res.SessionID = sessionID
	}
	s.logClient(ctx, mcp.LoggingLevelInfo, "run finished", map[string]any{"tool": tool, "status": res.Status, "duration_ms": res.DurationMS})
	return s.render(p.Sub, res, dec.Warnings, !persistent), nil
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
	}
	out := runOut{Status: status, Error: &runError{Type: "ServerError", Message: msg}, SessionID: sessionID,
		DroppedState: []executor.Dropped{}, Files: []string{}, Violations: []policy.Violation{}, Warnings: []policy.Violation{}}
	if tool != ToolExecutePersistent && tool != ToolExecuteTransient {
		return toolError(msg, nil)
	}
	r := mcp.NewToolResultError(msg)
	r.StructuredContent = structured(out)
	return r
}

// render turns an executor result into the tool result: structured
// content, one readable text block with the streams, figures as images,
// created files and the full text of cut streams as resource links.
func (s *Server) render(owner string, res *executor.Result, warnings []policy.Violation, transient bool) *mcp.CallToolResult {
	if warnings == nil {
		warnings = []policy.Violation{}
	}
	out := runOut{
		Status: res.Status, stdout: res.Stdout, stderr: res.Stderr,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		Result: res.Result, State: res.State, DroppedState: res.DroppedState,
		Images: len(res.Images), DurationMS: res.DurationMS, SessionID: res.SessionID, StateLost: res.StateLost,
		Violations: []policy.Violation{}, Warnings: warnings, Files: []string{},
	}
	if out.StdoutBytes == 0 {
		out.StdoutBytes = int64(len(res.Stdout))
	}
	if out.StderrBytes == 0 {
		out.StderrBytes = int64(len(res.Stderr))
	}
	if out.DroppedState == nil {
		out.DroppedState = []executor.Dropped{}
	}
	if res.Error != nil {
		out.Error = &runError{Type: res.Error.Type, Message: res.Error.Message, Line: res.Error.Line, Traceback: res.Error.Traceback}
	}
	var links []mcp.Content
	if res.StdoutFull != "" || res.StderrFull != "" || len(res.FileData) > 0 {
		cfg := s.d.Config()
		s.outputs.setLimits(int64(cfg.Outputs.MaxTotalBytes), cfg.Outputs.TTL.D())
		call := newCallID()
		for _, f := range res.FileData {
			uri := s.outputs.put(owner, call, "files/"+relPath(cfg.Docker.WorkingDir, f.Path), string(f.Data), int64(len(f.Data)))
			if uri == "" {
				continue
			}
			out.ReturnedFiles = append(out.ReturnedFiles, uri)
			links = append(links, mcp.NewEmbeddedResource(resourceContents(uri, f.Path, f.Data)))
		}
		if res.StdoutFull != "" {
			if out.StdoutURI = s.outputs.put(owner, call, "stdout", res.StdoutFull, out.StdoutBytes); out.StdoutURI != "" {
				links = append(links, mcp.NewResourceLink(out.StdoutURI, "stdout", fmt.Sprintf("full stdout of this call (%d bytes)", len(res.StdoutFull)), "text/plain"))
			}
		}
		if res.StderrFull != "" {
			if out.StderrURI = s.outputs.put(owner, call, "stderr", res.StderrFull, out.StderrBytes); out.StderrURI != "" {
				links = append(links, mcp.NewResourceLink(out.StderrURI, "stderr", fmt.Sprintf("full stderr of this call (%d bytes)", len(res.StderrFull)), "text/plain"))
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
	content := []mcp.Content{mcp.NewTextContent(text(out))}
	for _, img := range res.Images {
		content = append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img.PNG), "image/png"))
	}
	content = append(content, links...)
	for _, f := range res.Files {
		if res.SessionID != "" {
			content = append(content, mcp.NewResourceLink(s.fileURI(res.SessionID, f), f, "file written by the run in /workspace", mimeFor(f)))
		}
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: structured(out),
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
		b.WriteString("oom: the code ran out of memory and was stopped\n")
	case "killed":
		b.WriteString("killed: the sandbox was stopped\n")
	case "refused":
		b.WriteString("refused: the sandbox refused to run the code\n")
	default:
		fmt.Fprintf(&b, "%s (%.0f ms)\n", o.Status, o.DurationMS)
	}
	if o.StateLost {
		b.WriteString("state lost: the session's sandbox had stopped and was restarted, so variables, imports and files from earlier calls are gone\n")
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
		if o.Error.Traceback != "" {
			b.WriteString(strings.TrimRight(o.Error.Traceback, "\n") + "\n")
		} else {
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
	if o.Images > 0 {
		fmt.Fprintf(&b, "%d figure(s) attached\n", o.Images)
	}
	for _, f := range o.Files {
		b.WriteString("file: " + f + "\n")
	}
	if len(o.DiscardedFiles) > 0 {
		b.WriteString("files written to /workspace were deleted with this single-use sandbox: " + strings.Join(o.DiscardedFiles, ", ") + "\n")
		if len(o.ReturnedFiles) > 0 {
			fmt.Fprintf(&b, "the %d small one(s) are embedded in this result and readable for a while at: %s\n", len(o.ReturnedFiles), strings.Join(o.ReturnedFiles, ", "))
		}
		if len(o.ReturnedFiles) < len(o.DiscardedFiles) {
			b.WriteString("to keep larger files, use execute-persistent and read-file\n")
		}
	}
	for _, w := range o.Warnings {
		fmt.Fprintf(&b, "warning: line %d: %s: %s\n", w.Line, w.Rule, w.Msg)
	}
	if o.SessionID != "" {
		b.WriteString("session_id: " + o.SessionID + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
