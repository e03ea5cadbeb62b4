package policy

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// compat is python-docker-mcp's default module lists.
func compat(c *config.Config) {
	c.AllowedModules = []string{
		"math", "datetime", "random", "json", "re", "collections", "statistics",
		"itertools", "functools", "operator", "string", "typing", "dataclasses",
		"enum", "abc", "array", "bisect", "heapq", "decimal", "fractions", "numbers",
	}
	c.BlockedModules = []string{
		"os", "sys", "subprocess", "multiprocessing", "threading", "socket",
		"asyncio", "shutil", "pathlib", "tempfile", "pty", "platform",
	}
}

// dataScience is the facts of ordinary data-science code.
var dataScience = analyze.Facts{
	Imports: []analyze.Import{
		{Module: "numpy", Alias: "np", Line: 1},
		{Module: "pandas", Alias: "pd", Line: 2},
		{Module: "matplotlib.pyplot", Alias: "plt", Line: 3},
		fromImp("scipy", 4, "stats"),
		fromImp("sklearn.linear_model", 5, "LinearRegression"),
		{Module: "sympy", Alias: "sp", Line: 6},
		imp("math", 7), imp("json", 8), imp("re", 9), imp("collections", 10),
		fromImp("itertools", 11, "chain"), fromImp("dataclasses", 12, "dataclass"),
		fromImp("typing", 13, "List"), fromImp("__future__", 14, "annotations"),
		imp("statistics", 15), fromImp("functools", 16, "reduce"),
	},
	Calls: []analyze.Call{call("numpy.array", 20), call("pandas.DataFrame", 21), call("print", 22), call("matplotlib.pyplot.plot", 23)},
}

