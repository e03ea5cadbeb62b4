package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/rules"
)

// Query is the document the engine evaluates for every decision.
const Query = "data.pydocker.decision"

// QuotasQuery is the document Engine.Quotas evaluates: the quotas of
// data.pydocker.decision alone, with only the principal in the input.
const QuotasQuery = "data.pydocker.quotas"

// Engine is a compiled policy: the Rego modules and the configuration,
// prepared once. It is immutable and safe for concurrent use; a new
// configuration or new Rego means a new Engine (see Gate).
type Engine struct {
	query rego.PreparedEvalQuery
	max   Limits
	// taskMax is a task's longest time limit (tasks.max_duration), in
	// seconds.
	taskMax float64
	policy  config.Policy
	maxCode int // limits.max_code_bytes, for the static step
	maxExpr int // limits.max_expression_tokens, for the static step
	modules []string
	// The configuration's lists, sorted, for Decision.Modules and .Calls;
	// blockedModules with the C twins of blocked modules.
	allowedModules, blockedModules, blockedCalls []string
	// configured is the capability ceiling the configuration gives.
	configured Capabilities
	// runtimes are the runtimes a decision may name, the default first
	// (config.SandboxRuntimes); runtimeKeys their config keys.
	runtimes    []string
	runtimeKeys string
	// quotas are the configured quotas, the ceiling of every principal's;
	// quotasQuery evaluates one principal's, kept in quotaCache.
	quotas      Quotas
	quotasQuery rego.PreparedEvalQuery
	quotaMu     sync.Mutex
	quotaCache  map[string]Quotas
}

// CompileError is returned by Load when Rego does not parse or compile,
// or a Rego directory cannot be read. Its message has one line per
// problem, "file:line: message".
type CompileError struct {
	Problems []Problem
}

// Problem is one Rego error. Line is 0 when the problem has no line.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (e *CompileError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Line > 0 {
			lines[i] = fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
		} else {
			lines[i] = fmt.Sprintf("%s: %s", p.File, p.Msg)
		}
	}
	return strings.Join(lines, "\n")
}

// Load builds the engine of cfg: the shipped rules plus every .rego file
// (not *_test.rego) under each directory of cfg.Policy.Paths, with the
// configuration as data.pydocker.config. Rego errors are a *CompileError;
// a bad configuration value is an error naming its key.
func Load(ctx context.Context, cfg config.Config) (*Engine, error) {
	return LoadFS(ctx, cfg, nil)
}

