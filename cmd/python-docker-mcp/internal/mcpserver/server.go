// Package mcpserver is the MCP tool layer: it registers the tools, resources
// and their schemas on an mcp-go server and sends every request through the
// static gate (analyze), the policy and the executor, in that order. A
// denial is a tool result with isError and the violations; an executor
// failure is a tool result with isError and its status; only malformed
// requests become JSON-RPC errors.
//
// The tools are listed once, in toolDefs (tools.go): each tool's argument
// and result structs are its input and output schemas, and its handler
// takes the decoded argument struct. testdata/*.txtar are transcripts of
// whole exchanges, checked against a fake executor (go test -update
// rewrites their replies).
package mcpserver

import (
	"context"
	"log/slog"
	"reflect"
	"runtime"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Executor is what the tools need of the sandbox executor.
type Executor interface {
	Transient(ctx context.Context, req executor.Request) (*executor.Result, error)
	Persistent(ctx context.Context, sessionID string, req executor.Request) (*executor.Result, string, error)
	Cleanup(ctx context.Context, owner, sessionID string) error
	Sessions(owner string) []executor.SessionInfo
	ReadFile(ctx context.Context, owner, sessionID, path string) ([]byte, error)
	// ReadFileAt reads up to length bytes from offset (length <= 0: as
	// much as one call may).
	ReadFileAt(ctx context.Context, owner, sessionID, path string, offset, length int64) (executor.FileChunk, error)
	WriteFile(ctx context.Context, owner, sessionID, path string, data []byte) error
	// AppendFile adds data at the end of a file and returns its new size.
	AppendFile(ctx context.Context, owner, sessionID, path string, data []byte) (int64, error)
	ListFiles(ctx context.Context, owner, sessionID, path string) ([]executor.FileInfo, error)
	// WorkspaceFiles lists a session's files without counting as use
	// (nothing when the session is busy or its sandbox is not running).
	WorkspaceFiles(ctx context.Context, owner, sessionID string) ([]executor.FileInfo, error)
	// Imported reports which of modules the session's code has imported
	// since its interpreter started.
	Imported(owner, sessionID string, modules []string) []string
}

// Decider judges a request (Decide) and the code of an execute call with
// its static analysis (Check); *policy.Gate is one.
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
	Check(ctx context.Context, in policy.Input, src []byte) (policy.Check, error)
}

// ImageWaiter blocks until the sandbox image is ready; *image.Manager is one.
type ImageWaiter interface {
	Wait(ctx context.Context, progress image.Progress) error
}

// Deps are the parts the tools are built from.
type Deps struct {
	// Config returns the configuration in force (it may change on reload).
	Config func() config.Config
	Gate   Decider
	Exec   Executor
	// Installer backs install-package; nil makes it report "not available".
	Installer Installer
	// Image may be nil when the image is known to be there.
	Image  ImageWaiter
	Logger *slog.Logger
	// Version is reported in initialize.
	Version string
	// Middleware wrap every tool handler (metrics, audit); nil for none.
	Middleware []server.ToolHandlerMiddleware
	// Quotas counts what each principal holds against the quotas of its
	// decisions (shared with the transport for the metrics); nil for a
	// ledger of the server's own.
	Quotas *quota.Ledger
	// Analyses shares the cores the server gives to analysing code
	// between principals; nil for one of the server's own of
	// GOMAXPROCS slots, half of them per principal. A transport that
	// holds a slot of it for a request (quota.Fair.Hold) hands it to the
	// request's analysis, or gives it back when the request's tool
	// handler starts for a tool that analyses nothing.
	Analyses *quota.Fair
}

// Server holds the MCP server and its tools. Safe for concurrent use.
type Server struct {
	d       Deps
	mcp     *server.MCPServer
	outputs *outputStore
	// analyses shares the cores the server gives to analysing code
	// between principals.
	analyses *quota.Fair
	// memo answers retried calls that carry _meta.idempotency_key.
	memo *callMemo
	// tasks are the calls run as MCP tasks (tasks.go).
	tasks tasks

	toolsMu  sync.Mutex
	toolsCfg config.Config // the configuration the descriptions were built from
	tools    []mcp.Tool    // Tools of that config
}