func TestShippedRules(t *testing.T) {
	tests := []struct {
		name     string
		cfg      func(*config.Config)
		in       Input
		want     []string // violations as "line:rule"
		warnings []string
	}{
		{
			name: "default config lets data-science code through",
			in:   run(dataScience),
		},
		{
			name: "default config judges no module at all",
			in:   run(analyze.Facts{Imports: []analyze.Import{imp("os", 1), imp("subprocess", 2), imp("socket", 3)}}),
		},
		{
			name: "python-docker-mcp lists reject numpy until it is added",
			cfg:  compat,
			in:   run(analyze.Facts{Imports: []analyze.Import{{Module: "numpy", Alias: "np", Line: 1}, imp("math", 2), imp("os", 3)}}),
			want: []string{"1:modules.not_allowed", "3:modules.blocked"},
		},
		{
			name: "python-docker-mcp lists with numpy, pandas, matplotlib, scipy, sklearn, sympy added",
			cfg: func(c *config.Config) {
				compat(c)
				c.AllowedModules = append(c.AllowedModules, "numpy", "pandas", "matplotlib", "scipy", "sklearn", "sympy", "__future__")
			},
			in: run(dataScience),
		},
		{
			name: "blocked prefix semantics: os blocks os.path, not osx",
			cfg:  func(c *config.Config) { c.BlockedModules = []string{"os"} },
			in: run(analyze.Facts{Imports: []analyze.Import{
				imp("os.path", 1), imp("osx", 2), fromImp("os", 3, "path"), fromImp("os.path", 4, "join"),
				{Module: "os", Level: 1, From: true, Names: []analyze.Alias{{Name: "x"}}, Line: 5},
			}}),
			want: []string{"1:modules.blocked", "3:modules.blocked", "4:modules.blocked"},
		},
		{
			name: "allowlist prefix semantics: numpy allows numpy.linalg",
			cfg:  func(c *config.Config) { c.AllowedModules = []string{"numpy"} },
			in: run(analyze.Facts{Imports: []analyze.Import{
				imp("numpy.linalg", 1), fromImp("numpy", 2, "fft"), imp("numpyro", 3), imp("scipy", 4),
			}}),
			want: []string{"3:modules.not_allowed", "4:modules.not_allowed"},
		},
		{
			name: "allowlist of a submodule warns when the import binds the package",
			cfg:  func(c *config.Config) { c.AllowedModules = []string{"os.path"} },
			in: run(analyze.Facts{Imports: []analyze.Import{
				imp("os.path", 1), fromImp("os", 2, "path"), imp("os", 3), {Module: "os.path", Alias: "p", Line: 4},
			}}),
			want:     []string{"3:modules.not_allowed"},
			warnings: []string{"1:modules.binds_parent"},
		},
		{
			name: "constant dynamic import is judged like an import",
			cfg:  func(c *config.Config) { c.BlockedModules = []string{"subprocess"} },
			in: run(analyze.Facts{Dynamic: []analyze.Dynamic{
				constDyn("__import__", "subprocess", 1), constDyn("importlib.import_module", "json", 2),
			}}),
			want: []string{"1:modules.blocked"},
		},
		{
			name: "blocked calls match after alias resolution",
			cfg:  func(c *config.Config) { c.BlockedCalls = []string{"os.system", "eval"} },
			// `import os as o; o.system("x")`, `from os import system as s; s("x")`
			// and `builtins.eval("1")`, as analyze resolves them.
			in: run(analyze.Facts{
				Imports: []analyze.Import{{Module: "os", Alias: "o", Line: 1}, {Module: "os", From: true, Names: []analyze.Alias{{Name: "system", AsName: "s"}}, Line: 2}},
				Calls:   []analyze.Call{call("os.system", 3), call("os.system", 4), call("builtins.eval", 5), call("os.getcwd", 6)},
			}),
			want: []string{"3:calls.blocked", "4:calls.blocked", "5:calls.blocked"},
		},
		{
			name: "standard profile warns about dynamic features",
			in: run(analyze.Facts{Dynamic: []analyze.Dynamic{
				dyn("exec", 1), dyn("__import__", 2), {Kind: "dunder", Name: "__subclasses__", Line: 3},
				{Kind: "dunder", Name: "__init__", Line: 4}, dyn("sys.modules", 5), dyn("pickle.loads", 6),
				dyn("getattr", 7), constDyn("getattr", "shape", 8),
			}}),
			warnings: []string{"1:dynamic.exec", "2:dynamic.import", "3:dynamic.dunder", "5:dynamic.sys_modules", "6:dynamic.deserialize", "7:dynamic.getattr"},
		},
		{
			name: "strict profile denies them",
			cfg:  func(c *config.Config) { c.Policy.Profile = "strict" },
			in: run(analyze.Facts{Dynamic: []analyze.Dynamic{
				dyn("exec", 1), dyn("__import__", 2), {Kind: "dunder", Name: "__subclasses__", Line: 3},
				{Kind: "dunder", Name: "__init__", Line: 4}, dyn("sys.modules", 5), dyn("pickle.loads", 6),
				dyn("getattr", 7), constDyn("getattr", "shape", 8), constDyn("importlib.import_module", "json", 9),
			}}),
			want: []string{"1:dynamic.exec", "2:dynamic.import", "3:dynamic.dunder", "5:dynamic.sys_modules", "6:dynamic.deserialize", "7:dynamic.getattr"},
		},
		{
			name: "strict profile lets data-science code through",
			cfg:  func(c *config.Config) { c.Policy.Profile = "strict" },
			in:   run(dataScience),
		},
		{
			name: "limits over the maximum",
			in: func() Input {
				in := run(analyze.Facts{})
				in.LimitsRequested = Limits{Memory: 1 << 30, Timeout: 10, Pids: 129}
				return in
			}(),
			want: []string{"0:limits.max", "0:limits.max"},
		},
		{
			name: "code over max_code_bytes",
			cfg:  func(c *config.Config) { c.Limits.MaxCodeBytes = 50 },
			in:   run(analyze.Facts{}),
			want: []string{"0:limits.code_size"},
		},
		{
			name: "max sessions per owner",
			cfg:  func(c *config.Config) { c.Sessions.MaxPerOwner = 1 },
			in: func() Input {
				in := run(analyze.Facts{})
				in.Tool = ToolExecutePersistent
				in.Session = &Session{Owner: "alice", OwnerCount: 1}
				return in
			}(),
			want: []string{"0:sessions.max_per_owner"},
		},
		{
			name: "someone else's session",
			in: Input{Tool: ToolCleanupSession, Principal: Principal{Sub: "mallory"},
				Session: &Session{ID: "abc", Owner: "alice", Exists: true}},
			want: []string{"0:sessions.owner"},
		},
		{
			name: "unknown tool",
			in:   Input{Tool: "shell"},
			want: []string{"0:tools.unknown"},
		},
		{
			name: "execute without code",
			in:   Input{Tool: ToolExecuteTransient},
			want: []string{"0:tools.code_missing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := decide(t, load(t, cfg, nil), tt.in)
			if tt.want == nil {
				tt.want = []string{}
			}
			if tt.warnings == nil {
				tt.warnings = []string{}
			}
			if diff := cmp.Diff(tt.want, brief(d.Violations)); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%+v", diff, d.Violations)
			}
			if diff := cmp.Diff(tt.warnings, brief(d.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s\n%+v", diff, d.Warnings)
			}
			if d.Allow != (len(tt.want) == 0) {
				t.Errorf("Allow = %v", d.Allow)
			}
		})
	}
}