// LoadFS is Load with extra Rego from fsys (nil for none), loaded like a
// directory of cfg.Policy.Paths; its files are named by their path in
// fsys. Tests use it with fstest.MapFS.
func LoadFS(ctx context.Context, cfg config.Config, fsys fs.FS) (*Engine, error) {
	data, max, err := configData(cfg)
	if err != nil {
		return nil, err
	}
	runtimes, runtimeKeys := cfg.SandboxRuntimes()
	lists := func(key string) []string {
		l := data[key].([]any)
		out := make([]string, len(l))
		for i, v := range l {
			out[i] = v.(string)
		}
		return out
	}
	var problems []Problem
	modules := map[string]string{}
	add := func(prefix string, fsys fs.FS) {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				problems = append(problems, Problem{File: joinName(prefix, p), Msg: err.Error()})
				return nil
			}
			if d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
				return nil
			}
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				problems = append(problems, Problem{File: joinName(prefix, p), Msg: err.Error()})
				return nil
			}
			name := joinName(prefix, p)
			if _, dup := modules[name]; dup {
				problems = append(problems, Problem{File: name, Msg: "loaded twice"})
				return nil
			}
			modules[name] = string(src)
			return nil
		})
		if err != nil {
			problems = append(problems, Problem{File: prefix, Msg: err.Error()})
		}
	}
	add("rules", rules.FS)
	for i, dir := range cfg.Policy.Paths {
		st, err := os.Stat(dir)
		switch {
		case err != nil:
			return nil, fmt.Errorf("policy.paths[%d]: %w", i, err)
		case st.IsDir():
			add(filepath.Clean(dir), os.DirFS(dir))
		case strings.HasSuffix(dir, ".rego"):
			src, err := os.ReadFile(dir)
			if err != nil {
				return nil, fmt.Errorf("policy.paths[%d]: %w", i, err)
			}
			modules[filepath.Clean(dir)] = string(src)
		default:
			return nil, fmt.Errorf("policy.paths[%d]: %s is neither a directory nor a .rego file", i, dir)
		}
	}
	if fsys != nil {
		add("", fsys)
	}
	if len(problems) > 0 {
		return nil, &CompileError{Problems: problems}
	}

	names := make([]string, 0, len(modules))
	for n := range modules {
		names = append(names, n)
	}
	sort.Strings(names)
	var parsed []*ast.Module
	for _, n := range names {
		m, err := ast.ParseModuleWithOpts(n, modules[n], ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			problems = append(problems, regoProblems(n, err)...)
			continue
		}
		parsed = append(parsed, m)
	}
	if len(problems) > 0 {
		return nil, &CompileError{Problems: problems}
	}
	data["capability_packages"] = rulePackages(parsed, "capability_denied")
	data["quota_packages"] = rulePackages(parsed, "quota_max")
	data["runtime_packages"] = rulePackages(parsed, "runtime")
	data["reuse_packages"] = rulePackages(parsed, "reuse")
	// One compiler for both queries: the modules are compiled once.
	compiler := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithUseTypeCheckAnnotations(true)
	derived, err := derive(ctx, compiler, parsed, data)
	if err != nil {
		return nil, err
	}
	blockedModules := lists("blocked_modules")
	blockedModules = append(blockedModules, derived.blockedTwins...)
	sort.Strings(blockedModules)
	// Stored as AST values (converted once here, not on every read);
	// round-tripped through JSON first so every value is plain JSON.
	store := inmem.NewFromObjectWithOpts(map[string]any{"pydocker": map[string]any{"config": data}},
		inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))
	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		pq, err := rego.New(
			rego.Query(query),
			rego.Compiler(compiler),
			rego.Store(store),
			rego.SetRegoVersion(ast.RegoV1),
			// A builtin that fails (to_number("x"), a bad regex) fails the
			// evaluation instead of leaving a deny rule silently undefined:
			// a policy that cannot judge must not allow.
			rego.StrictBuiltinErrors(true),
		).PrepareForEval(ctx)
		if err != nil {
			return pq, &CompileError{Problems: regoProblems("policy", err)}
		}
		return pq, nil
	}
	pq, err := prepare(Query)
	if err != nil {
		return nil, err
	}
	qq, err := prepare(QuotasQuery)
	if err != nil {
		return nil, err
	}
	e := &Engine{query: pq, max: max, taskMax: cfg.Tasks.MaxDuration.D().Seconds(), policy: cfg.Policy, maxCode: int(cfg.Limits.MaxCodeBytes),
		maxExpr: cfg.Limits.MaxExpressionTokens, modules: names,
		allowedModules: lists("allowed_modules"), blockedModules: blockedModules, blockedCalls: lists("blocked_calls"),
		configured: derived.configured, runtimes: runtimes, runtimeKeys: runtimeKeys, quotasQuery: qq, quotas: configuredQuotas(cfg), quotaCache: map[string]Quotas{}}
	// One evaluation now, so a policy without data.pydocker.decision (or
	// one that fails on a plain input) is a load error, not a failure of
	// the first request.
	if _, err := e.Decide(ctx, Input{Tool: ToolListSessions}); err != nil {
		return nil, fmt.Errorf("policy: trial decision: %w", err)
	}
	return e, nil
}

// Modules lists the Rego files the engine was built from.
func (e *Engine) Modules() []string { return append([]string(nil), e.modules...) }

// Configured returns the capabilities the configuration allows: the
// ceiling of every decision's Capabilities, before operator rules tighten
// them per call.
func (e *Engine) Configured() Capabilities {
	c := e.configured
	c.Sockets = append([]string{}, c.Sockets...)
	return c
}

// Max returns the configured maxima every decision's limits stay within.
func (e *Engine) Max() Limits { return e.max }

// Decide evaluates the policy for in. It is safe for concurrent use. An
// error means no decision could be made (a Rego runtime error, a
// cancelled ctx): callers must treat it as a denial.
func (e *Engine) Decide(ctx context.Context, in Input) (Decision, error) {
	rs, err := e.query.Eval(ctx, rego.EvalParsedInput(in.value()))
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{}, fmt.Errorf("evaluate policy: %s is undefined", Query)
	}
	d, err := decodeDecision(rs[0].Expressions[0].Value)
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	d.Limits = effective(in.LimitsRequested, e.max)
	if t := in.LimitsRequested.Timeout; in.Task != nil && t > 0 && t <= max(e.taskMax, e.max.Timeout) {
		d.Limits.Timeout = t // a task's time limit may go up to tasks.max_duration
	}
	d.Modules.Allowed = append([]string{}, e.allowedModules...)
	d.Modules.Blocked = append([]string{}, e.blockedModules...)
	d.Calls.Blocked = append([]string{}, e.blockedCalls...)
	d.Capabilities = within(d.Capabilities, e.configured)
	obj, _ := rs[0].Expressions[0].Value.(map[string]any)
	d.Runtime = e.runtimes[0]
	if rt, ok := obj["runtime"]; ok {
		name, isString := rt.(string)
		if !isString {
			name = fmt.Sprint(rt) // not a name: denied below
		}
		d.Runtime = name
	}
	if !slices.Contains(e.runtimes, d.Runtime) {
		// The rules deny this (runtime.invalid); this keeps the engine's
		// promise without them: a decision never names a runtime the
		// configuration does not have, and never falls back to another.
		d.Allow = false
		d.Violations = append(d.Violations, Violation{Rule: "runtime.invalid",
			Msg: fmt.Sprintf("the decision names runtime %q, which is not configured (%s)", d.Runtime, e.runtimeKeys)})
		sortViolations(d.Violations)
		d.Runtime = ""
	}
	d.Quotas = e.withinQuotas(obj["quotas"])
	// Reuse only as the rules give it: anything but "principal" is never.
	d.Reuse = config.ReuseNever
	if r, _ := obj["reuse"].(string); r == config.ReusePrincipal {
		d.Reuse = r
	}
	return d, nil
}

