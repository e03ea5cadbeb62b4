package docker_test

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

func TestRunnerRefusesDisagreeingFacts(t *testing.T) {
	e, _ := newExec(t, nil)
	tests := []struct {
		name    string
		code    string
		facts   []analyze.Import
		wantMsg string
	}{
		{name: "gate missed an import", code: "x = 1\nimport os\n", wantMsg: "CPython sees import os (line 2) which the gate did not report"},
		{name: "gate saw a different module", code: "import os", facts: imports("math", 1), wantMsg: "the gate reported import math (line 1) which CPython does not see"},
		{name: "from-import names differ", code: "from os import path",
			facts: []analyze.Import{{Module: "os", From: true, Names: []analyze.Alias{{Name: "sep"}}, Line: 1}}, wantMsg: "from os import path (line 1)"},
		{name: "line differs", code: "\nimport math", facts: imports("math", 1), wantMsg: "import math (line 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := transient(t, e, executor.Request{Code: tt.code + "\nprint('ran')", Imports: tt.facts})
			wantStatus(t, res, "refused")
			if res.Stdout != "" || res.Error == nil || res.Error.Type != "FactMismatch" || !strings.Contains(res.Error.Message, tt.wantMsg) {
				t.Errorf("stdout %q error %+v, want FactMismatch naming %q", res.Stdout, res.Error, tt.wantMsg)
			}
		})
	}
	// Facts that agree run, including from-imports, aliases, relative levels and nesting.
	code := "from os import path as p, sep\nimport math as m, json\ndef f():\n    from collections import abc\n"
	facts := []analyze.Import{
		{Module: "os", From: true, Names: []analyze.Alias{{Name: "path", AsName: "p"}, {Name: "sep"}}, Line: 1},
		{Module: "math", Alias: "m", Line: 2, Col: 0},
		{Module: "json", Line: 2, Col: 0},
		{Module: "collections", From: true, Names: []analyze.Alias{{Name: "abc"}}, Line: 4, Col: 4, Conditional: true},
	}
	wantStatus(t, transient(t, e, executor.Request{Code: code, Imports: facts}), "ok")
}

func TestImportGuard(t *testing.T) {
	e, _ := newExec(t, nil)
	blocked := executor.ModuleRules{Blocked: []string{"subprocess", "os"}}
	tests := []struct {
		name  string
		code  string
		facts []analyze.Import
	}{
		{name: "__import__", code: `__import__("subprocess")`},
		{name: "importlib", code: "import importlib\nimportlib.import_module('subprocess')", facts: imports("importlib", 1)},
		{name: "exec", code: `exec("import subprocess")`},
		{name: "exec with fresh globals", code: `exec("import subprocess", {})`},
		{name: "pickle find_class", code: "import pickle\npickle.loads(b'csubprocess\\nPopen\\n.')", facts: imports("pickle", 1)},
		{name: "pickle Unpickler", code: "import pickle, io\npickle.Unpickler(io.BytesIO(b'cos\\nsystem\\n.')).load()", facts: imports("pickle", 1, "io", 1)},
		{name: "submodule through from-list", code: `__import__("os", fromlist=["path"])`},
		{name: "statement", code: "import os.path", facts: imports("os.path", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := transient(t, e, executor.Request{Code: tt.code, Imports: tt.facts, Modules: blocked})
			wantStatus(t, res, "error")
			if res.Error.Type != "ModuleBlockedError" || !strings.Contains(res.Error.Message, "refused at run time") || !strings.Contains(res.Error.Message, "blocked_modules") {
				t.Errorf("error %+v, want ModuleBlockedError naming the rule", res.Error)
			}
		})
	}
	// Libraries may import what user code may not.
	res := transient(t, e, executor.Request{
		Code:    "import pandas as pd\nimport matplotlib.pyplot as plt\npd.DataFrame({'a': [1, 2]}).shape",
		Imports: []analyze.Import{{Module: "pandas", Alias: "pd", Line: 1}, {Module: "matplotlib.pyplot", Alias: "plt", Line: 2}},
		Modules: blocked,
	})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "(2, 1)" {
		t.Errorf("pandas with os blocked: result %v", res.Result)
	}
	// An allowlist admits only its modules (and their submodules).
	res = transient(t, e, executor.Request{Code: "import math\n__import__('json')", Imports: imports("math", 1), Modules: executor.ModuleRules{Allowed: []string{"math"}}})
	wantStatus(t, res, "error")
	if !strings.Contains(res.Error.Message, "not in allowed_modules") {
		t.Errorf("allowlist: %+v", res.Error)
	}
}