// NewAnalyses returns the server's analysis slots: GOMAXPROCS of them,
// half of them (at least one) for one principal.
func NewAnalyses() *quota.Fair {
	procs := runtime.GOMAXPROCS(0)
	return quota.NewFair(procs, procs/2)
}

// handOff gives back the analysis slot the transport holds for the call
// (Deps.Analyses) when the tool analyses no code, as its handler starts,
// so that the principal's next request does not wait for this one to
// end; an execute tool's analysis takes it over (analysisSlot). Whatever
// the handler did, the slot is given back when it returns.
func (s *Server) handOff(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		defer s.analyses.Release(ctx)
		if name := req.Params.Name; name != ToolExecuteTransient && name != ToolExecutePersistent {
			s.analyses.Release(ctx)
		}
		return next(ctx, req)
	}
}

// New registers the tools and the session-file resource template.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	if d.Quotas == nil {
		d.Quotas = quota.New()
	}
	if d.Analyses == nil {
		d.Analyses = NewAnalyses()
	}
	s := &Server{d: d, outputs: newOutputStore(), analyses: d.Analyses, memo: newCallMemo()}
	d.Quotas.Source(policy.QuotaOutputBytes, s.outputs.use)
	tools := Tools(d.Config())
	args, err := newArgValidator(tools)
	if err != nil {
		panic("mcpserver: " + err.Error()) // the schemas are this package's own
	}
	hooks := &server.Hooks{}
	hooks.AddAfterListResources(s.listResources)
	s.mcp = server.NewMCPServer("python-docker-mcp", d.Version,
		server.WithTitle("Python sandbox"),
		server.WithInstructions("Runs Python 3.13 in hardened, network-less Docker sandboxes. "+
			"Use execute-transient for one-off code (carry variables with `state`), execute-persistent for a session whose variables and files persist. "+
			"Code is checked by a static gate and a policy first; a refusal lists each violation with its line."),
		server.WithToolCapabilities(true), // tools/list_changed when a reload changes the descriptions
		// Answered by HandleTask (tasks.go), which the transports call.
		server.WithTaskCapabilities(true, true, true),
		server.WithResourceCapabilities(false, false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithToolHandlerMiddleware(s.handOff),
		server.WithToolHandlerMiddleware(args.middleware),
		server.WithOutputSchemaValidation(),
		server.WithHooks(hooks),
		server.WithToolFilter(s.currentTools),
	)
	s.mcp.Use(d.Middleware...)
	s.mcp.Use(s.idempotent)
	for i, t := range tools {
		s.mcp.AddTool(t, toolDefs[i].handler(s))
	}
	s.mcp.AddResourceTemplate(
		mcp.NewResourceTemplate(ResourceTemplate, "Session file",
			mcp.WithTemplateDescription("A file in a persistent session's /workspace: sandbox://SESSION_ID/PATH (PATH relative to /workspace)."),
		),
		s.readResource,
	)
	s.mcp.AddResourceTemplate(
		mcp.NewResourceTemplate(OutputTemplate, "Output of a call",
			mcp.WithTemplateDescription("What a call left for its caller: the full text of a stdout or stderr that its result showed cut (sandbox-output://CALL_ID/stdout or /stderr), "+
				"the small files an execute-transient run wrote (sandbox-output://CALL_ID/files/PATH), "+
				"and the HTML and SVG that display() and a final expression gave (sandbox-output://CALL_ID/display/display-N.html, .../result.svg). Kept for a limited time, for the caller only."),
		),
		s.readOutput,
	)
	return s
}