// maxQuotaCache bounds the principals whose quotas an engine remembers.
const maxQuotaCache = 4096

// Quotas returns p's quotas, as a decision for p would carry them, for
// the bounds the server keeps outside a tool call (transport sessions,
// in-flight bytes). They are evaluated once per principal and engine (a
// reload builds a new engine). Safe for concurrent use; an error means
// the policy could not judge, and callers keep to the configured quotas
// (Engine.ConfiguredQuotas) or refuse.
func (e *Engine) Quotas(ctx context.Context, p Principal) (Quotas, error) {
	key := p.Sub + "\x00" + strings.Join(p.Scopes, " ")
	e.quotaMu.Lock()
	q, ok := e.quotaCache[key]
	e.quotaMu.Unlock()
	if ok {
		return q, nil
	}
	if p.Scopes == nil {
		p.Scopes = []string{}
	}
	rs, err := e.quotasQuery.Eval(ctx, rego.EvalInput(map[string]any{"principal": map[string]any{"sub": p.Sub, "scopes": anyList(p.Scopes)}}))
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", QuotasQuery, err)
	}
	var v any
	if len(rs) == 1 && len(rs[0].Expressions) == 1 {
		v = rs[0].Expressions[0].Value
	}
	q = e.withinQuotas(v)
	e.quotaMu.Lock()
	if len(e.quotaCache) >= maxQuotaCache {
		clear(e.quotaCache)
	}
	e.quotaCache[key] = q
	e.quotaMu.Unlock()
	return q, nil
}

// ConfiguredQuotas returns the quotas the configuration gives every
// principal: the ceiling of each principal's.
func (e *Engine) ConfiguredQuotas() Quotas { return maps.Clone(e.quotas) }

// withinQuotas reads the quotas of a decision (NAME -> {max, key}): each
// configured quota, lowered where the rules lowered it, never raised; one
// the rules left out or made unreadable keeps the configured bound.
func (e *Engine) withinQuotas(v any) Quotas {
	obj, _ := v.(map[string]any)
	out := make(Quotas, len(e.quotas))
	for name, c := range e.quotas {
		q := c
		if o, ok := obj[name].(map[string]any); ok {
			if m := number(o["max"]); m >= 0 && m < float64(c.Max) {
				q.Max = int64(m)
			}
		}
		out[name] = q
	}
	return out
}

// within is c with nothing the configuration does not allow (the rules
// already keep to it; this keeps the engine's promise without them).
func within(c, max Capabilities) Capabilities {
	out := Capabilities{
		Processes:  c.Processes && max.Processes,
		PTY:        c.PTY && max.PTY,
		NativeCode: c.NativeCode && max.NativeCode,
		Sockets:    make([]string, 0, len(c.Sockets)),
	}
	for _, f := range c.Sockets {
		if slices.Contains(max.Sockets, f) {
			out.Sockets = append(out.Sockets, f)
		}
	}
	return out
}

// derived is what the shipped rules compute from the configuration
// alone, evaluated once per engine and handed back to them as data (the
// rules compute it themselves when it is missing, as in `opa test`).
type derived struct {
	configured   Capabilities
	blockedTwins []string
}

// deriveQuery asks the rules for everything that depends on the
// configuration only.
const deriveQuery = `caps = data.pydocker.rules.capabilities.configured
twins = data.pydocker.rules.modules.blocked_twins
call_twins = data.pydocker.rules.calls.call_twins`

