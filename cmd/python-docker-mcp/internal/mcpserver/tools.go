package mcpserver

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Tool names, as clients call them: the policy's names, so the Rego and
// the tools cannot disagree.
const (
	ToolExecuteTransient  = policy.ToolExecuteTransient
	ToolExecutePersistent = policy.ToolExecutePersistent
	ToolInstallPackage    = policy.ToolInstallPackage
	ToolCleanupSession    = policy.ToolCleanupSession
	ToolListSessions      = policy.ToolListSessions
	ToolReadFile          = policy.ToolReadFile
	ToolWriteFile         = policy.ToolWriteFile
	ToolListFiles         = policy.ToolListFiles
)

// ResourceTemplate is the URI template of session files.
const ResourceTemplate = "sandbox://{session_id}/{+path}"

const codeDescription = "Python 3.13 source code. It is checked by a static gate and a policy before it runs; " +
	"a refusal lists each violation with its line. The value of a final bare expression is returned as `result` " +
	"(like a notebook cell); print() output comes back as stdout. Installed: numpy, pandas, scipy, matplotlib, " +
	"scikit-learn, sympy and the standard library. There is no network. Open matplotlib figures are returned as PNG images."

const timeoutDescription = "Seconds the code may run before it is stopped (optional; at most the server's limit, 30 by default). " +
	"Asking for more than the limit is an error that names the maximum."

const sessionDescription = "The id of a persistent session, as returned by execute-persistent."

var hintTrue, hintFalse = true, false

func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolAnnotation {
	b := func(v bool) *bool {
		if v {
			return &hintTrue
		}
		return &hintFalse
	}
	return mcp.ToolAnnotation{Title: title, ReadOnlyHint: b(readOnly), DestructiveHint: b(destructive), IdempotentHint: b(idempotent), OpenWorldHint: b(openWorld)}
}

func tool(name, title, description string, in, out map[string]any, ann mcp.ToolAnnotation) mcp.Tool {
	inJSON, _ := json.Marshal(in)
	outJSON, _ := json.Marshal(out)
	return mcp.Tool{
		Name:            name,
		Title:           title,
		Description:     description,
		RawInputSchema:  inJSON,
		RawOutputSchema: outJSON,
		Annotations:     ann,
	}
}

func object(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func str(desc string) map[string]any {
	if desc == "" {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"type": "string", "description": desc}
}

var violationSchema = object(map[string]any{
	"rule": str("The policy rule that decided."),
	"msg":  str("What is wrong and what to do instead."),
	"line": map[string]any{"type": "integer", "description": "1-based line in the code (0 when not about a line)."},
	"col":  map[string]any{"type": "integer", "description": "0-based column."},
}, "rule", "msg", "line", "col")

// runOutput is the output schema of both execute tools.
func runOutput() map[string]any {
	return object(map[string]any{
		"status": map[string]any{"type": "string", "enum": []string{"ok", "error", "timeout", "oom", "killed", "refused", "denied"},
			"description": "ok: ran to the end; error: the code raised; timeout/oom/killed: stopped by a limit; refused: the sandbox's own check refused; denied: the policy refused, see violations."},
		"stdout":           str("Standard output (head and tail kept when over the cap)."),
		"stderr":           str("Standard error."),
		"stdout_truncated": map[string]any{"type": "boolean"},
		"stderr_truncated": map[string]any{"type": "boolean"},
		"result":           map[string]any{"type": []string{"string", "null"}, "description": "repr() of the final expression's value."},
		"error": map[string]any{"type": []string{"object", "null"}, "properties": map[string]any{
			"type": str("Exception type."), "message": str("Exception message."),
			"line": map[string]any{"type": "integer"}, "traceback": str("Traceback of the user's code only."),
		}},
		"state":         map[string]any{"type": "object", "description": "JSON-serialisable globals after the run; pass back as `state` to continue (execute-transient)."},
		"dropped_state": map[string]any{"type": "array", "items": object(map[string]any{"name": str(""), "type": str("")}, "name", "type"), "description": "Globals that are not JSON-serialisable and did not survive."},
		"images":        map[string]any{"type": "integer", "description": "Number of PNG figures returned as image content."},
		"files":         map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "sandbox:// URIs of files the run created or changed."},
		"duration_ms":   map[string]any{"type": "number"},
		"session_id":    str("The persistent session (execute-persistent)."),
		"state_lost":    map[string]any{"type": "boolean", "description": "True when the session had to be restarted and its variables are gone."},
		"violations":    map[string]any{"type": "array", "items": violationSchema},
		"warnings":      map[string]any{"type": "array", "items": violationSchema},
	}, "status")
}

