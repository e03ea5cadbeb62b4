package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/rules"
)

// Query is the document the engine evaluates for every decision.
const Query = "data.pydocker.decision"

// Engine is a compiled policy: the Rego modules and the configuration,
// prepared once. It is immutable and safe for concurrent use; a new
// configuration or new Rego means a new Engine (see Gate).
type Engine struct {
	query   rego.PreparedEvalQuery
	max     Limits
	policy  config.Policy
	modules []string
	// The configuration's lists, sorted, for Decision.Modules and .Calls.
	allowedModules, blockedModules, blockedCalls []string
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
	opts := []func(*rego.Rego){
		rego.Query(Query),
		// Stored as AST values (converted once here, not on every read);
		// round-tripped through JSON first so every value is plain JSON.
		rego.Store(inmem.NewFromObjectWithOpts(map[string]any{"pydocker": map[string]any{"config": data}},
			inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))),
		rego.SetRegoVersion(ast.RegoV1),
		// A builtin that fails (to_number("x"), a bad regex) fails the
		// evaluation instead of leaving a deny rule silently undefined:
		// a policy that cannot judge must not allow.
		rego.StrictBuiltinErrors(true),
	}
	for _, n := range names {
		m, err := ast.ParseModuleWithOpts(n, modules[n], ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			problems = append(problems, regoProblems(n, err)...)
			continue
		}
		opts = append(opts, rego.ParsedModule(m))
	}
	if len(problems) > 0 {
		return nil, &CompileError{Problems: problems}
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, &CompileError{Problems: regoProblems("policy", err)}
	}
	e := &Engine{query: pq, max: max, policy: cfg.Policy, modules: names,
		allowedModules: lists("allowed_modules"), blockedModules: lists("blocked_modules"), blockedCalls: lists("blocked_calls")}
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
	d.Modules.Allowed = append([]string{}, e.allowedModules...)
	d.Modules.Blocked = append([]string{}, e.blockedModules...)
	d.Calls.Blocked = append([]string{}, e.blockedCalls...)
	return d, nil
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