// currentTools gives tools/list the descriptions of the configuration in
// force (a reload may change the timeout, the output caps, the module rules
// or whether bash runs); the schemas' shapes never change.
func (s *Server) currentTools(_ context.Context, tools []mcp.Tool) []mcp.Tool {
	cfg := s.d.Config()
	s.toolsMu.Lock()
	if s.tools == nil || !reflect.DeepEqual(cfg, s.toolsCfg) {
		s.toolsCfg, s.tools = cfg, Tools(cfg)
	}
	current := s.tools
	s.toolsMu.Unlock()
	byName := make(map[string]mcp.Tool, len(current))
	for _, t := range current {
		byName[t.Name] = t
	}
	out := make([]mcp.Tool, len(tools))
	for i, t := range tools {
		if c, ok := byName[t.Name]; ok {
			t.Description, t.RawInputSchema = c.Description, c.RawInputSchema
		}
		out[i] = t
	}
	return out
}

// Reconfigured tells connected clients that the tools changed
// (notifications/tools/list_changed) when old and cfg describe them
// differently; the server's Config already returns cfg. Called by the
// reload, after the configuration is in force.
func (s *Server) Reconfigured(old, cfg config.Config) bool {
	if reflect.DeepEqual(Tools(old), Tools(cfg)) {
		return false
	}
	s.mcp.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	return true
}

// MCP returns the mcp-go server, for the stdio and HTTP transports.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// principal is the caller: the token's subject over HTTP, the local user
// over stdio.
func (s *Server) principal(ctx context.Context) auth.Principal {
	if p, ok := auth.PrincipalFrom(ctx); ok {
		return p
	}
	return auth.Local(s.d.Config().Auth.Scopes)
}

func policyPrincipal(p auth.Principal) policy.Principal {
	sc := p.Scopes
	if sc == nil {
		sc = []string{}
	}
	return policy.Principal{Sub: p.Sub, Scopes: sc}
}

// progressFunc returns a function that sends notifications/progress for
// this request (a no-op when the client asked for none). Safe to call from
// several goroutines.
func (s *Server) progressFunc(ctx context.Context, req mcp.CallToolRequest) func(string) {
	p := s.progressOf(ctx, req)
	if p == nil {
		return func(string) {}
	}
	return p.say
}

// byteProgress returns a function that sends notifications/progress in
// bytes for this request: done of total (total 0: unknown). A no-op when
// the client asked for none.
func (s *Server) byteProgress(ctx context.Context, req mcp.CallToolRequest) func(done, total int64, msg string) {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	if token == nil {
		return func(int64, int64, string) {}
	}
	return func(done, total int64, msg string) {
		params := map[string]any{"progressToken": token, "progress": done, "message": msg}
		if total > 0 {
			params["total"] = total
		}
		if err := s.mcp.SendNotificationToClient(ctx, "notifications/progress", params); err != nil {
			s.d.Logger.Debug("progress notification not sent", "err", err)
		}
	}
}

// logClient sends a logging notification to the client (when it set a
// level that lets it through) and writes it to the server log.
func (s *Server) logClient(ctx context.Context, level mcp.LoggingLevel, msg string, attrs map[string]any) {
	data := map[string]any{"message": msg}
	for k, v := range attrs {
		data[k] = v
	}
	_ = s.mcp.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, "python-docker-mcp", data))
	args := make([]any, 0, 2*len(attrs))
	for k, v := range attrs {
		args = append(args, k, v)
	}
	switch level {
	case mcp.LoggingLevelError:
		s.d.Logger.Error(msg, args...)
	case mcp.LoggingLevelWarning:
		s.d.Logger.Warn(msg, args...)
	default:
		s.d.Logger.Info(msg, args...)
	}
}

// waitImage blocks until the sandbox image exists, reporting build progress.
func (s *Server) waitImage(ctx context.Context, progress func(string)) error {
	if s.d.Image == nil {
		return nil
	}
	first := true
	return s.d.Image.Wait(ctx, func(line string) {
		if first {
			progress("waiting for the sandbox image to be built (first start only): " + line)
			first = false
			return
		}
		progress(line)
	})
}

// toolError is an isError result with one text block and, when out is not
// nil, structured content (for tools whose output schema requires fields).
func toolError(msg string, out any) *mcp.CallToolResult {
	r := mcp.NewToolResultError(msg)
	if out != nil {
		r.StructuredContent = out
	}
	return r
}
