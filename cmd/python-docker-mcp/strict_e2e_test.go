package main

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

const strictExample = "../../examples/config/strict.yaml"

// TestStrictExample runs examples/config/strict.yaml through the built
// server: numpy and pandas math, json and printing run; reaching the system
// (os, subprocess, socket, ctypes, files under /etc) and the dynamic tricks
// that would hide it are refused, each naming the rule that refused it.
func TestStrictExample(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--config", strictExample})
	allowed := []struct{ name, code, stdout string }{
		{"numpy", "import numpy as np\nprint(np.linalg.det(np.array([[2.0, 0], [0, 3.0]])))", "6.0"},
		{"pandas", "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nprint(int(df['a'].sum()), df['a'].mean())", "6 2.0"},
		{"json", "import json\nprint(json.dumps({'x': [1, 2]}, sort_keys=True))", `{"x": [1, 2]}`},
		{"math and print", "import math\nprint(round(math.sqrt(2), 3), 'ok', sep=',')", "1.414,ok"},
	}
	for _, a := range allowed {
		res := c.call(t, "execute-transient", map[string]any{"code": a.code})
		if res.IsError || !strings.Contains(text(res), "--- stdout ---\n"+a.stdout) {
			t.Errorf("%s: %q, want stdout %q", a.name, text(res), a.stdout)
		}
	}
	denied := []struct{ name, code, rule string }{
		{"os.system", "import os\nos.system('id')", "modules.blocked"},
		{"subprocess", "import subprocess\nsubprocess.run(['id'])", "modules.blocked"},
		{"socket", "import socket\nsocket.socket().connect(('10.0.0.1', 80))", "modules.blocked"},
		{"ctypes", "import ctypes\nctypes.CDLL(None).system(b'id')", "modules.blocked"},
		{"open /etc", "print(open('/etc/passwd').read())", "calls.blocked"},
		{"eval", "eval('1 + 1')", "calls.blocked"},
		{"exec", "exec('import os')", "calls.blocked"},
		{"__import__", "__import__('o' + 's').system('id')", "calls.blocked"},
		{"getattr of builtins", "getattr(__builtins__, 'ev' + 'al')('1')", "dynamic."},
		{"subclass walk", "().__class__.__base__.__subclasses__()", "dynamic."},
		{"importlib", "import importlib\nimportlib.import_module('os')", "modules.blocked"},
		// Spellings the static gate lets pass: refused at run time.
		{"open through a list", "print([open][0]('/etc/hostname').read())", "calls.blocked, refused at run time"},
		{"open through a lambda", "(lambda f: f('/etc/passwd'))(open)", "calls.blocked, refused at run time"},
	}
	for _, d := range denied {
		res := c.call(t, "execute-transient", map[string]any{"code": d.code})
		if got := text(res); !res.IsError || !strings.Contains(got, d.rule) {
			t.Errorf("%s: %q, want it refused by %s", d.name, got, d.rule)
		}
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the strict example")
}
