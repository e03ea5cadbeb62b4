package mcpserver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
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

// ResourceTemplate is the URI template of session files; PATH is relative
// to the session's working directory (/workspace).
const ResourceTemplate = "sandbox://{session_id}/{+path}"

// imagePackages names what the sandbox image provides, for the tool
// descriptions: the Python packages of a managed image's recipe
// (image.packages), or a generic phrase for an operator's own image.
func imagePackages(cfg config.Config) string {
	if !image.Managed(cfg.Docker.Image) {
		return "the packages of the operator's image " + cfg.Docker.Image + " and the standard library"
	}
	var names []string
	for _, p := range cfg.Image.Packages {
		name, ok := strings.CutPrefix(p, "python3-")
		if !ok || name == "pip" || name == "venv" {
			continue
		}
		if name == "sklearn" {
			name = "scikit-learn (import sklearn)"
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return "the standard library"
	}
	return strings.Join(names, ", ") + " and the standard library"
}

// seconds renders a duration in seconds for a description.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// durationText renders a duration for a description ("30 min").
func durationText(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return seconds(d) + " s"
}

// sizeText renders a byte count for a description ("64 KiB").
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func codeDescription(cfg config.Config) string {
	d := "Python 3.13 source code. It is checked by a static gate and a policy before it runs; " +
		"a refusal lists each violation with its line. The value of a final bare expression is returned as `result` " +
		"(like a notebook cell); print() output comes back as stdout. Installed: " + imagePackages(cfg) + ". There is no network. " +
		"Open matplotlib figures are returned as PNG images."
	if len(cfg.AllowedModules) > 0 {
		d += " Only these modules (and their submodules) may be imported: " + strings.Join(cfg.AllowedModules, ", ") + "."
	}
	if len(cfg.BlockedModules) > 0 {
		d += " These modules may not be imported: " + strings.Join(cfg.BlockedModules, ", ") + "."
	}
	return d
}

func timeoutDescription(cfg config.Config) string {
	return "Seconds the code may run before it is stopped (optional; at most the server's limit of " + seconds(cfg.Docker.Timeout.D()) + " s, which is also the default). " +
		"Asking for more than the limit is an error that names the maximum."
}

// outputNote tells the agent how output comes back.
func outputNote(cfg config.Config) string {
	return "Output: stdout and stderr come back in the text of the result, each up to " + sizeText(int64(cfg.Limits.MaxOutputBytes)) +
		"; a longer stream shows its head and tail, and its full text (up to " + sizeText(int64(cfg.Outputs.MaxStreamBytes)) +
		") is attached as a resource link to read with resources/read, kept for " + durationText(cfg.Outputs.TTL.D()) + ". "
}

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

// runOutput is the output schema of both execute tools. The streams
// themselves are in the text content only (sent once); the structured
// content says how long they were, whether the text shows them cut, and
// where their full text is.
func runOutput() map[string]any {
	integer := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	return object(map[string]any{
		"status": map[string]any{"type": "string", "enum": []string{"ok", "error", "timeout", "oom", "killed", "refused", "denied", "invalid"},
			"description": "ok: ran to the end; error: the code raised; timeout/oom/killed: stopped by a limit; refused: the sandbox's own check refused; denied: the policy refused, see violations; invalid: bad arguments (e.g. state keys), nothing ran."},
		"stdout_bytes":     integer("Length of stdout as the code wrote it. The text itself is in the result's text content, under --- stdout ---."),
		"stderr_bytes":     integer("Length of stderr as the code wrote it."),
		"stdout_truncated": map[string]any{"type": "boolean", "description": "The text shows only the head and tail of stdout; stdout_uri has the full text."},
		"stderr_truncated": map[string]any{"type": "boolean", "description": "The text shows only the head and tail of stderr; stderr_uri has the full text."},
		"stdout_uri":       str("sandbox-output:// resource with the full stdout, when it was cut (read it with resources/read; kept for a limited time)."),
		"stderr_uri":       str("sandbox-output:// resource with the full stderr, when it was cut."),
		"result":           map[string]any{"type": []string{"string", "null"}, "description": "repr() of the final expression's value."},
		"error": map[string]any{"type": []string{"object", "null"}, "properties": map[string]any{
			"type": str("Exception type."), "message": str("Exception message."),
			"line": map[string]any{"type": "integer"}, "traceback": str("Traceback of the user's code only."),
		}},
		"state":           map[string]any{"type": "object", "description": "JSON-serialisable globals after the run; pass back as `state` to continue (execute-transient)."},
		"dropped_state":   map[string]any{"type": "array", "items": object(map[string]any{"name": str(""), "type": str("")}, "name", "type"), "description": "Globals that are not JSON-serialisable and did not survive."},
		"images":          map[string]any{"type": "integer", "description": "Number of PNG figures returned as image content."},
		"files":           map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "sandbox:// URIs of files the run created or changed (execute-persistent)."},
		"discarded_files": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Files an execute-transient run wrote into /workspace: they were deleted with its sandbox."},
		"returned_files":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "sandbox-output:// URIs of the small discarded files, read before the sandbox went: embedded in the result and readable with resources/read for a while."},
		"duration_ms":     map[string]any{"type": "number"},
		"session_id":      str("The persistent session (execute-persistent)."),
		"state_lost":      map[string]any{"type": "boolean", "description": "True once after the session's sandbox had to be restarted: its variables, imports and files are gone."},
		"violations":      map[string]any{"type": "array", "items": violationSchema},
		"warnings":        map[string]any{"type": "array", "items": violationSchema},
	}, "status")
}

