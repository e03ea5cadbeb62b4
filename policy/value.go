package policy

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// value builds the Rego input document directly, without a JSON round
// trip: the same document encoding/json gives for in (TestInputValue
// checks that), at a fraction of the cost for code with many imports.
func (in Input) value() ast.Value {
	items := make([][2]*ast.Term, 0, 6)
	items = append(items, item("tool", ast.StringTerm(in.Tool)))
	if c := in.Code; c != nil {
		fields := [][2]*ast.Term{
			item("facts", factsTerm(c.Facts)),
			item("bytes", ast.IntNumberTerm(c.Bytes)),
			item("lines", ast.IntNumberTerm(c.Lines)),
		}
		if x := c.Expression; x != nil {
			fields = append(fields, item("expression", ast.ObjectTerm(
				item("tokens", ast.IntNumberTerm(x.Tokens)),
				item("line", ast.IntNumberTerm(x.Line)),
				item("col", ast.IntNumberTerm(x.Col)),
			)))
		}
		items = append(items, item("code", ast.ObjectTerm(fields...)))
	}
	if in.Language != "" {
		items = append(items, item("language", ast.StringTerm(in.Language)))
	}
	if p := in.Package; p != nil {
		fields := [][2]*ast.Term{
			item("name", ast.StringTerm(p.Name)),
			item("specifier", ast.StringTerm(p.Specifier)),
			item("index", ast.StringTerm(p.Index)),
		}
		if len(p.Resolved) > 0 {
			deps := make([]*ast.Term, len(p.Resolved))
			for i, r := range p.Resolved {
				var by *ast.Term
				if r.RequiredBy == nil {
					by = ast.NullTerm()
				} else {
					by = stringsTerm(r.RequiredBy)
				}
				deps[i] = ast.ObjectTerm(
					item("name", ast.StringTerm(r.Name)),
					item("version", ast.StringTerm(r.Version)),
					item("required_by", by),
				)
			}
			fields = append(fields, item("resolved", ast.ArrayTerm(deps...)))
		}
		items = append(items, item("package", ast.ObjectTerm(fields...)))
	}
	if s := in.Session; s != nil {
		items = append(items, item("session", ast.ObjectTerm(
			item("id", ast.StringTerm(s.ID)),
			item("owner", ast.StringTerm(s.Owner)),
			item("exists", boolTerm(s.Exists)),
			item("owner_count", ast.IntNumberTerm(s.OwnerCount)),
			item("packages", ast.IntNumberTerm(s.Packages)),
		)))
	}
	if t := in.Task; t != nil {
		items = append(items, item("task", ast.ObjectTerm(item("owner_count", ast.IntNumberTerm(t.OwnerCount)))))
	}
	items = append(items, item("limits_requested", limitsTerm(in.LimitsRequested)))
	var scopes *ast.Term
	if in.Principal.Scopes == nil {
		scopes = ast.NullTerm()
	} else {
		scopes = stringsTerm(in.Principal.Scopes)
	}
	items = append(items, item("principal", ast.ObjectTerm(
		item("sub", ast.StringTerm(in.Principal.Sub)),
		item("scopes", scopes),
	)))
	return ast.NewObject(items...)
}

// keyTerms are the object keys of the input, built once and shared by
// every input (OPA never changes an input's terms). Read-only after init,
// so safe for concurrent use.
var keyTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"tool", "code", "language", "facts", "bytes", "lines", "package", "name", "specifier", "index", "resolved", "version", "required_by",
		"session", "id", "owner", "exists", "owner_count", "packages", "limits_requested", "task",
		"principal", "sub", "scopes", "timeout_seconds", "memory_bytes", "cpus", "pids",
		"imports", "dynamic", "calls", "references", "module", "level", "from", "names",
		"asname", "alias", "line", "col", "conditional", "kind", "arg", "constant",
	} {
		m[k] = ast.StringTerm(k)
	}
	return m
}()

func item(k string, v *ast.Term) [2]*ast.Term {
	t, ok := keyTerms[k]
	if !ok {
		t = ast.StringTerm(k)
	}
	return ast.Item(t, v)
}

// boolTerm returns OPA's shared term for b (no allocation).
func boolTerm(b bool) *ast.Term { return ast.InternedTerm(b) }

func stringsTerm(ss []string) *ast.Term {
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(ts...)
}

func limitsTerm(l Limits) *ast.Term {
	items := make([][2]*ast.Term, 0, 4)
	if l.Timeout != 0 {
		items = append(items, item("timeout_seconds", ast.FloatNumberTerm(l.Timeout)))
	}
	if l.Memory != 0 {
		items = append(items, item("memory_bytes", ast.NumberTerm(json.Number(fmt.Sprint(l.Memory)))))
	}
	if l.CPUs != 0 {
		items = append(items, item("cpus", ast.FloatNumberTerm(l.CPUs)))
	}
	if l.Pids != 0 {
		items = append(items, item("pids", ast.NumberTerm(json.Number(fmt.Sprint(l.Pids)))))
	}
	return ast.ObjectTerm(items...)
}

