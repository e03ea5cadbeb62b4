package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
	"github.com/python-docker-mcp/python-docker-mcp/rules"
)

// Builders of facts, as analyze.Source reports them.

func imp(module string, line int) analyze.Import {
	return analyze.Import{Module: module, Line: line}
}

func fromImp(module string, line int, names ...string) analyze.Import {
	i := analyze.Import{Module: module, From: true, Line: line}
	for _, n := range names {
		i.Names = append(i.Names, analyze.Alias{Name: n})
	}
	return i
}

func call(name string, line int) analyze.Call { return analyze.Call{Name: name, Line: line} }

func dyn(kind string, line int) analyze.Dynamic { return analyze.Dynamic{Kind: kind, Line: line} }

func constDyn(kind, arg string, line int) analyze.Dynamic {
	return analyze.Dynamic{Kind: kind, Arg: &arg, Constant: true, Line: line}
}

func run(f analyze.Facts) Input {
	if f.Imports == nil {
		f.Imports = []analyze.Import{}
	}
	if f.Dynamic == nil {
		f.Dynamic = []analyze.Dynamic{}
	}
	if f.Calls == nil {
		f.Calls = []analyze.Call{}
	}
	if f.References == nil {
		f.References = []analyze.Call{}
	}
	return Input{Tool: ToolExecuteTransient, Code: &Code{Facts: f, Bytes: 100, Lines: 10}, Principal: Principal{Sub: "alice", Scopes: []string{}}}
}

// analyzed is a transient call of src with the facts analyze.Source
// reports for it, as the server builds its input.
func analyzed(t testing.TB, src string) Input {
	t.Helper()
	facts, err := analyze.Source([]byte(src), analyze.Options{})
	if err != nil {
		t.Fatalf("analyze.Source: %v", err)
	}
	return Input{Tool: ToolExecuteTransient, Code: NewCode(facts, []byte(src))}
}