func TestDecisionLimitsAndLists(t *testing.T) {
	cfg := config.Default()
	cfg.AllowedModules = []string{"numpy", "math"}
	cfg.BlockedModules = []string{"os"}
	cfg.BlockedCalls = []string{"os.system"}
	in := run(analyze.Facts{})
	in.LimitsRequested = Limits{CPUs: 0.5, Timeout: 5}
	d := decide(t, load(t, cfg, nil), in)

	want := Decision{Allow: true, Violations: []Violation{}, Warnings: []Violation{},
		Limits: Limits{Timeout: 5, Memory: 512 << 20, CPUs: 0.5, Pids: 128}}
	want.Modules.Allowed = []string{"math", "numpy"}
	// The C twins of os (posix, nt) and of os.path (posixpath) go to the
	// sandbox's import guard too.
	want.Modules.Blocked = []string{"nt", "os", "posix", "posixpath"}
	want.Calls.Blocked = []string{"os.system"}
	// The allowlist covers no module of any class; os blocked as well.
	want.Capabilities = Capabilities{Sockets: []string{}}
	want.Quotas = configuredQuotas(cfg)
	want.Reuse = config.ReusePrincipal
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}

// TestDecisionReuse: pool.reuse gives the decision's reuse; an operator
// rule turns it off for some principals, and cannot turn it on.
func TestDecisionReuse(t *testing.T) {
	rule := fstest.MapFS{"tenants.rego": {Data: []byte("package pydocker.rules.tenants\n\nreuse := \"never\" if input.principal.sub == \"guest\"\n")}}
	for _, tt := range []struct {
		configured, sub, want string
	}{
		{config.ReusePrincipal, "alice", config.ReusePrincipal},
		{config.ReusePrincipal, "guest", config.ReuseNever},
		{config.ReuseNever, "alice", config.ReuseNever},
	} {
		cfg := config.Default()
		cfg.Pool.Reuse = tt.configured
		in := run(analyze.Facts{})
		in.Principal.Sub = tt.sub
		if got := decide(t, load(t, cfg, rule), in).Reuse; got != tt.want {
			t.Errorf("pool.reuse %s, principal %s: reuse %q, want %q", tt.configured, tt.sub, got, tt.want)
		}
	}
}

func TestLimitMessageNamesTheMaximum(t *testing.T) {
	in := run(analyze.Facts{})
	in.LimitsRequested = Limits{Memory: 1 << 30}
	d := decide(t, load(t, config.Default(), nil), in)
	want := []Violation{{Rule: "limits.max",
		Msg: "requested memory_bytes 1073741824 is above the maximum 512m (docker.memory_limit); ask for at most 536870912"}}
	if diff := cmp.Diff(want, d.Violations); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if d.Limits.Memory != 512<<20 {
		t.Errorf("effective memory = %d, want the maximum", d.Limits.Memory)
	}
}

