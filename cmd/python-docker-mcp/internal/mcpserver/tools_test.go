package mcpserver

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/rules"
)

// toolNames are toolDefs' names, sorted; scope "" is every tool.
func toolNames(scope string) []string {
	var out []string
	for _, d := range toolDefs {
		if scope == "" || d.scope == scope {
			out = append(out, d.name)
		}
	}
	sort.Strings(out)
	return out
}

// regoSet evaluates a set of strings in the shipped rules.
func regoSet(t *testing.T, query string) []string {
	t.Helper()
	opts := []func(*rego.Rego){rego.Query(query), rego.SetRegoVersion(ast.RegoV1)}
	err := fs.WalkDir(rules.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(rules.FS, p)
		if err != nil {
			return err
		}
		opts = append(opts, rego.Module(p, string(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(opts...).Eval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		t.Fatalf("%s: %v", query, rs)
	}
	var out []string
	for _, v := range rs[0].Expressions[0].Value.([]any) {
		out = append(out, v.(string))
	}
	sort.Strings(out)
	return out
}

// The Rego has its own list of the tools (rules/tools.rego): it must be
// this one.
func TestRegoKnowsTheTools(t *testing.T) {
	if diff := cmp.Diff(toolNames(""), regoSet(t, "data.pydocker.rules.tools.known")); diff != "" {
		t.Errorf("rules/tools.rego known differs from the tool layer's tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(toolNames(scopeExecute), regoSet(t, "data.pydocker.rules.tools.code_tools")); diff != "" {
		t.Errorf("rules/tools.rego code_tools differs from the tools that run code (-want +got):\n%s", diff)
	}
}

// auth.ScopeFor names the tools too: each must get the scope its toolDef
// says, not the fail-closed "every scope".
func TestScopesFollowTheTools(t *testing.T) {
	sc := config.Scopes{Execute: "x", Install: "i", Sessions: "s"}
	want := map[string]string{scopeExecute: sc.Execute, scopeInstall: sc.Install, scopeSessions: sc.Sessions}
	for _, d := range toolDefs {
		got := auth.ScopeFor(sc, "tools/call", d.name)
		if !slices.Equal(got, []string{want[d.scope]}) {
			t.Errorf("ScopeFor(%s) = %v, want [%s] (the %s scope)", d.name, got, want[d.scope], d.scope)
		}
	}
}

// The README's tool table and the policy input's tool field (in
// policy/README.md) name every tool; where a row lists arguments, they are
// the tool's (optional ones with ?).
func TestReadmeListsTheTools(t *testing.T) {
	b, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	b, err = os.ReadFile("../../../../policy/README.md")
	if err != nil {
		t.Fatal(err)
	}
	policyDoc := string(b)
	_, table, _ := strings.Cut(readme, "### Tools\n\n")
	table, _, _ = strings.Cut(table, "\n\n")
	rows := map[string]string{} // tool -> its row's arguments cell
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `") {
			continue
		}
		for _, name := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(cells[0], -1) {
			rows[name[1]] = cells[1]
		}
	}
	_, inputTable, _ := strings.Cut(policyDoc, "| `tool` | ")
	inputTable, _, _ = strings.Cut(inputTable, "\n")
	for _, tl := range Tools(config.Default()) {
		if !strings.Contains(inputTable, "`"+tl.Name+"`") {
			t.Errorf("policy/README.md: the input document's tool field does not name %s", tl.Name)
		}
		cell, ok := rows[tl.Name]
		if !ok {
			t.Errorf("README: the Tools table has no row for %s", tl.Name)
			continue
		}
		if strings.Contains(cell, "…") {
			continue
		}
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tl.RawInputSchema, &sch); err != nil {
			t.Fatal(err)
		}
		var want []string
		for p := range sch.Properties {
			if slices.Contains(sch.Required, p) {
				want = append(want, p)
			} else {
				want = append(want, p+"?")
			}
		}
		var got []string
		for _, m := range regexp.MustCompile("`([a-z_]+\\??)`").FindAllStringSubmatch(cell, -1) {
			got = append(got, m[1])
		}
		sort.Strings(want)
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("README: the arguments of %s (-schema +README):\n%s", tl.Name, diff)
		}
	}
}