func load(t testing.TB, cfg config.Config, fsys fstest.MapFS) *Engine {
	t.Helper()
	e, err := LoadFS(context.Background(), cfg, fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return e
}

func decide(t testing.TB, e *Engine, in Input) Decision {
	t.Helper()
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}

// brief is a decision's violations (or warnings) as "line:rule".
func brief(vs []Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, strings.Join([]string{itoa(v.Line), v.Rule}, ":"))
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestInlineRego(t *testing.T) {
	tests := []struct {
		name           string
		rego           string
		in             Input
		wantViolations []Violation
		wantWarnings   []string
	}{
		{
			name: "operator deny joins the decision",
			rego: `package pydocker.rules.custom
deny contains {"rule": "custom.no_requests", "msg": "no requests here", "line": i.line, "col": i.col} if {
	some i in input.code.facts.imports
	i.module == "requests"
}`,
			in:             run(analyze.Facts{Imports: []analyze.Import{imp("numpy", 1), imp("requests", 2)}}),
			wantViolations: []Violation{{Rule: "custom.no_requests", Msg: "no requests here", Line: 2}},
		},
		{
			name: "operator warn does not deny",
			rego: `package pydocker.rules.custom
warn contains {"rule": "custom.big", "msg": "big code", "line": 0, "col": 0} if input.code.lines > 5`,
			in:             run(analyze.Facts{}),
			wantViolations: []Violation{},
			wantWarnings:   []string{"0:custom.big"},
		},
		{
			name: "operator rule reads the config data",
			rego: `package pydocker.rules.custom
deny contains {"rule": "custom.strict_only", "msg": "strict", "line": 0, "col": 0} if data.pydocker.config.profile == "standard"`,
			in:             run(analyze.Facts{}),
			wantViolations: []Violation{{Rule: "custom.strict_only", Msg: "strict"}},
		},
		{
			name: "malformed violation still denies",
			rego: `package pydocker.rules.custom
deny contains "just a string" if true`,
			in: run(analyze.Facts{}),
			wantViolations: []Violation{{Rule: "policy.malformed",
				Msg: `a rule produced just a string, want {"rule": string, "msg": string, "line": number, "col": number}`}},
		},
		{
			name: "a package outside data.pydocker.rules is not collected",
			rego: `package elsewhere
deny contains {"rule": "x", "msg": "x", "line": 0, "col": 0} if true`,
			in:             run(analyze.Facts{}),
			wantViolations: []Violation{},
		},
		{
			name: "violations sorted by line, col, rule",
			rego: `package pydocker.rules.custom
deny contains {"rule": "b", "msg": "m", "line": 2, "col": 0} if true
deny contains {"rule": "a", "msg": "m", "line": 2, "col": 0} if true
deny contains {"rule": "z", "msg": "m", "line": 1, "col": 5} if true
deny contains {"rule": "c", "msg": "m", "line": 1, "col": 1} if true`,
			in: run(analyze.Facts{}),
			wantViolations: []Violation{
				{Rule: "c", Msg: "m", Line: 1, Col: 1}, {Rule: "z", Msg: "m", Line: 1, Col: 5},
				{Rule: "a", Msg: "m", Line: 2}, {Rule: "b", Msg: "m", Line: 2},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := load(t, config.Default(), fstest.MapFS{"custom.rego": {Data: []byte(tt.rego)}})
			d := decide(t, e, tt.in)
			if diff := cmp.Diff(tt.wantViolations, d.Violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if tt.wantWarnings == nil {
				tt.wantWarnings = []string{}
			}
			if diff := cmp.Diff(tt.wantWarnings, brief(d.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if d.Allow != (len(tt.wantViolations) == 0) {
				t.Errorf("Allow = %v with %d violations", d.Allow, len(d.Violations))
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []string // substrings of the error
		runtime bool     // found by the trial decision, not the compiler
	}{
		{
			name: "parse error names file and line",
			fsys: fstest.MapFS{"ops/bad.rego": {Data: []byte("package pydocker.rules.bad\n\ndeny contains v if {\n\tv :=\n}\n")}},
			want: []string{"ops/bad.rego:5: "},
		},
		{
			name: "compile error names file and line",
			fsys: fstest.MapFS{"bad.rego": {Data: []byte("package pydocker.rules.bad\n\ndeny contains v if {\n\tv := undefined_fn(1)\n}\n")}},
			want: []string{"bad.rego:4: ", "undefined function undefined_fn"},
		},
		{
			name: "two files, both reported",
			fsys: fstest.MapFS{
				"a.rego": {Data: []byte("package pydocker.rules.a\nx := y\n")},
				"b.rego": {Data: []byte("package pydocker.rules.b\nz := w\n")},
			},
			want: []string{"a.rego:2: ", "b.rego:2: "},
		},
		{
			name:    "conflicting decision document",
			fsys:    fstest.MapFS{"d.rego": {Data: []byte("package pydocker\ndecision := 1\n")}},
			want:    []string{"d.rego:2"},
			runtime: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(context.Background(), config.Default(), tt.fsys)
			if err == nil {
				t.Fatal("LoadFS succeeded")
			}
			var ce *CompileError
			if !tt.runtime && !errors.As(err, &ce) {
				t.Fatalf("LoadFS error = %v, want a *CompileError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTestFilesAreNotLoaded(t *testing.T) {
	// A _test.rego file may use `with` freely and is not part of the engine.
	e := load(t, config.Default(), fstest.MapFS{"x_test.rego": {Data: []byte("package pydocker.rules.x\ndeny contains 1 if true\n")}})
	if d := decide(t, e, run(analyze.Facts{})); !d.Allow {
		t.Errorf("a _test.rego file was loaded: %+v", d)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config.Config)
		want   string
	}{
		{"unknown profile", func(c *config.Config) { c.Policy.Profile = "lenient" }, `policy.profile: "lenient" is not a profile`},
		{"bad module name", func(c *config.Config) { c.BlockedModules = []string{"os", "os path"} }, `blocked_modules[1]: "os path" is not a dotted Python name`},
		{"bad allowed module", func(c *config.Config) { c.AllowedModules = []string{""} }, `allowed_modules[0]`},
		{"bad call name", func(c *config.Config) { c.BlockedCalls = []string{"os.system()"} }, `blocked_calls[0]`},
		{"bad requirement", func(c *config.Config) { c.Package.Allowed = []string{"numpy>>1"} }, `package.allowed[0]: "numpy>>1"`},
		{"bad version", func(c *config.Config) { c.Package.Allowed = []string{"numpy==one"} }, `"one" is not a PEP 440 version`},
		{"duplicate allowed", func(c *config.Config) { c.Package.Allowed = []string{"numpy", "NumPy>=1"} }, `package.allowed[1]: "NumPy>=1" names numpy again`},
		{"bad blocked package", func(c *config.Config) { c.Package.Blocked = []string{"a b"} }, `package.blocked[0]`},
		{"empty index", func(c *config.Config) { c.Package.AllowedIndexes = []string{" "} }, `package.allowed_indexes[0]`},
		{"negative max per session", func(c *config.Config) { c.Package.MaxPerSession = -1 }, `package.max_per_session`},
		{"zero memory", func(c *config.Config) { c.Docker.MemoryLimit = 0 }, `docker.memory_limit: 0: the maximum must be positive`},
		{"missing policy path", func(c *config.Config) { c.Policy.Paths = []string{"/nonexistent/rego"} }, `policy.paths[0]: stat /nonexistent/rego`},
		{"policy path not rego", func(c *config.Config) { c.Policy.Paths = []string{"engine.go"} }, `policy.paths[0]: engine.go is neither a directory nor a .rego file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.modify(&cfg)
			_, err := Load(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestPolicyPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sub/one.rego", "package pydocker.rules.one\ndeny contains {\"rule\": \"one\", \"msg\": \"m\", \"line\": 0, \"col\": 0} if true\n")
	write("sub/one_test.rego", "package pydocker.test.one\ntest_x if true\n")
	write("two.rego", "package pydocker.rules.two\nwarn contains {\"rule\": \"two\", \"msg\": \"m\", \"line\": 0, \"col\": 0} if true\n")

	cfg := config.Default()
	cfg.Policy.Paths = []string{dir}
	d := decide(t, load(t, cfg, nil), run(analyze.Facts{}))
	if diff := cmp.Diff([]string{"0:one"}, brief(d.Violations)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"0:two"}, brief(d.Warnings)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	// A path may also name one file.
	cfg.Policy.Paths = []string{filepath.Join(dir, "two.rego")}
	d = decide(t, load(t, cfg, nil), run(analyze.Facts{}))
	if !d.Allow || len(d.Warnings) != 1 {
		t.Errorf("with one file: %+v", d)
	}

	// Errors name the file by its path on disk.
	write("sub/broken.rego", "package pydocker.rules.broken\nx := \n")
	cfg.Policy.Paths = []string{dir}
	_, err := Load(context.Background(), cfg)
	if want := filepath.Join(dir, "sub", "broken.rego") + ":"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load error = %v, want it to name %s", err, want)
	}
}

func TestRuntimeErrorIsAnError(t *testing.T) {
	// Two values for one complete rule: OPA fails the evaluation, and the
	// engine must not return a decision.
	e := load(t, config.Default(), fstest.MapFS{"l.rego": {Data: []byte(`package pydocker.rules.custom
x := 1 if input.tool == "execute-transient"
x := 2 if input.tool == "execute-transient"
deny contains {"rule": "x", "msg": "m", "line": x, "col": 0} if true
`)}})
	if _, err := e.Decide(context.Background(), run(analyze.Facts{})); err == nil {
		t.Errorf("Decide with conflicting limits gave no error")
	}
}

func TestBuiltinErrorIsAnError(t *testing.T) {
	// A deny rule whose builtin fails must not leave the request allowed.
	e := load(t, config.Default(), fstest.MapFS{"b.rego": {Data: []byte(`package pydocker.rules.custom
deny contains {"rule": "x", "msg": "m", "line": to_number(input.principal.sub), "col": 0} if input.tool == "execute-transient"
`)}})
	in := run(analyze.Facts{})
	in.Principal.Sub = "not a number"
	if d, err := e.Decide(context.Background(), in); err == nil {
		t.Errorf("Decide = %+v, want an error", d)
	}
}

func TestEffectiveLimits(t *testing.T) {
	max := Limits{Timeout: 30, Memory: 1 << 29, CPUs: 1, Pids: 128}
	tests := []struct {
		name      string
		req, want Limits
	}{
		{"nothing requested", Limits{}, max},
		{"tighter", Limits{Timeout: 1.5, Memory: 1 << 20, CPUs: 0.25, Pids: 8}, Limits{Timeout: 1.5, Memory: 1 << 20, CPUs: 0.25, Pids: 8}},
		{"at the maximum", max, max},
		{"above the maximum", Limits{Timeout: 31, Memory: 1<<29 + 1, CPUs: 2, Pids: 129}, max},
		{"negative", Limits{Timeout: -1, Memory: -1, CPUs: -1, Pids: -1}, max},
		{"some", Limits{CPUs: 0.5}, Limits{Timeout: 30, Memory: 1 << 29, CPUs: 0.5, Pids: 128}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, effective(tt.req, max)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}

	// Rules cannot raise them: a request above the maximum is denied and
	// the decision still carries the maximum.
	in := run(analyze.Facts{})
	in.LimitsRequested = Limits{Pids: 1000}
	d := decide(t, load(t, config.Default(), nil), in)
	if d.Allow || d.Limits.Pids != 128 {
		t.Errorf("decision = %+v, want a denial with pids 128", d)
	}
}

func TestConcurrentDecide(t *testing.T) {
	e := load(t, config.Default(), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := run(analyze.Facts{Imports: []analyze.Import{imp("numpy", i+1)}, Dynamic: []analyze.Dynamic{dyn("eval", i+2)}})
			for range 20 {
				d, err := e.Decide(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				if !d.Allow || len(d.Warnings) != 1 || d.Warnings[0].Line != i+2 {
					errs <- errors.New("wrong decision under concurrency")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestInputValue(t *testing.T) {
	arg := "os"
	inputs := []Input{
		{},
		run(analyze.Facts{}),
		{Tool: ToolExecuteTransient, Code: &Code{Facts: analyze.Facts{}}},
		{Tool: ToolExecuteTransient, Code: &Code{Facts: analyze.Facts{}, Bytes: 9, Expression: &Expression{Tokens: 12, Line: 3, Col: 4}}},
		{
			Tool: ToolExecutePersistent,
			Code: &Code{Facts: analyze.Facts{
				Imports: []analyze.Import{
					{Module: "os.path", Alias: "p", Line: 1, Col: 2, Conditional: true},
					{Module: "x", Level: 2, From: true, Names: []analyze.Alias{{Name: "a", AsName: "b"}, {Name: "*"}}, Line: 3},
				},
				Dynamic:    []analyze.Dynamic{{Kind: "__import__", Arg: &arg, Constant: true, Line: 4, Col: 5}, {Kind: "dunder", Name: "__dict__"}},
				Calls:      []analyze.Call{{Name: "os.system", Line: 6, Col: 7}},
				References: []analyze.Call{{Name: "os.popen", Line: 8, Col: 9}},
			}, Bytes: 123, Lines: 7, Source: []byte("not in the input")},
			Language:        "bash",
			Package:         &Package{Name: "numpy", Specifier: "==1", Index: "https://x"},
			Session:         &Session{ID: "s", Owner: "o", Exists: true, OwnerCount: 2, Packages: 3},
			LimitsRequested: Limits{Timeout: 2.5, Memory: 1 << 40, CPUs: 0.25, Pids: 7},
			Principal:       Principal{Sub: "alice", Scopes: []string{"a", "b"}},
		},
		{Tool: ToolInstallPackage, Package: &Package{Name: "pdma", Specifier: "==1", Resolved: []ResolvedPackage{
			{Name: "pdma", Version: "1"}, {Name: "pdmb", Version: "2.0", RequiredBy: []string{"pdma"}},
		}}},
	}
	for i, in := range inputs {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		want, err := ast.InterfaceToValue(generic)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.value(); got.Compare(want) != 0 {
			t.Errorf("input %d: value() =\n%v\nwant (JSON)\n%v", i, got, want)
		}
	}
}

func TestParseRequirement(t *testing.T) {
	tests := []struct {
		in      string
		want    Package
		wantErr string
	}{
		{in: "numpy", want: Package{Name: "numpy"}},
		{in: " numpy == 1.26.4 ", want: Package{Name: "numpy", Specifier: "== 1.26.4"}},
		{in: "pandas>=2,<3", want: Package{Name: "pandas", Specifier: ">=2,<3"}},
		{in: "zope.interface~=6.0", want: Package{Name: "zope.interface", Specifier: "~=6.0"}},
		{in: "requests[socks]", wantErr: "extras"},
		{in: "pkg @ https://example/pkg.whl", wantErr: "direct references"},
		{in: "pkg; python_version<'3.8'", wantErr: "environment markers"},
		{in: "numpy>>1", wantErr: "not a version clause"},
		{in: "-x", wantErr: "not a requirement"},
		{in: "", wantErr: "not a requirement"},
	}
	for _, tt := range tests {
		got, err := ParseRequirement(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRequirement(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRequirement(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseRequirement(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestNewCode(t *testing.T) {
	for src, want := range map[string]int{"": 0, "x": 1, "x\n": 1, "x\ny": 2, "x\ny\n": 2, "\n\n": 2} {
		c := NewCode(analyze.Facts{}, []byte(src))
		if c.Lines != want || c.Bytes != len(src) {
			t.Errorf("NewCode(%q) = %d lines %d bytes, want %d lines", src, c.Lines, c.Bytes, want)
		}
	}
}

// TestListRegex checks that the regular expressions precomputed in Go
// are the ones rules/lib.rego builds when the data lacks them, and that
// they match what they should.
func TestListRegex(t *testing.T) {
	lib, err := rules.FS.ReadFile("lib.rego")
	if err != nil {
		t.Fatal(err)
	}
	pq, err := rego.New(rego.Query("data.pydocker.lib.list_regex(input.key, input.names)"),
		rego.Module("lib.rego", string(lib))).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lists := [][]string{{}, {"os"}, {"sys", "os", "subprocess"}, {"os.path", "a.b.c", "x"}, {"collections.abc", "numpy"}, {"builtins.open", "eval"}}
	for _, key := range []string{"blocked_modules", "allowed_modules", "blocked_calls"} {
		for _, l := range lists {
			names, err := nameList(key, l)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"key": key, "names": names}))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%s %v: %v %v", key, l, rs, err)
			}
			if got, want := rs[0].Expressions[0].Value, listRegex(key, names); got != want {
				t.Errorf("%s %v: Rego builds %q, Go %q", key, l, got, want)
			}
		}
	}

	names, _ := nameList("blocked_modules", []string{"os.path", "sys"})
	blocked := regexp.MustCompile(listRegex("blocked_modules", names))
	for text, want := range map[string]bool{
		"numpy.\nsys.\n": true, "sys.path.\n": true, "os.\n": true, "os.path.\n": true,
		"osx.\n": false, "numpy.\nsysconfig.\n": false, "os.sep.\n": false,
	} {
		if blocked.MatchString(text) != want {
			t.Errorf("blocked regex on %q: want %v", text, want)
		}
	}
	names, _ = nameList("allowed_modules", []string{"numpy", "collections.abc"})
	allowed := regexp.MustCompile(listRegex("allowed_modules", names))
	for text, want := range map[string]string{
		"numpy.\nnumpy.linalg.\n__future__.\ncollections.abc.\n": "",
		"numpy.\nnumpyro.\ncollections.\n":                       "numpyro.\ncollections.\n",
	} {
		if got := allowed.ReplaceAllString(text, ""); got != want {
			t.Errorf("allowed regex on %q leaves %q, want %q", text, got, want)
		}
	}
}

func TestNameList(t *testing.T) {
	got, err := nameList("blocked_calls", []string{" shutil.rmtree", "os.system", "eval ", "os.system", "eval"})
	if diff := cmp.Diff([]any{"eval", "os.system", "shutil.rmtree"}, got); err != nil || diff != "" {
		t.Errorf("nameList: %v, names (-want +got):\n%s", err, diff)
	}
	if got, err := nameList("blocked_calls", nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("nameList of nothing = %#v, %v; want an empty list", got, err)
	}
	if _, err := nameList("blocked_modules", []string{"os", "os path"}); err == nil || !strings.Contains(err.Error(), `blocked_modules[1]: "os path"`) {
		t.Errorf("nameList with a space = %v, want an error naming blocked_modules[1]", err)
	}
}