func TestPackageRules(t *testing.T) {
	install := func(req, index string, installed int) Input {
		p, err := ParseRequirement(req)
		if err != nil {
			t.Fatalf("ParseRequirement(%q): %v", req, err)
		}
		p.Index = index
		return Input{Tool: ToolInstallPackage, Package: &p, Principal: Principal{Sub: "alice"},
			Session: &Session{ID: "s1", Owner: "alice", Exists: true, OwnerCount: 1, Packages: installed}}
	}
	tests := []struct {
		name string
		cfg  func(*config.Package)
		in   Input
		want []string // rules
	}{
		{name: "no lists: anything valid", in: install("requests>=2", "", 0)},
		{name: "blocked, PEP 503 normalised", cfg: func(p *config.Package) { p.Blocked = []string{"Scikit_Learn"} },
			in: install("scikit.learn", "", 0), want: []string{"packages.blocked"}},
		{name: "blocked, other name", cfg: func(p *config.Package) { p.Blocked = []string{"scikit-learn"} },
			in: install("scikit-image", "", 0)},
		{name: "allowlist hit, normalised", cfg: func(p *config.Package) { p.Allowed = []string{"python-dateutil"} },
			in: install("Python_Dateutil==2.9.0", "", 0)},
		{name: "allowlist miss", cfg: func(p *config.Package) { p.Allowed = []string{"python-dateutil"} },
			in: install("requests", "", 0), want: []string{"packages.not_allowed"}},
		{name: "version constraint met", cfg: func(p *config.Package) { p.Allowed = []string{"numpy>=1.26,<2"} },
			in: install("numpy==1.26.4", "", 0)},
		{name: "version constraint not met", cfg: func(p *config.Package) { p.Allowed = []string{"numpy>=1.26,<2"} },
			in: install("numpy==2.0.0rc1", "", 0), want: []string{"packages.version"}},
		{name: "version constraint needs an exact version", cfg: func(p *config.Package) { p.Allowed = []string{"numpy~=1.26.0"} },
			in: install("numpy>=1.26", "", 0), want: []string{"packages.version"}},
		{name: "compatible release", cfg: func(p *config.Package) { p.Allowed = []string{"numpy~=1.26.0"} },
			in: install("numpy==1.26.9", "", 0)},
		{name: "require pinned, pinned", cfg: func(p *config.Package) { p.RequirePinned = true },
			in: install("requests==2.31.0", "", 0)},
		{name: "require pinned, wildcard", cfg: func(p *config.Package) { p.RequirePinned = true },
			in: install("requests==2.*", "", 0), want: []string{"packages.unpinned"}},
		{name: "require pinned, unpinned", cfg: func(p *config.Package) { p.RequirePinned = true },
			in: install("requests", "", 0), want: []string{"packages.unpinned"}},
		{name: "configured index is allowed", cfg: func(p *config.Package) { p.IndexURL = "https://pypi.internal/simple/" },
			in: install("requests", "https://pypi.internal/simple", 0)},
		{name: "index allowlist", cfg: func(p *config.Package) { p.AllowedIndexes = []string{"https://mirror/simple"} },
			in: install("requests", "https://mirror/simple/", 0)},
		{name: "unknown index", in: install("requests", "https://evil.example/simple", 0), want: []string{"packages.index"}},
		{name: "max per session", cfg: func(p *config.Package) { p.MaxPerSession = 3 },
			in: install("requests", "", 3), want: []string{"packages.max_per_session"}},
		{name: "below max per session", cfg: func(p *config.Package) { p.MaxPerSession = 3 },
			in: install("requests", "", 2)},
		{name: "bad name from a raw input", in: Input{Tool: ToolInstallPackage, Package: &Package{Name: "a b"}},
			want: []string{"packages.name"}},
		{name: "bad specifier from a raw input", in: Input{Tool: ToolInstallPackage, Package: &Package{Name: "numpy", Specifier: "=>1"}},
			want: []string{"packages.specifier"}},
		{name: "install without a package", in: Input{Tool: ToolInstallPackage}, want: []string{"tools.package_missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			if tt.cfg != nil {
				tt.cfg(&cfg.Package)
			}
			d := decide(t, load(t, cfg, nil), tt.in)
			got := []string{}
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if tt.want == nil {
				tt.want = []string{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%+v", diff, d.Violations)
			}
		})
	}
}

// TestAnalyzedSource runs real code through analyze.Source and the
// shipped rules, as the server does.
func TestAnalyzedSource(t *testing.T) {
	cfg := config.Default()
	cfg.BlockedModules = []string{"subprocess"}
	cfg.BlockedCalls = []string{"os.system", "shutil.rmtree"}
	e := load(t, cfg, nil)
	tests := []struct {
		name, src string
		want      []string
	}{
		{"import alias", "import os as o\no.system('ls')\n", []string{"2:calls.blocked"}},
		{"from-import alias", "from os import system as s\ns('ls')\n", []string{"2:calls.blocked"}},
		{"submodule prefix", "import shutil\nshutil.rmtree('/tmp/x')\nshutil.copy('a', 'b')\n", []string{"2:calls.blocked"}},
		{"blocked module, nested import", "def f():\n    import subprocess.run\n", []string{"2:modules.blocked"}},
		{"constant dynamic import", "__import__('subprocess')\n", []string{"1:modules.blocked"}},
		{"reference, then a call through it", "import os\nf = os.system\nf('ls')\n", []string{"2:calls.blocked", "3:calls.blocked"}},
		{"getattr reference", "import os\ngetattr(os, 'system')('ls')\n", []string{"2:calls.blocked"}},
		{"data science", "import numpy as np\nimport pandas as pd\nprint(np.ones(3), pd.Series([1]))\n", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := analyzed(t, tt.src)
			if diff := cmp.Diff(tt.want, brief(decide(t, e, in).Violations)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