// Tools returns the tool definitions, in the order tools/list shows them.
func Tools() []mcp.Tool {
	return []mcp.Tool{
		tool(ToolExecuteTransient, "Run Python (fresh sandbox)",
			"Run Python code in a fresh, single-use sandbox (no network, read-only system, memory/CPU/time limits). "+
				"Nothing persists between calls except the JSON `state` you pass in and get back. "+
				"Use execute-persistent when you need variables, imports or files to live across calls.",
			object(map[string]any{
				"code": str(codeDescription),
				"state": map[string]any{"type": "object", "additionalProperties": true,
					"description": "Variables to define before the code runs, as a JSON object of name to JSON value. Pass the `state` returned by the previous call to continue from it. Only JSON-serialisable values survive; the others are listed in dropped_state."},
				"timeout": map[string]any{"type": "number", "exclusiveMinimum": 0, "description": timeoutDescription},
			}, "code"),
			runOutput(), annotations("Run Python (fresh sandbox)", false, false, false, false)),
		tool(ToolExecutePersistent, "Run Python (persistent session)",
			"Run Python code in a persistent session: variables, imports, functions and files in /workspace stay between calls. "+
				"Leave session_id empty to create a session; its id comes back as session_id. Sessions expire after a period of inactivity; "+
				"call cleanup-session when done.",
			object(map[string]any{
				"code":       str(codeDescription),
				"session_id": str("Session to run in; empty or absent creates a new session."),
				"timeout":    map[string]any{"type": "number", "exclusiveMinimum": 0, "description": timeoutDescription},
			}, "code"),
			runOutput(), annotations("Run Python (persistent session)", false, false, false, false)),
		tool(ToolInstallPackage, "Install a Python package",
			"Install a Python package into a session (or, without session_id, for your transient runs), from the operator's configured wheelhouse or index. "+
				"The sandbox itself never gets network access. Subject to the operator's package policy. "+
				"Dependencies are not installed automatically: install each one by name first. Only wheels are installed unless the operator allows source builds. "+
				"In a session the package is importable in the next call, without a restart.",
			object(map[string]any{
				"package_name": str("Package name as on PyPI, e.g. \"tabulate\". No URLs, paths or options."),
				"version":      str("Optional version specifier, e.g. \"==0.9.0\" or \">=1.2,<2\"; a bare version such as \"0.9.0\" means ==0.9.0."),
				"session_id":   str("Optional persistent session to install into."),
			}, "package_name"),
			object(map[string]any{
				"package": str("The package name."), "version": str("Installed version."), "session_id": str("The session installed into; empty for transient runs."),
				"output":     str("Installer output (capped)."),
				"status":     str("ok, denied (see violations), invalid (bad name or version), not_found (not in the wheelhouse or index), error, timeout, unavailable."),
				"message":    str("What happened, in one sentence."),
				"violations": map[string]any{"type": "array", "items": violationSchema},
			}, "status"),
			annotations("Install a Python package", false, false, true, false)),
		tool(ToolCleanupSession, "End a session",
			"End a persistent session and delete its sandbox, variables and files.",
			object(map[string]any{"session_id": str(sessionDescription)}, "session_id"),
			object(map[string]any{"session_id": str(""), "removed": map[string]any{"type": "boolean"}}, "session_id", "removed"),
			annotations("End a session", false, true, true, false)),
		tool(ToolListSessions, "List my sessions",
			"List your persistent sessions with their age, idle time and the time left before they expire.",
			object(map[string]any{}),
			object(map[string]any{"sessions": map[string]any{"type": "array", "items": object(map[string]any{
				"session_id":         str(""),
				"created":            str("RFC 3339 time."),
				"last_used":          str("RFC 3339 time."),
				"age_seconds":        map[string]any{"type": "number"},
				"idle_seconds":       map[string]any{"type": "number"},
				"expires_in_seconds": map[string]any{"type": "number"},
				"busy":               map[string]any{"type": "boolean"},
			}, "session_id", "created", "last_used", "age_seconds", "idle_seconds", "expires_in_seconds", "busy")}}, "sessions"),
			annotations("List my sessions", true, false, true, false)),
		tool(ToolReadFile, "Read a session file",
			"Read a file from a session's /workspace. Text comes back as text, other files as base64.",
			object(map[string]any{"session_id": str(sessionDescription), "path": str("Path relative to /workspace (or absolute under /workspace).")}, "session_id", "path"),
			object(map[string]any{"path": str(""), "size": map[string]any{"type": "integer"}, "encoding": map[string]any{"type": "string", "enum": []string{"text", "base64"}}, "content": str(""), "uri": str("")}, "path", "size", "encoding", "content"),
			annotations("Read a session file", true, false, true, false)),
		tool(ToolWriteFile, "Write a session file",
			"Write a file into a session's /workspace (creating directories as needed), e.g. data for the code to read.",
			object(map[string]any{
				"session_id": str(sessionDescription),
				"path":       str("Path relative to /workspace."),
				"content":    str("File content, as text or base64 (see encoding)."),
				"encoding":   map[string]any{"type": "string", "enum": []string{"text", "base64"}, "default": "text", "description": "How content is encoded."},
			}, "session_id", "path", "content"),
			object(map[string]any{"path": str(""), "size": map[string]any{"type": "integer"}, "uri": str("")}, "path", "size"),
			annotations("Write a session file", false, true, true, false)),
		tool(ToolListFiles, "List session files",
			"List the files under a directory of a session's /workspace.",
			object(map[string]any{"session_id": str(sessionDescription), "path": str("Directory relative to /workspace; default the top.")}, "session_id"),
			object(map[string]any{"path": str(""), "files": map[string]any{"type": "array", "items": object(map[string]any{
				"path": str(""), "size": map[string]any{"type": "integer"}, "dir": map[string]any{"type": "boolean"}, "modified": str(""), "uri": str(""),
			}, "path", "size", "dir")}}, "path", "files"),
			annotations("List session files", true, false, true, false)),
	}
}
