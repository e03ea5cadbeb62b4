package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runPolicyCmd(t *testing.T, cfg config.Config, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runPolicy(context.Background(), cfg, args, &out, &errb)
	return code, out.String(), errb.String()
}

const dataScienceCode = `import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from scipy import stats
from sklearn.linear_model import LinearRegression
import sympy

df = pd.DataFrame({"x": np.arange(10)})
print(f"{df.x.mean():.2f}", stats.norm.cdf(0))
`

const deniedCode = `import json
import subprocess as sp
from os import system

sp.run(["ls"])
system("ls")
eval("1")
`

func TestPolicyCheck(t *testing.T) {
	allowed := writeFile(t, "ok.py", dataScienceCode)
	denied := writeFile(t, "bad.py", deniedCode)
	blocking := config.Default()
	blocking.BlockedModules = []string{"subprocess", "os"}
	blocking.BlockedCalls = []string{"os.system"}

	tests := []struct {
		name     string
		cfg      config.Config
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "default config allows data-science code", cfg: config.Default(), args: []string{"check", allowed}, wantCode: 0},
		{
			name: "denied file lists violations then warnings", cfg: blocking, args: []string{"check", denied}, wantCode: 1,
			wantOut: denied + `:2:0: modules.blocked: import subprocess: module subprocess is blocked (blocked_modules lists "subprocess")
` + denied + `:3:0: modules.blocked: from os import system: module os is blocked (blocked_modules lists "os")
` + denied + `:6:0: calls.blocked: call to os.system is blocked (blocked_calls lists "os.system")
` + denied + `:7:0: warning: dynamic.exec: eval() runs code that cannot be checked before the run
`,
		},
		{
			name: "strict profile from the flag, after the file", cfg: config.Default(), args: []string{"check", denied, "--profile", "strict"}, wantCode: 1,
			wantOut: denied + ":7:0: dynamic.exec: eval() runs code that cannot be checked before the run\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runPolicyCmd(t, tt.cfg, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, errOut)
			}
			if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyCheckJSON(t *testing.T) {
	file := writeFile(t, "bad.py", deniedCode)
	cfg := config.Default()
	cfg.BlockedModules = []string{"subprocess"}
	code, out, errOut := runPolicyCmd(t, cfg, "check", "--json", file)
	if code != 1 {
		t.Fatalf("exit code = %d, want 1; stderr: %s", code, errOut)
	}
	var got struct {
		Facts struct {
			Imports []struct {
				Module string `json:"module"`
				Level  int    `json:"level"`
			} `json:"imports"`
		} `json:"facts"`
		Decision struct {
			Allow      bool `json:"allow"`
			Violations []struct {
				Rule string `json:"rule"`
				Line int    `json:"line"`
			} `json:"violations"`
			Modules struct {
				Blocked []string `json:"blocked"`
			} `json:"modules"`
			Capabilities map[string]any `json:"capabilities"`
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not the JSON document: %v\n%s", err, out)
	}
	var mods []string
	for _, i := range got.Facts.Imports {
		mods = append(mods, i.Module)
	}
	if diff := cmp.Diff([]string{"json", "subprocess", "os"}, mods); diff != "" {
		t.Errorf("facts.imports modules (-want +got):\n%s", diff)
	}
	if got.Decision.Allow || len(got.Decision.Violations) != 1 || got.Decision.Violations[0].Line != 2 ||
		!cmp.Equal(got.Decision.Modules.Blocked, []string{"_posixsubprocess", "subprocess"}) {
		t.Errorf("decision = %+v", got.Decision)
	}
	// subprocess blocked: no processes, the rest open.
	wantCaps := map[string]any{"processes": false, "sockets": []any{"inet", "inet6", "unix"}, "pty": true, "native_code": true}
	if diff := cmp.Diff(wantCaps, got.Decision.Capabilities); diff != "" {
		t.Errorf("decision.capabilities (-want +got):\n%s", diff)
	}
}

func TestPolicyCheckRefusedSource(t *testing.T) {
	file := writeFile(t, "syntax.py", "x = (1,\n")
	code, out, _ := runPolicyCmd(t, config.Default(), "check", file)
	want := file + ":1:4: syntax: '(' was never closed\n    x = (1,\n        ^\n"
	if code != 1 || out != want {
		t.Errorf("exit %d, stdout %q; want exit 1 and %q", code, out, want)
	}
}

func TestPolicyCheckExamplePolicy(t *testing.T) {
	file := writeFile(t, "open.py", "with open('/etc/passwd') as f:\n    print(f.read())\n")
	cfg := config.Default()
	cfg.Policy.Paths = []string{"../../examples/policy"}
	code, out, _ := runPolicyCmd(t, cfg, "check", file)
	want := file + ":1:5: files.open: open() needs scope python:files; use the read-file and write-file tools for files in the workspace\n"
	if code != 1 || out != want {
		t.Errorf("exit %d, stdout %q; want 1 and %q", code, out, want)
	}
}

func TestPolicyEval(t *testing.T) {
	cfg := config.Default()
	cfg.Package.Blocked = []string{"scikit-learn"}
	tests := []struct {
		name      string
		input     string
		wantCode  int
		wantRules []string
		wantErr   string
	}{
		{name: "allowed install", input: `{"tool": "install-package", "package": {"name": "numpy", "specifier": "==1.26.4"}}`, wantCode: 0, wantRules: []string{}},
		{name: "blocked install, PEP 503 name", input: `{"tool": "install-package", "package": {"name": "Scikit_Learn"}}`, wantCode: 1, wantRules: []string{"packages.blocked"}},
		{name: "limits above the maximum", input: `{"tool": "list-files", "limits_requested": {"memory_bytes": 9999999999}}`, wantCode: 1, wantRules: []string{"limits.max"}},
		{name: "unknown field", input: `{"tool": "list-files", "limit": {}}`, wantCode: 1, wantErr: `unknown field "limit"`},
		{name: "not JSON", input: `tool: x`, wantCode: 1, wantErr: "is not a policy input document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, "input.json", tt.input)
			code, out, errOut := runPolicyCmd(t, cfg, "eval", file)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, errOut)
			}
			if tt.wantErr != "" {
				if !strings.Contains(errOut, tt.wantErr) {
					t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
				}
				return
			}
			var d struct {
				Violations []struct {
					Rule string `json:"rule"`
				} `json:"violations"`
				Limits       map[string]float64 `json:"limits"`
				Capabilities *struct {
					Processes bool     `json:"processes"`
					Sockets   []string `json:"sockets"`
				} `json:"capabilities"`
			}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("stdout: %v\n%s", err, out)
			}
			rules := []string{}
			for _, v := range d.Violations {
				rules = append(rules, v.Rule)
			}
			if diff := cmp.Diff(tt.wantRules, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if d.Limits["memory_bytes"] != float64(cfg.Docker.MemoryLimit) {
				t.Errorf("effective limits = %v", d.Limits)
			}
			if c := d.Capabilities; c == nil || !c.Processes || !cmp.Equal(c.Sockets, []string{"inet", "inet6", "unix"}) {
				t.Errorf("capabilities = %+v, want the defaults (everything)", c)
			}
		})
	}
}

