package policy

import (
	"context"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// FuzzDecide: whatever code analyze accepts, the shipped rules decide it
// without an evaluation error (a builtin failing on odd facts would refuse
// every such request), in both profiles and with every list configured.
//
//	go test ./policy/ -run '^$' -fuzz FuzzDecide -fuzztime 60s
func FuzzDecide(f *testing.F) {
	for _, s := range []string{
		"import numpy as np\nprint(np.ones(3))\n",
		"from os import path, system as s\ns('x')\n",
		"from . import x\nfrom .. y import *\n",
		"__import__('os').system('x')\nimportlib.import_module(name)\n",
		"getattr(o, n)\nsetattr(o, '__dict__', 1)\nx.__subclasses__()\n",
		"import pickle, marshal\npickle.loads(b)\nmarshal.loads(b)\nsys.modules['x']\n",
		"f = eval\nexec('1')\ncompile('1', 'f', 'exec')\n",
		"import a.b.c\nfrom a.b import c as d\nimport os.path as p\n",
		"x = f'{__import__(\"os\")}'\n",
		"import ｏｓ\n",
	} {
		f.Add(s)
	}
	engines := map[string]*Engine{}
	for _, profile := range []string{"standard", "strict"} {
		cfg := config.Default()
		cfg.Policy.Profile = profile
		cfg.AllowedModules = []string{"numpy", "os.path", "a.b", "collections"}
		cfg.BlockedModules = []string{"os", "a.b.c", "subprocess"}
		cfg.BlockedCalls = []string{"os.system", "eval", "builtins.open"}
		engines[profile] = load(f, cfg, nil)
	}
	f.Fuzz(func(t *testing.T, src string) {
		facts, err := analyze.Source([]byte(src), analyze.Options{})
		if err != nil {
			return
		}
		for profile, e := range engines {
			in := Input{Tool: ToolExecuteTransient, Code: NewCode(facts, []byte(src))}
			if _, err := e.Decide(context.Background(), in); err != nil {
				t.Fatalf("%s: Decide on facts %+v: %v", profile, facts, err)
			}
		}
	})
}