// factsTerm mirrors the JSON encoding of analyze.Facts (nil lists as null,
// omitempty fields left out).
func factsTerm(f analyze.Facts) *ast.Term {
	var imports, dynamic *ast.Term
	if f.Imports == nil {
		imports = ast.NullTerm()
	} else {
		ts := make([]*ast.Term, len(f.Imports))
		for i, imp := range f.Imports {
			items := make([][2]*ast.Term, 0, 8)
			items = append(items,
				item("module", ast.StringTerm(imp.Module)),
				item("level", ast.IntNumberTerm(imp.Level)),
				item("from", boolTerm(imp.From)),
			)
			if len(imp.Names) > 0 {
				ns := make([]*ast.Term, len(imp.Names))
				for j, n := range imp.Names {
					if n.AsName != "" {
						ns[j] = ast.ObjectTerm(item("name", ast.StringTerm(n.Name)), item("asname", ast.StringTerm(n.AsName)))
					} else {
						ns[j] = ast.ObjectTerm(item("name", ast.StringTerm(n.Name)))
					}
				}
				items = append(items, item("names", ast.ArrayTerm(ns...)))
			}
			if imp.Alias != "" {
				items = append(items, item("alias", ast.StringTerm(imp.Alias)))
			}
			items = append(items,
				item("line", ast.IntNumberTerm(imp.Line)),
				item("col", ast.IntNumberTerm(imp.Col)),
				item("conditional", boolTerm(imp.Conditional)),
			)
			ts[i] = ast.ObjectTerm(items...)
		}
		imports = ast.ArrayTerm(ts...)
	}
	if f.Dynamic == nil {
		dynamic = ast.NullTerm()
	} else {
		ts := make([]*ast.Term, len(f.Dynamic))
		for i, d := range f.Dynamic {
			items := make([][2]*ast.Term, 0, 6)
			items = append(items, item("kind", ast.StringTerm(d.Kind)))
			if d.Name != "" {
				items = append(items, item("name", ast.StringTerm(d.Name)))
			}
			if d.Arg != nil {
				items = append(items, item("arg", ast.StringTerm(*d.Arg)))
			}
			items = append(items,
				item("constant", boolTerm(d.Constant)),
				item("line", ast.IntNumberTerm(d.Line)),
				item("col", ast.IntNumberTerm(d.Col)),
			)
			ts[i] = ast.ObjectTerm(items...)
		}
		dynamic = ast.ArrayTerm(ts...)
	}
	return ast.ObjectTerm(item("imports", imports), item("dynamic", dynamic),
		item("calls", callsTerm(f.Calls)), item("references", callsTerm(f.References)))
}

func callsTerm(calls []analyze.Call) *ast.Term {
	if calls == nil {
		return ast.NullTerm()
	}
	ts := make([]*ast.Term, len(calls))
	for i, c := range calls {
		ts[i] = ast.ObjectTerm(
			item("name", ast.StringTerm(c.Name)),
			item("line", ast.IntNumberTerm(c.Line)),
			item("col", ast.IntNumberTerm(c.Col)),
		)
	}
	return ast.ArrayTerm(ts...)
}

// decodeDecision reads data.pydocker.decision as evaluated (JSON-like Go
// values): allow, violations and warnings. A malformed entry from an operator rule still denies: it
// becomes a violation of rule "policy.malformed".
func decodeDecision(v any) (Decision, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Decision{}, fmt.Errorf("data.pydocker.decision is %T, want an object", v)
	}
	var d Decision
	allow, _ := obj["allow"].(bool)
	d.Violations = violations(obj["violations"])
	d.Warnings = violations(obj["warnings"])
	d.Allow = allow && len(d.Violations) == 0
	// A decision without readable capabilities grants none: the sandbox
	// must not get more than the policy said.
	d.Capabilities, _ = decodeCapabilities(obj["capabilities"])
	return d, nil
}

// decodeCapabilities reads a capabilities object; ok is false (and every
// class denied) when v is not one. Sockets is never nil.
func decodeCapabilities(v any) (c Capabilities, ok bool) {
	c.Sockets = []string{}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return c, false
	}
	p, pok := obj["processes"].(bool)
	t, tok := obj["pty"].(bool)
	n, nok := obj["native_code"].(bool)
	list, lok := obj["sockets"].([]any)
	if !pok || !tok || !nok || !lok {
		return c, false
	}
	for _, f := range list {
		s, sok := f.(string)
		if !sok {
			return Capabilities{Sockets: []string{}}, false
		}
		c.Sockets = append(c.Sockets, s)
	}
	c.Processes, c.PTY, c.NativeCode = p, t, n
	return c, true
}

func violations(v any) []Violation {
	list, _ := v.([]any)
	out := make([]Violation, 0, len(list))
	for _, e := range list {
		o, ok := e.(map[string]any)
		rule, rok := o["rule"].(string)
		msg, mok := o["msg"].(string)
		if !ok || !rok || !mok {
			out = append(out, Violation{Rule: "policy.malformed", Msg: fmt.Sprintf("a rule produced %v, want {\"rule\": string, \"msg\": string, \"line\": number, \"col\": number}", e)})
			continue
		}
		out = append(out, Violation{Rule: rule, Msg: msg, Line: int(number(o["line"])), Col: int(number(o["col"]))})
	}
	sortViolations(out)
	return out
}

// sortViolations sorts by line, column, rule and message.
func sortViolations(out []Violation) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Msg < b.Msg
	})
}

func number(v any) float64 {
	switch n := v.(type) {
	case json.Number:
		f, _ := n.Float64()
		return f
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return 0
}
