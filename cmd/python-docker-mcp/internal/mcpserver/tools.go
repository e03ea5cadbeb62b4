package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Tool names, as clients call them: the policy's names, so the Rego and
// the tools cannot disagree. toolDefs is the one list of the tools.
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

// Scope kinds: which of the configured scopes (auth.scopes) a tool call
// needs over HTTP. auth.ScopeFor decides; a test keeps it in step with
// toolDefs.
const (
	scopeExecute  = "execute"
	scopeInstall  = "install"
	scopeSessions = "sessions"
)

// toolDef is one tool: its name and metadata, its argument and result
// types (whose JSON shapes are its input and output schemas, see schemaOf),
// the schema details a struct cannot say, and its handler.
type toolDef struct {
	name, title                       string
	readOnly, destructive, idempotent bool
	scope                             string // scopeExecute, scopeInstall or scopeSessions
	description                       func(cfg config.Config) string
	// schemas returns the input and output schemas for cfg: the argument
	// and result types' schemas with the config's descriptions and the
	// constraints struct tags cannot state.
	schemas func(cfg config.Config) (in, out *jsonschema.Schema)
	handler func(s *Server) server.ToolHandlerFunc
}

// toolDefs is the one list of the tools, in the order tools/list shows
// them. Their names are the policy's (policy.Tool*, the names an Input
// may carry, aliased above); registration and the argument validator
// follow this list, and tests hold rules/tools.rego, auth.ScopeFor, the
// README's tool table and policy/README.md's input table to it. A new tool
// is a policy.Tool* name, an entry here, its argument and result types and
// its handler.
var toolDefs = []toolDef{
	{
		name: ToolExecuteTransient, title: "Run Python (fresh interpreter)", scope: scopeExecute,
		description: func(cfg config.Config) string {
			return "Run Python code in a fresh interpreter that sees nothing of earlier calls, in a sandbox (no network, read-only system, memory/CPU/time limits). " +
				"Nothing persists between calls except the JSON `state` you pass in: its keys come back with their values after the run, plus the globals you name in `state_keys` ([\"*\"] for all), within limits.max_state_bytes (what does not fit is left out with a warning; the run's result stands). " +
				"Use execute-persistent when you need variables, imports or files to live across calls; files written here are deleted when the call ends. " +
				outputNote(cfg) + richNote(cfg)
		},
		schemas: func(cfg config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			in := schemaOf[transientArgs]()
			codeSchemas(cfg, in)
			in.Properties["state"].AdditionalProperties = &jsonschema.Schema{}
			in.Properties["state"].Description = stateInDescription
			in.Properties["state_keys"].Description = stateKeysDescription
			return in, runOutSchema()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.executeTransient) },
	},
	{
		name: ToolExecutePersistent, title: "Run Python (persistent session)", scope: scopeExecute,
		description: func(cfg config.Config) string {
			return "Run Python code in a persistent session: variables, imports, functions and files in /workspace stay between calls. " +
				"Leave session_id empty to create a session; its id comes back as session_id. Sessions expire after a period of inactivity; " +
				"call cleanup-session when done. Files in /workspace are resources (sandbox://SESSION_ID/PATH, listed by resources/list). " +
				outputNote(cfg) + richNote(cfg)
		},
		schemas: func(cfg config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			in := schemaOf[persistentArgs]()
			codeSchemas(cfg, in)
			return in, runOutSchema()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.executePersistent) },
	},
	{
		name: ToolInstallPackage, title: "Install a Python package", idempotent: true, scope: scopeInstall,
		description: func(config.Config) string {
			return "Install a Python package into a session (or, without session_id, for your transient runs), from the operator's configured wheelhouse or index. " +
				"The sandbox itself never gets network access. " +
				"Dependencies are resolved from the same sources and installed with it, except those the image or an earlier install already provides; " +
				"every package installed, each dependency too, must pass the operator's package policy, and a refusal names the dependency and the package that needs it (nothing is installed then). " +
				"packages lists what was installed. Only wheels are installed unless the operator allows source builds. " +
				"In a session the package is importable in the next call, without a restart, unless the session already imported it: then restart_needed is true and a new session is needed to use the installed version."
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			return schemaOf[installArgs](), schemaOf[installOut]()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.installPackage) },
	},
	{
		name: ToolCleanupSession, title: "End a session", destructive: true, idempotent: true, scope: scopeSessions,
		description: func(config.Config) string {
			return "End a persistent session and delete its sandbox, variables and files."
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			return schemaOf[sessionArgs](), schemaOf[cleanupOut]()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.cleanupSession) },
	},
	{
		name: ToolListSessions, title: "List my sessions", readOnly: true, idempotent: true, scope: scopeSessions,
		description: func(config.Config) string {
			return "List your persistent sessions with their age, idle time and the time left before they expire."
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			return schemaOf[noArgs](), schemaOf[sessionsOut]()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.listSessions) },
	},
	{
		name: ToolReadFile, title: "Read a session file", readOnly: true, idempotent: true, scope: scopeSessions,
		description: func(cfg config.Config) string {
			l := executor.ConfigFrom(cfg).FileLimits()
			return fmt.Sprintf("Read a file from a session's /workspace. Text comes back as text, other files as base64. "+
				"One call returns at most %s from offset; when more is true, call again with offset next_offset (total_size is the file's size). "+
				"Files of up to %s can be read.", sizeText(l.ReadChunk), sizeText(l.File))
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			in := schemaOf[fileArgs]()
			zero := 0.0
			in.Properties["offset"].Minimum = &zero
			in.Properties["length"].Minimum = &zero
			out := schemaOf[readFileOut]()
			out.Properties["encoding"].Enum = []any{"text", "base64"}
			return in, out
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.readFile) },
	},
	{
		name: ToolWriteFile, title: "Write a session file", destructive: true, idempotent: true, scope: scopeSessions,
		description: func(cfg config.Config) string {
			l := executor.ConfigFrom(cfg).FileLimits()
			return fmt.Sprintf("Write a file into a session's /workspace (creating directories as needed), e.g. data for the code to read. "+
				"One call takes at most %s of content; send a larger file in parts, the first as usual and the rest with append: true, up to %s in all "+
				"(all files of a session share its %s workspace).", sizeText(l.WriteChunk), sizeText(l.File), sizeText(l.Workspace))
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			in := schemaOf[writeFileArgs]()
			in.Properties["encoding"].Enum = []any{"text", "base64"}
			in.Properties["encoding"].Default = json.RawMessage(`"text"`)
			return in, schemaOf[writeFileOut]()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.writeFile) },
	},
	{
		name: ToolListFiles, title: "List session files", readOnly: true, idempotent: true, scope: scopeSessions,
		description: func(config.Config) string {
			return "List the files under a directory of a session's /workspace."
		},
		schemas: func(config.Config) (*jsonschema.Schema, *jsonschema.Schema) {
			return schemaOf[listFilesArgs](), schemaOf[listFilesOut]()
		},
		handler: func(s *Server) server.ToolHandlerFunc { return mcp.NewTypedToolHandler(s.listFiles) },
	},
}