// Tools returns the tool definitions, in the order tools/list shows them;
// their descriptions state cfg's image packages, timeout, output cap and
// module rules.
func Tools(cfg config.Config) []mcp.Tool {
	code := str(codeDescription(cfg))
	timeout := map[string]any{"type": "number", "exclusiveMinimum": 0, "description": timeoutDescription(cfg)}
	return []mcp.Tool{
		tool(ToolExecuteTransient, "Run Python (fresh sandbox)",
			"Run Python code in a fresh, single-use sandbox (no network, read-only system, memory/CPU/time limits). "+
				"Nothing persists between calls except the JSON `state` you pass in and get back. "+
				"Use execute-persistent when you need variables, imports or files to live across calls; files written here are deleted with the sandbox. "+
				outputNote(cfg),
			object(map[string]any{
				"code": code,
				"state": map[string]any{"type": "object", "additionalProperties": true,
					"description": "Variables to define before the code runs, as a JSON object of name to JSON value. Pass the `state` returned by the previous call to continue from it. Only JSON-serialisable values survive; the others are listed in dropped_state. " +
						"Names must be Python identifiers that are not keywords, builtins (list, print, ...) or __dunder__ names."},
				"timeout": timeout,
			}, "code"),
			runOutput(), annotations("Run Python (fresh sandbox)", false, false, false, false)),
		tool(ToolExecutePersistent, "Run Python (persistent session)",
			"Run Python code in a persistent session: variables, imports, functions and files in /workspace stay between calls. "+
				"Leave session_id empty to create a session; its id comes back as session_id. Sessions expire after a period of inactivity; "+
				"call cleanup-session when done. Files in /workspace are resources (sandbox://SESSION_ID/PATH, listed by resources/list). "+
				outputNote(cfg),
			object(map[string]any{
				"code":       code,
				"session_id": str("Session to run in; empty or absent creates a new session."),
				"timeout":    timeout,
			}, "code"),
			runOutput(), annotations("Run Python (persistent session)", false, false, false, false)),
		tool(ToolInstallPackage, "Install a Python package",
			"Install a Python package into a session (or, without session_id, for your transient runs), from the operator's configured wheelhouse or index. "+
				"The sandbox itself never gets network access. Subject to the operator's package policy. "+
				"Dependencies are not installed automatically: install each one by name first. Only wheels are installed unless the operator allows source builds. "+
				"In a session the package is importable in the next call, without a restart, unless the session already imported it: then restart_needed is true and a new session is needed to use the installed version.",
			object(map[string]any{
				"package_name": str("Package name as on PyPI, e.g. \"tabulate\". No URLs, paths or options."),
				"version":      str("Optional version specifier, e.g. \"==0.9.0\" or \">=1.2,<2\"; a bare version such as \"0.9.0\" means ==0.9.0."),
				"session_id":   str("Optional persistent session to install into."),
			}, "package_name"),
			object(map[string]any{
				"package": str("The package name."), "version": str("Installed version."), "session_id": str("The session installed into; empty for transient runs."),
				"output":         str("Installer output (capped)."),
				"status":         str("ok, denied (see violations), invalid (bad name or version), not_found (not in the wheelhouse or index), error, timeout, unavailable."),
				"message":        str("What happened, in one sentence."),
				"restart_needed": map[string]any{"type": "boolean", "description": "The session had already imported this package, so its running interpreter keeps the old version: start a new session to use the installed one."},
				"violations":     map[string]any{"type": "array", "items": violationSchema},
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
				"path":       str("Path relative to /workspace (or absolute under /workspace)."),
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