func TestPolicyUsageAndLoadErrors(t *testing.T) {
	file := writeFile(t, "ok.py", "x = 1\n")
	tests := []struct {
		name     string
		cfg      func(*config.Config)
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "no subcommand", args: nil, wantCode: 2, wantErr: "want check or eval"},
		{name: "unknown subcommand", args: []string{"test"}, wantCode: 2, wantErr: "want check or eval"},
		{name: "no file", args: []string{"check"}, wantCode: 2, wantErr: "want exactly one file"},
		{name: "unknown flag", args: []string{"check", "--nope", file}, wantCode: 2, wantErr: "flag provided but not defined: -nope"},
		{name: "missing file", args: []string{"check", "/nonexistent.py"}, wantCode: 1, wantErr: "no such file"},
		{name: "bad profile", args: []string{"check", "--profile", "lax", file}, wantCode: 3, wantErr: `policy.profile: "lax" is not a profile`},
		{name: "broken operator Rego", cfg: func(c *config.Config) {
			c.Policy.Paths = []string{writeFile(t, "broken.rego", "package pydocker.rules.x\nx := \n")}
		}, args: []string{"check", file}, wantCode: 3, wantErr: "broken.rego:"},
		{name: "-- ends flags", args: []string{"check", "--", file}, wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			code, _, errOut := runPolicyCmd(t, cfg, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tt.wantCode, tt.wantErr)
			}
		})
	}
}