// codeSchemas states cfg's image packages, module rules and timeout in the
// execute tools' argument descriptions, and that a timeout is positive.
func codeSchemas(cfg config.Config, in *jsonschema.Schema) {
	in.Properties["code"].Description = codeDescription(cfg)
	t := in.Properties["timeout"]
	t.Description = timeoutDescription(cfg)
	zero := 0.0
	t.ExclusiveMinimum = &zero
	l := in.Properties["language"]
	l.Enum = []any{"python", "bash"}
	l.Default = json.RawMessage(`"python"`)
	bash := "bash is disabled on this server (languages.bash.enabled is false)"
	if cfg.Languages.Bash.Enabled {
		bash = "bash runs the code with `bash -c` in the same sandbox (the policy decides; it needs the processes capability)"
	}
	l.Description = "The code's language: python (the default) or bash; " + bash + ". node is not available: the sandbox image has no node."
}

// runOutSchema is the output schema of both execute tools.
func runOutSchema() *jsonschema.Schema {
	out := schemaOf[runOut]()
	out.Properties["status"].Enum = []any{"ok", "error", "timeout", "oom", "killed", "refused", "syntax_error", "denied", "invalid", "quota_exceeded", "outcome_unknown", "already_ran"}
	out.Properties["state"].Description = stateOutDescription
	return out
}

// schemaTypes are the schemas of types whose Go shape says less than
// their JSON: raw JSON objects, and the policy's violations, described.
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage]():  {Type: "object"},
	reflect.TypeFor[policy.Violation](): mustSchema[violationDoc](nil),
}

// violationDoc documents policy.Violation's JSON for the output schemas.
type violationDoc struct {
	Rule string `json:"rule" jsonschema:"The policy rule that decided."`
	Msg  string `json:"msg" jsonschema:"What is wrong and what to do instead."`
	Line int    `json:"line" jsonschema:"1-based line in the code (0 when not about a line)."`
	Col  int    `json:"col" jsonschema:"0-based column."`
}

// schemaOf is T's JSON shape as a schema: its JSON field names, types and
// `jsonschema:"description"` tags; a field without omitempty is required;
// no other properties are allowed. Slices are arrays (the tools send [] for
// none, never null); pointers may be null. The result is T's own copy, for
// the caller to add what tags cannot say.
func schemaOf[T any]() *jsonschema.Schema { return mustSchema[T](schemaTypes) }

func mustSchema[T any](types map[reflect.Type]*jsonschema.Schema) *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: types})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err)) // the types are this package's own
	}
	arrays(s)
	return s
}

// arrays makes slice properties plain arrays (For allows null for a nil
// slice) and drops the field order so properties render sorted.
func arrays(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" && s.Types[1] == "array" {
		s.Types, s.Type = nil, "array"
	}
	s.PropertyOrder = nil
	for _, p := range s.Properties {
		arrays(p)
	}
	arrays(s.Items)
}

func rawSchema(s *jsonschema.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic("mcpserver: schema: " + err.Error())
	}
	return b
}

// Tools returns the tool definitions, in the order tools/list shows them;
// their descriptions state cfg's image packages, timeout, output cap and
// module rules.
func Tools(cfg config.Config) []mcp.Tool {
	tools := make([]mcp.Tool, len(toolDefs))
	for i, d := range toolDefs {
		in, out := d.schemas(cfg)
		tools[i] = mcp.Tool{
			Name:            d.name,
			Title:           d.title,
			Description:     d.description(cfg),
			RawInputSchema:  rawSchema(in),
			RawOutputSchema: rawSchema(out),
			Annotations:     annotations(d.title, d.readOnly, d.destructive, d.idempotent, false),
		}
		if slices.Contains(taskTools, d.name) {
			tools[i].Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		}
	}
	return tools
}

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
