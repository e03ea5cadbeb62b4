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

// TestCheckExpressionSize: an operator chain is refused before it is
// parsed, by the rules' limits.expression_size, naming the line, the size,
// the maximum and the key that raises it; the maximum is the config's.
func TestCheckExpressionSize(t *testing.T) {
	cfg := config.Default()
	e, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Tool: ToolExecuteTransient, Principal: Principal{Scopes: []string{}}}
	src := "import math\nx = x" + strings.Repeat("**x", 300000) + "\n"
	c, err := e.Check(context.Background(), in, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.Decision.Allow || len(c.Decision.Violations) != 1 || c.Syntax != nil || len(c.Facts.Imports) != 0 {
		t.Fatalf("Check = allow %v, violations %+v, syntax %v, facts %+v; want one violation and no facts", c.Decision.Allow, c.Decision.Violations, c.Syntax, c.Facts)
	}
	v := c.Decision.Violations[0]
	want := Violation{Rule: "limits.expression_size", Line: 2, Col: 0,
		Msg: "line 2: an expression of 600003 tokens is over the maximum of 10000 tokens (limits.max_expression_tokens); split it into smaller statements, or raise limits.max_expression_tokens"}
	if v != want {
		t.Errorf("violation = %+v, want %+v", v, want)
	}

	// the maximum is the config's: a chain of 2003 tokens passes by
	// default and is refused under limits.max_expression_tokens 1000
	small := "x = x" + strings.Repeat("**x", 1000) + "\n"
	if c, _ := e.Check(context.Background(), in, []byte(small)); !c.Decision.Allow {
		t.Errorf("a chain of 2003 tokens: %+v, want allowed", c.Decision)
	}
	cfg.Limits.MaxExpressionTokens = 1000
	e, err = Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ = e.Check(context.Background(), in, []byte(small))
	if c.Decision.Allow || len(c.Decision.Violations) == 0 || c.Decision.Violations[0].Rule != "limits.expression_size" {
		t.Errorf("under limits.max_expression_tokens 1000: %+v, want limits.expression_size", c.Decision)
	}
}
