package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// TestCheck: the one sequence the server and `policy check` share.
func TestCheck(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxCodeBytes = 200
	cfg.BlockedModules = append(cfg.BlockedModules, "socket")
	cfg.Languages.Bash.Enabled = true
	e, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Tool: ToolExecuteTransient, Principal: Principal{Scopes: []string{}}}
	tests := []struct {
		name, lang, src string
		allow           bool
		syntax          bool
		rule            string // a violation's rule that must be there
		imports         int
	}{
		{name: "allowed", src: "import math\nprint(math.pi)", allow: true, imports: 1},
		{name: "denied import", src: "import socket", rule: "modules.blocked", imports: 1},
		{name: "syntax: judged without facts", src: "def (:", allow: true, syntax: true},
		{name: "too large: denied without Rego", src: strings.Repeat("x = 1\n", 100), rule: "input.size"},
		{name: "bash: not analysed", lang: "bash", src: "echo hi", allow: true},
		{name: "bash too large", lang: "bash", src: strings.Repeat("e", 300), rule: "input.size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := in
			in.Language = tt.lang
			c, err := e.Check(context.Background(), in, []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if c.Decision.Allow != tt.allow || (c.Syntax != nil) != tt.syntax || len(c.Facts.Imports) != tt.imports {
				t.Errorf("Check = allow %v, syntax %v, %d imports (%+v); want %v, %v, %d", c.Decision.Allow, c.Syntax, len(c.Facts.Imports), c.Decision.Violations, tt.allow, tt.syntax, tt.imports)
			}
			if c.Facts.References == nil || c.Facts.Calls == nil {
				t.Errorf("facts %+v: want empty lists, not nil", c.Facts)
			}
			if tt.rule != "" {
				found := false
				for _, v := range c.Decision.Violations {
					found = found || strings.HasPrefix(v.Rule, tt.rule)
				}
				if !found {
					t.Errorf("violations %+v: want one of rule %s", c.Decision.Violations, tt.rule)
				}
			}
		})
	}
}