// derive compiles the modules into compiler, evaluates deriveQuery on the
// configuration and adds the results to data: capabilities.configured,
// blocked_twins, blocked_call_twins, and the list regular expressions
// with the twins in them.
func derive(ctx context.Context, compiler *ast.Compiler, parsed []*ast.Module, data map[string]any) (derived, error) {
	opts := []func(*rego.Rego){
		rego.Query(deriveQuery),
		rego.Compiler(compiler),
		rego.Store(inmem.NewFromObject(map[string]any{"pydocker": map[string]any{"config": data}})),
		rego.SetRegoVersion(ast.RegoV1),
		rego.StrictBuiltinErrors(true),
	}
	for _, m := range parsed {
		opts = append(opts, rego.ParsedModule(m))
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return derived{}, &CompileError{Problems: regoProblems("policy", err)}
	}
	rs, err := pq.Eval(ctx)
	if err != nil {
		return derived{}, fmt.Errorf("policy: derive capabilities and C twins from the configuration: %w", err)
	}
	if len(rs) != 1 {
		return derived{}, fmt.Errorf("policy: derive capabilities and C twins from the configuration: the shipped rules give no result")
	}
	b := rs[0].Bindings
	caps, ok := decodeCapabilities(b["caps"])
	twins, tok := b["twins"].(map[string]any)
	callTwins, cok := b["call_twins"].(map[string]any)
	if !ok || !tok || !cok {
		return derived{}, fmt.Errorf("policy: derive capabilities and C twins from the configuration: unexpected result %v", b)
	}
	capsData := data["capabilities"].(map[string]any)
	capsData["configured"] = map[string]any{
		"processes": caps.Processes, "sockets": anyList(caps.Sockets), "pty": caps.PTY, "native_code": caps.NativeCode,
	}
	data["blocked_twins"] = twins
	data["blocked_call_twins"] = callTwins
	d := derived{configured: caps}
	regex := data["regex"].(map[string]any)
	for key, extra := range map[string]map[string]any{"blocked_modules": twins, "blocked_calls": callTwins} {
		all := append([]any{}, data[key].([]any)...)
		for n := range extra {
			all = append(all, n)
			if key == "blocked_modules" {
				d.blockedTwins = append(d.blockedTwins, n)
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].(string) < all[j].(string) })
		regex[key] = listRegex(key, all)
	}
	return d, nil
}

// rulePackages lists the NAMEs of the packages pydocker.rules.NAME that
// define rule (capability_denied, quota_max): rules/decision.rego reads
// only those.
func rulePackages(parsed []*ast.Module, rule string) []any {
	seen := map[string]bool{}
	out := []any{}
	for _, m := range parsed {
		path := m.Package.Path
		if len(path) != 4 || !path[0].Equal(ast.DefaultRootDocument) || !path[1].Equal(ast.StringTerm("pydocker")) || !path[2].Equal(ast.StringTerm("rules")) {
			continue
		}
		name, ok := path[3].Value.(ast.String)
		if !ok || seen[string(name)] {
			continue
		}
		for _, r := range m.Rules {
			if ref := r.Head.Ref(); len(ref) > 0 && ref[0].Equal(ast.VarTerm(rule)) {
				seen[string(name)] = true
				out = append(out, string(name))
				break
			}
		}
	}
	return out
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// effective is what the sandbox gets: each requested limit (> 0), never
// above the configured maximum, or the maximum where none was requested.
// A request above the maximum is also a violation (rule limits.max).
func effective(req, max Limits) Limits {
	return Limits{
		Timeout: bounded(req.Timeout, max.Timeout),
		Memory:  bounded(req.Memory, max.Memory),
		CPUs:    bounded(req.CPUs, max.CPUs),
		Pids:    bounded(req.Pids, max.Pids),
	}
}

func bounded[T int64 | float64](asked, max T) T {
	if asked > 0 && asked <= max {
		return asked
	}
	return max
}

// regoProblems turns OPA errors into file:line problems.
func regoProblems(file string, err error) []Problem {
	var errs ast.Errors
	if errors.As(err, &errs) {
		out := make([]Problem, 0, len(errs))
		for _, e := range errs {
			p := Problem{File: file, Msg: e.Message}
			if e.Location != nil {
				if e.Location.File != "" {
					p.File = e.Location.File
				}
				p.Line = e.Location.Row
			}
			out = append(out, p)
		}
		return out
	}
	var one *ast.Error
	if errors.As(err, &one) {
		return regoProblems(file, ast.Errors{one})
	}
	return []Problem{{File: file, Msg: err.Error()}}
}

func joinName(prefix, p string) string {
	if prefix == "" {
		return p
	}
	if prefix == "rules" {
		return path.Join(prefix, p)
	}
	return filepath.Join(prefix, filepath.FromSlash(p))
}
