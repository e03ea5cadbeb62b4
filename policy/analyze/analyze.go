package analyze

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-python/gpython/ast"
	"github.com/go-python/gpython/parser"
	"github.com/go-python/gpython/py"
)

// Source analyses Python 3.13 source: it runs the pre-checks, lowers the
// code to Python 3.4, parses it with gpython and walks the tree (with an
// explicit stack, so deep trees cannot exhaust the Go stack). Every
// rejection is an *Error with CPython's line and column. Lists in Facts
// are never nil and are sorted by position. Source is safe for concurrent
// use.
func Source(src []byte, opts Options) (f Facts, err error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxExpressionTokens <= 0 {
		opts.MaxExpressionTokens = DefaultMaxExpressionTokens
	}
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*Error); ok {
				f, err = Facts{}, e
				return
			}
			f, err = Facts{}, &Error{Line: 1, Col: 0, Kind: "syntax", Msg: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	src, err = precheck(src, opts.MaxBytes)
	if err != nil {
		return Facts{}, err
	}
	toks, err := tokenize(src, opts.MaxDepth, opts.MaxExpressionTokens)
	if err != nil {
		return Facts{}, err
	}
	lw, err := lower(toks)
	if err != nil {
		return Facts{}, err
	}
	mod, err := parser.Parse(bytes.NewReader(lw.out), "<string>", py.ExecMode)
	if err != nil {
		return Facts{}, lw.syntaxError(err)
	}
	w := &walker{lw: lw, alias: map[string][]string{}, assigned: map[string][]string{}, starts: map[ast.Expr][2]int{},
		stack: make([]item, 0, 256), names: make([]item, 0, len(lw.ents)/3)}
	w.walk(mod)
	return w.facts(), nil
}

// syntaxError turns a gpython SyntaxError into an *Error at the original
// position.
func (lw *lowered) syntaxError(err error) *Error {
	line, col := 1, 0
	msg := "invalid syntax"
	if e, ok := err.(*py.Exception); ok {
		if v, ok := e.Dict["lineno"].(py.Int); ok {
			line = int(v)
		}
		if v, ok := e.Dict["offset"].(py.Int); ok {
			col = int(v)
		}
		if len(e.Args.(py.Tuple)) > 0 {
			if s, ok := e.Args.(py.Tuple)[0].(py.String); ok && s != "" {
				msg = string(s)
			}
		}
	}
	// gpython reports the end of the offending token: map to the token
	// that starts before it
	// (a NEWLINE is reported where it starts)
	if col > 0 && !lw.atNewline(line, col) {
		col--
	}
	ol, oc := lw.origPos(line, col)
	if msg == "unexpected EOF while parsing" {
		msg = "invalid syntax (unexpected end of input)"
	}
	return &Error{Line: ol, Col: oc, Kind: "syntax", Msg: msg}
}

func (lw *lowered) atNewline(line, col int) bool {
	ents := lw.line(line)
	if len(ents) == 0 {
		return false
	}
	return int(ents[len(ents)-1].outCol) == col
}

type item struct {
	node   ast.Ast
	cond   bool
	callee bool // the Func of a Call
	chain  bool // the Value of an Attribute
}

type walker struct {
	lw    *lowered
	alias map[string][]string
	// assigned are the names assignments bind to what alias resolves
	// (`o = os` gives o -> os); see bindAssigns.
	assigned map[string][]string
	assigns  []assign
	stack    []item

	starts map[ast.Expr][2]int

	imports []Import
	calls   []*ast.Call
	names   []item // Name and Attribute nodes, resolved after the walk
}

func (w *walker) push(n ast.Ast, cond bool) {
	if n == nil {
		return
	}
	w.stack = append(w.stack, item{node: n, cond: cond})
}

func (w *walker) exprs(es []ast.Expr, cond bool) {
	for _, e := range es {
		if e != nil {
			w.push(e, cond)
		}
	}
}

func (w *walker) stmts(ss []ast.Stmt, cond bool) {
	for i := len(ss) - 1; i >= 0; i-- {
		w.push(ss[i], cond)
	}
}

func (w *walker) args(a *ast.Arguments, cond bool) {
	if a == nil {
		return
	}
	// a default binds its parameter: def f(o=os) makes o os
	for i, d := range a.Defaults {
		if j := len(a.Args) - len(a.Defaults) + i; j >= 0 && j < len(a.Args) && a.Args[j] != nil && d != nil {
			w.noteBind(w.ident(a.Args[j].Arg), d)
		}
	}
	for i, d := range a.KwDefaults {
		if i < len(a.Kwonlyargs) && a.Kwonlyargs[i] != nil && d != nil {
			w.noteBind(w.ident(a.Kwonlyargs[i].Arg), d)
		}
	}
	for _, x := range a.Args {
		if x != nil && x.Annotation != nil {
			w.push(x.Annotation, cond)
		}
	}
	for _, x := range a.Kwonlyargs {
		if x != nil && x.Annotation != nil {
			w.push(x.Annotation, cond)
		}
	}
	if a.Vararg != nil && a.Vararg.Annotation != nil {
		w.push(a.Vararg.Annotation, cond)
	}
	if a.Kwarg != nil && a.Kwarg.Annotation != nil {
		w.push(a.Kwarg.Annotation, cond)
	}
	w.exprs(a.Defaults, cond)
	w.exprs(a.KwDefaults, cond)
}

func (w *walker) comps(gs []ast.Comprehension, cond bool) {
	for _, g := range gs {
		w.push(g.Target, cond)
		w.push(g.Iter, cond)
		w.exprs(g.Ifs, cond)
	}
}

func (w *walker) slice(s ast.Slicer, cond bool) {
	// slices nest only through brackets, so this recursion is bounded by
	// the lexer's depth cap
	switch s := s.(type) {
	case *ast.Slice:
		w.push(s.Lower, cond)
		w.push(s.Upper, cond)
		w.push(s.Step, cond)
	case *ast.ExtSlice:
		for _, d := range s.Dims {
			w.slice(d, cond)
		}
	case *ast.Index:
		w.push(s.Value, cond)
	}
}

// start is where CPython puts a call, attribute or subscript: at the
// start of its innermost value (gpython leaves these positions unset).
// Results are memoised so long chains stay linear.
func (w *walker) start(e ast.Expr) (int, int) {
	var path []ast.Expr
	var p [2]int
	for {
		if v, ok := w.starts[e]; ok {
			p = v
			break
		}
		next := ast.Expr(nil)
		switch x := e.(type) {
		case *ast.Call:
			next = x.Func
		case *ast.Attribute:
			next = x.Value
		case *ast.Subscript:
			next = x.Value
		case *ast.BoolOp:
			next = walrusValue(x)
		}
		if next == nil {
			if e == nil {
				p = [2]int{1, 0}
				break
			}
			l, c := w.lw.origPos(e.GetLineno(), e.GetColOffset())
			p = [2]int{l, c}
			break
		}
		path = append(path, e)
		e = next
	}
	for _, n := range path {
		w.starts[n] = p
	}
	return p[0], p[1]
}

func (w *walker) pos(p ast.Pos) (int, int) {
	return w.lw.origPos(p.Lineno, p.ColOffset)
}

func (w *walker) ident(s ast.Identifier) string {
	v := string(s)
	if strings.HasPrefix(v, placeholderPrefix) {
		if i, err := strconv.Atoi(v[len(placeholderPrefix):]); err == nil && i < len(w.lw.names) {
			return w.lw.names[i]
		}
	}
	return v
}

func (w *walker) dotted(s ast.Identifier) string {
	v := string(s)
	if !strings.Contains(v, placeholderPrefix) {
		return v
	}
	parts := strings.Split(v, ".")
	for i, p := range parts {
		parts[i] = w.ident(ast.Identifier(p))
	}
	return strings.Join(parts, ".")
}

func (w *walker) walk(mod ast.Mod) {
	m, ok := mod.(*ast.Module)
	if !ok {
		return
	}
	w.stmts(m.Body, false)
	for len(w.stack) > 0 {
		it := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		c := it.cond
		switch n := it.node.(type) {
		case *ast.FunctionDef:
			w.exprs(n.DecoratorList, c)
			w.args(n.Args, c)
			w.push(n.Returns, c)
			w.stmts(n.Body, true)
		case *ast.ClassDef:
			w.exprs(n.DecoratorList, c)
			w.exprs(n.Bases, c)
			for _, k := range n.Keywords {
				w.push(k.Value, c)
			}
			w.push(n.Starargs, c)
			w.push(n.Kwargs, c)
			w.stmts(n.Body, true)
		case *ast.Return:
			w.push(n.Value, c)
		case *ast.Delete:
			w.exprs(n.Targets, c)
		case *ast.Assign:
			w.exprs(n.Targets, c)
			w.push(n.Value, c)
			for _, t := range n.Targets {
				w.noteAssign(t, n.Value)
			}
		case *ast.AugAssign:
			w.push(n.Target, c)
			w.push(n.Value, c)
		case *ast.For:
			w.push(n.Target, c)
			w.push(n.Iter, c)
			// for o in (os, sys): o stands for each
			switch it := n.Iter.(type) {
			case *ast.Tuple:
				for _, e := range it.Elts {
					w.noteAssign(n.Target, e)
				}
			case *ast.List:
				for _, e := range it.Elts {
					w.noteAssign(n.Target, e)
				}
			}
			w.stmts(n.Body, true)
			w.stmts(n.Orelse, true)
		case *ast.While:
			w.push(n.Test, c)
			w.stmts(n.Body, true)
			w.stmts(n.Orelse, true)
		case *ast.If:
			w.push(n.Test, c)
			w.stmts(n.Body, true)
			w.stmts(n.Orelse, true)
		case *ast.With:
			for _, x := range n.Items {
				w.push(x.ContextExpr, c)
				w.push(x.OptionalVars, c)
			}
			w.stmts(n.Body, true)
		case *ast.Raise:
			w.push(n.Exc, c)
			w.push(n.Cause, c)
		case *ast.Try:
			w.stmts(n.Body, true)
			for _, h := range n.Handlers {
				w.push(h.ExprType, c)
				w.stmts(h.Body, true)
			}
			w.stmts(n.Orelse, true)
			w.stmts(n.Finalbody, true)
		case *ast.Assert:
			w.push(n.Test, c)
			w.push(n.Msg, c)
		case *ast.Import:
			line, col := w.pos(n.Pos)
			for _, a := range n.Names {
				name := w.dotted(a.Name)
				imp := Import{Module: name, Line: line, Col: col, Conditional: c}
				if a.AsName != "" {
					imp.Alias = w.ident(a.AsName)
					w.bind(imp.Alias, name)
				} else {
					root, _, _ := strings.Cut(name, ".")
					w.bind(root, root)
				}
				w.imports = append(w.imports, imp)
			}
		case *ast.ImportFrom:
			line, col := w.pos(n.Pos)
			mod := w.dotted(n.Module)
			imp := Import{Module: mod, Level: n.Level, From: true, Line: line, Col: col, Conditional: c}
			base := strings.Repeat(".", n.Level) + mod
			for _, a := range n.Names {
				al := Alias{Name: w.ident(a.Name)}
				if a.AsName != "" {
					al.AsName = w.ident(a.AsName)
				}
				imp.Names = append(imp.Names, al)
				if al.Name == "*" {
					continue
				}
				bound := al.Name
				if al.AsName != "" {
					bound = al.AsName
				}
				full := al.Name
				if mod != "" {
					full = base + "." + al.Name
				} else {
					full = base + al.Name
				}
				w.bind(bound, full)
			}
			w.imports = append(w.imports, imp)
		case *ast.ExprStmt:
			w.push(n.Value, c)
		case *ast.BoolOp:
			if v := walrusValue(n); v != nil {
				// `y := v`: the target is bound, not used
				w.noteAssign(n.Values[0].(*ast.Call).Args[0], v)
				w.exprs(n.Values[1:], c)
				continue
			}
			w.exprs(n.Values, c)
		case *ast.BinOp:
			w.push(n.Left, c)
			w.push(n.Right, c)
		case *ast.UnaryOp:
			w.push(n.Operand, c)
		case *ast.Lambda:
			w.args(n.Args, c)
			w.push(n.Body, c)
		case *ast.IfExp:
			w.push(n.Test, c)
			w.push(n.Body, c)
			w.push(n.Orelse, c)
		case *ast.Dict:
			w.exprs(n.Keys, c)
			w.exprs(n.Values, c)
		case *ast.Set:
			w.exprs(n.Elts, c)
		case *ast.ListComp:
			w.push(n.Elt, c)
			w.comps(n.Generators, c)
		case *ast.SetComp:
			w.push(n.Elt, c)
			w.comps(n.Generators, c)
		case *ast.GeneratorExp:
			w.push(n.Elt, c)
			w.comps(n.Generators, c)
		case *ast.DictComp:
			w.push(n.Key, c)
			w.push(n.Value, c)
			w.comps(n.Generators, c)
		case *ast.Yield:
			w.push(n.Value, c)
		case *ast.YieldFrom:
			w.push(n.Value, c)
		case *ast.Compare:
			w.push(n.Left, c)
			w.exprs(n.Comparators, c)
		case *ast.Call:
			if nm, ok := n.Func.(*ast.Name); ok && string(nm.Id) == bindName && len(n.Args) == 2 {
				w.noteAssign(n.Args[0], n.Args[1]) // a match keyword capture
			}
			w.calls = append(w.calls, n)
			if n.Func != nil {
				w.stack = append(w.stack, item{node: n.Func, cond: c, callee: true})
			}
			w.exprs(n.Args, c)
			for _, k := range n.Keywords {
				w.push(k.Value, c)
			}
			w.push(n.Starargs, c)
			w.push(n.Kwargs, c)
		case *ast.Attribute:
			w.names = append(w.names, it)
			if n.Value != nil {
				w.stack = append(w.stack, item{node: n.Value, cond: c, chain: true})
			}
		case *ast.Subscript:
			w.push(n.Value, c)
			w.slice(n.Slice, c)
		case *ast.Starred:
			w.push(n.Value, c)
		case *ast.Name:
			w.names = append(w.names, it)
		case *ast.List:
			w.exprs(n.Elts, c)
		case *ast.Tuple:
			w.exprs(n.Elts, c)
		}
	}
}

func (w *walker) bind(name, target string) {
	for _, t := range w.alias[name] {
		if t == target {
			return
		}
	}
	w.alias[name] = append(w.alias[name], target)
}

// resolve gives the dotted names an expression may stand for: a name or an
// attribute chain rooted at a name, its root replaced by every module or
// module member an import binds to it. It returns nil for anything else.
func (w *walker) resolve(e ast.Expr) []string {
	var rest []string
	for len(rest) <= maxDotted {
		switch x := e.(type) {
		case *ast.Attribute:
			rest = append(rest, w.ident(x.Attr))
			e = x.Value
			continue
		case *ast.BoolOp:
			if v := walrusValue(x); v != nil {
				e = v
				continue
			}
			return nil
		case *ast.Name:
			root := w.ident(x.Id)
			var tail strings.Builder
			for i := len(rest) - 1; i >= 0; i-- {
				tail.WriteByte('.')
				tail.WriteString(rest[i])
			}
			targets, assigned := w.alias[root], w.assigned[root]
			if len(targets) == 0 && len(assigned) == 0 {
				return []string{root + tail.String()}
			}
			out := make([]string, 0, len(targets)+len(assigned)+1)
			if len(targets) == 0 {
				// bound by assignment only: the assignment may not
				// have run, so the name stands for itself too
				out = append(out, root+tail.String())
			}
			for _, t := range targets {
				out = append(out, t+tail.String())
			}
			for _, t := range assigned {
				out = append(out, t+tail.String())
			}
			return out
		}
		return nil
	}
	return nil
}

// assign is one `target = value` whose value may stand for a module or
// a module member.
type assign struct {
	target string
	value  ast.Expr
}

// noteAssign records the name bindings of one assignment target: a name,
// or names of a tuple or list unpacked from a tuple or list of the same
// length.
func (w *walker) noteAssign(target, value ast.Expr) {
	switch t := target.(type) {
	case *ast.Name:
		w.noteBind(w.ident(t.Id), value)
	case *ast.Tuple:
		w.noteUnpack(t.Elts, value)
	case *ast.List:
		w.noteUnpack(t.Elts, value)
	}
}

// noteBind records that name may stand for value.
func (w *walker) noteBind(name string, value ast.Expr) {
	if w.bindRoot(value) != "" {
		w.assigns = append(w.assigns, assign{target: name, value: value})
	}
}

func (w *walker) noteUnpack(targets []ast.Expr, value ast.Expr) {
	var values []ast.Expr
	switch v := value.(type) {
	case *ast.Tuple:
		values = v.Elts
	case *ast.List:
		values = v.Elts
	}
	if len(values) != len(targets) {
		return
	}
	for i := range targets {
		w.noteAssign(targets[i], values[i])
	}
}

// bindableBuiltins are names that an assignment binds even though no
// import binds them: `e = eval` makes e() an eval() call.
var bindableBuiltins = map[string]bool{
	"__import__": true, "exec": true, "eval": true, "compile": true,
	"getattr": true, "setattr": true, "delattr": true, "open": true,
	"vars": true, "globals": true, "locals": true, "breakpoint": true,
}

// bindRoot is the name an assigned value is rooted at: the root of a name
// or attribute chain, of getattr(X, "name"), of vars(X)["name"] and
// X.__dict__["name"]; "" for any other value.
func (w *walker) bindRoot(e ast.Expr) string {
	for i := 0; i <= maxDotted; i++ {
		switch x := e.(type) {
		case *ast.Name, *ast.Attribute:
			return w.root(e)
		case *ast.Call:
			if len(x.Args) != 2 {
				return ""
			}
			e = x.Args[0]
			continue
		case *ast.BoolOp:
			if e = walrusValue(x); e == nil {
				return ""
			}
			continue
		case *ast.Subscript:
			if c, ok := x.Value.(*ast.Call); ok && len(c.Args) == 1 {
				e = c.Args[0]
				continue
			}
			if a, ok := x.Value.(*ast.Attribute); ok && w.ident(a.Attr) == "__dict__" {
				e = a.Value
				continue
			}
			return ""
		}
		return ""
	}
	return ""
}

// valueNames gives the dotted names an assigned value stands for, when
// it is rooted at a name bound by an import or an assignment (or at one
// of bindableBuiltins): `os`, `os.system`, `getattr(os, "system")`,
// `vars(os)["system"]`, `os.__dict__["system"]`.
func (w *walker) valueNames(e ast.Expr, depth int) []string {
	if depth > maxDotted {
		return nil
	}
	switch x := e.(type) {
	case *ast.BoolOp:
		if v := walrusValue(x); v != nil {
			return w.valueNames(v, depth+1)
		}
	case *ast.Name, *ast.Attribute:
		root := w.root(e)
		if root == "" || (len(w.alias[root]) == 0 && len(w.assigned[root]) == 0 && !bindableBuiltins[root]) {
			return nil
		}
		var out []string
		for _, n := range w.resolve(e) {
			// an assignment-only name standing for itself says nothing
			r, _, _ := strings.Cut(n, ".")
			if len(w.alias[r]) == 0 && len(w.assigned[r]) > 0 {
				continue
			}
			out = append(out, n)
		}
		return out
	case *ast.Call:
		if len(x.Args) != 2 {
			return nil
		}
		attr, ok := w.constStr(x.Args[1])
		if !ok || isDunder(attr) {
			return nil
		}
		for _, f := range w.resolve(x.Func) {
			if dynKind(f) == "getattr" {
				return w.member(x.Args[0], attr, depth)
			}
		}
	case *ast.Subscript:
		idx, ok := x.Slice.(*ast.Index)
		if !ok {
			return nil
		}
		key, ok := w.constStr(idx.Value)
		if !ok || isDunder(key) {
			return nil
		}
		if c, ok := x.Value.(*ast.Call); ok && len(c.Args) == 1 {
			for _, f := range w.resolve(c.Func) {
				if f == "vars" || f == "builtins.vars" {
					return w.member(c.Args[0], key, depth)
				}
			}
		}
		if a, ok := x.Value.(*ast.Attribute); ok && w.ident(a.Attr) == "__dict__" {
			return w.member(a.Value, key, depth)
		}
	}
	return nil
}

func (w *walker) member(obj ast.Expr, name string, depth int) []string {
	var out []string
	for _, o := range w.valueNames(obj, depth+1) {
		out = append(out, o+"."+name)
	}
	return out
}

// maxAssigned caps the names one assigned name stands for.
const maxAssigned = 16

// bindAssigns resolves assignment aliases to a fixed point, so that
// `o = os; o.system()` is os.system and so are `s = os.system; s()`,
// chains (`a = os; b = a`), and `f = getattr(os, "system")`. Like import
// aliases it ignores control flow: a name assigned several times stands
// for each value. Work is bounded: each name stands for at most
// maxAssigned names, and each assignment is revisited only when the name
// its value is rooted at gains one.
func (w *walker) bindAssigns() {
	if len(w.assigns) == 0 {
		return
	}
	byRoot := map[string][]int{}
	queue := make([]int, len(w.assigns))
	for i, a := range w.assigns {
		queue[i] = i
		r := w.bindRoot(a.value)
		byRoot[r] = append(byRoot[r], i)
	}
	for budget := 4*maxAssigned*len(w.assigns) + 64; len(queue) > 0 && budget > 0; budget-- {
		a := w.assigns[queue[0]]
		queue = queue[1:]
		changed := false
		for _, n := range w.valueNames(a.value, 0) {
			have := w.assigned[a.target]
			if n == a.target || len(have) >= maxAssigned || slices.Contains(have, n) {
				continue
			}
			w.assigned[a.target] = append(have, n)
			changed = true
		}
		if changed {
			queue = append(queue, byRoot[a.target]...)
		}
	}
}

// walrusValue is v of a lowered `y := v` (`pdmU_walrus(y) or v`), nil
// for any other expression.
func walrusValue(b *ast.BoolOp) ast.Expr {
	if b.Op != ast.Or || len(b.Values) < 2 {
		return nil
	}
	c, ok := b.Values[0].(*ast.Call)
	if !ok || len(c.Args) != 1 {
		return nil
	}
	if nm, ok := c.Func.(*ast.Name); !ok || string(nm.Id) != walrusName {
		return nil
	}
	if _, ok := c.Args[0].(*ast.Name); !ok {
		return nil
	}
	return b.Values[1]
}

// root returns the name at the root of an attribute chain, or "".
func (w *walker) root(e ast.Expr) string {
	for i := 0; i <= maxDotted; i++ {
		switch x := e.(type) {
		case *ast.Attribute:
			e = x.Value
			continue
		case *ast.BoolOp:
			if v := walrusValue(x); v != nil {
				e = v
				continue
			}
			return ""
		case *ast.Name:
			return w.ident(x.Id)
		}
		return ""
	}
	return ""
}

// maxDotted bounds the attribute chains resolve follows: no module path is
// that long, and it keeps long chains linear.
const maxDotted = 32

func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// dynamicCallables are the callables reported as Dynamic when called or
// merely referenced (passing them around hides the call).
var dynamicCallables = map[string]bool{
	"__import__": true, "exec": true, "eval": true, "compile": true,
	"getattr": true, "setattr": true, "delattr": true,
	"importlib.import_module": true, "importlib.__import__": true,
	"pickle.loads": true, "pickle.load": true, "pickle.Unpickler": true,
	"_pickle.loads": true, "_pickle.load": true, "_pickle.Unpickler": true,
	"marshal.loads": true, "marshal.load": true,
}

// frameAttrs lead from frames, tracebacks, generators and coroutines to
// other code's frames, and from there to its globals and builtins.
var frameAttrs = map[string]bool{
	"tb_frame": true, "tb_next": true, "f_back": true, "f_globals": true, "f_locals": true,
	"f_builtins": true, "f_code": true, "f_trace": true, "gi_frame": true, "gi_code": true,
	"gi_yieldfrom": true, "cr_frame": true, "cr_code": true, "cr_await": true, "ag_frame": true,
	"ag_code": true, "ag_await": true,
}

// kindOf are callables reported as Dynamic of the given kind, called or
// referenced: "frame" (they hand out frames), "namespace" (they hand out
// a module's whole namespace), "gc" (they reach every object),
// "attrgetter" (they read attributes named by strings at run time).
var kindOf = map[string]string{
	"sys._getframe": "frame", "sys._current_frames": "frame", "sys.settrace": "frame",
	"sys.setprofile":       "frame",
	"inspect.currentframe": "frame", "inspect.stack": "frame", "inspect.trace": "frame",
	"inspect.getouterframes": "frame", "inspect.getinnerframes": "frame",
	"traceback.walk_stack": "frame", "traceback.walk_tb": "frame",
	"threading.settrace": "frame", "threading.setprofile": "frame",
	"vars": "namespace", "builtins.vars": "namespace", "inspect.getmembers": "namespace",
	"inspect.getmembers_static": "namespace", "inspect.getattr_static": "namespace",
	"gc.get_objects": "gc", "gc.get_referrers": "gc", "gc.get_referents": "gc",
	"operator.attrgetter": "attrgetter", "operator.methodcaller": "attrgetter",
	"_operator.attrgetter": "attrgetter", "_operator.methodcaller": "attrgetter",
}

// dynKind gives the Dynamic kind of a resolved name, or "".
func dynKind(n string) string {
	if k := kindOf[n]; k != "" {
		return k
	}
	if b, ok := strings.CutPrefix(n, "builtins."); ok {
		switch b {
		case "__import__", "exec", "eval", "compile", "getattr", "setattr", "delattr":
			return b
		}
	}
	if dynamicCallables[n] {
		return n
	}
	return ""
}

// constStr returns the value of e when it is a constant str literal.
func (w *walker) constStr(e ast.Expr) (string, bool) {
	s, ok := e.(*ast.Str)
	if !ok {
		return "", false
	}
	i, err := strconv.Atoi(string(s.S))
	if err != nil || i < 0 || i >= len(w.lw.strs) {
		return "", false
	}
	g := w.lw.strs[i]
	if g.fstr {
		return "", false
	}
	var b strings.Builder
	for _, p := range g.parts {
		v, ok := decodeString(p)
		if !ok {
			return "", false
		}
		b.WriteString(v)
	}
	return b.String(), true
}

func (w *walker) facts() Facts {
	w.bindAssigns()
	f := Facts{Imports: w.imports, Dynamic: []Dynamic{}, Calls: []Call{}, References: []Call{}}
	if f.Imports == nil {
		f.Imports = []Import{}
	}
	for _, c := range w.calls {
		// The lowering's own calls (raw names: the code's names with
		// the prefix are renamed).
		if nm, ok := c.Func.(*ast.Name); ok {
			switch string(nm.Id) {
			case decoName:
				// A decorator is called with the function: `@os.system`
				// calls os.system. (Its references and dynamic
				// features are reported where it appears.)
				if len(c.Args) == 1 {
					dl, dc := w.start(c.Args[0])
					for _, d := range w.resolve(c.Args[0]) {
						f.Calls = append(f.Calls, Call{Name: d, Line: dl, Col: dc})
					}
				}
				continue
			case bindName, walrusName:
				continue
			}
		}
		names := w.resolve(c.Func)
		if len(names) == 0 {
			continue
		}
		line, col := w.start(c)
		for _, n := range names {
			f.Calls = append(f.Calls, Call{Name: n, Line: line, Col: col})
			kind := dynKind(n)
			if kind == "" || kind == "namespace" && len(c.Args) == 0 { // vars() is locals()
				continue
			}
			d := Dynamic{Kind: kind, Name: n, Line: line, Col: col}
			argi := 0
			switch kind {
			case "getattr", "setattr", "delattr":
				argi = 1
			}
			if argi < len(c.Args) {
				if s, ok := w.constStr(c.Args[argi]); ok {
					d.Arg, d.Constant = &s, true
				}
			}
			if argi == 1 {
				if d.Constant && frameAttrs[*d.Arg] {
					f.Dynamic = append(f.Dynamic, Dynamic{Kind: "frame", Name: *d.Arg, Arg: d.Arg, Constant: true, Line: line, Col: col})
				}
				if d.Constant && !isDunder(*d.Arg) {
					if kind == "getattr" && len(c.Args) > 0 {
						// getattr(os, "system") is os.system
						for _, o := range w.resolve(c.Args[0]) {
							r := o + "." + *d.Arg
							f.References = append(f.References, Call{Name: r, Line: line, Col: col})
							if k := dynKind(r); k != "" {
								f.Dynamic = append(f.Dynamic, Dynamic{Kind: k, Name: r, Line: line, Col: col})
							}
						}
					}
					continue
				}
				if d.Constant {
					d.Name = *d.Arg
				}
			}
			f.Dynamic = append(f.Dynamic, d)
		}
	}
	for _, it := range w.names {
		line, col := w.start(it.node.(ast.Expr))
		switch n := it.node.(type) {
		case *ast.Attribute:
			if a := w.ident(n.Attr); isDunder(a) {
				f.Dynamic = append(f.Dynamic, Dynamic{Kind: "dunder", Name: a, Line: line, Col: col})
			} else if frameAttrs[a] {
				f.Dynamic = append(f.Dynamic, Dynamic{Kind: "frame", Name: a, Line: line, Col: col})
			}
		case *ast.Name:
			switch id := w.ident(n.Id); id {
			case "__builtins__", "__loader__", "__spec__":
				f.Dynamic = append(f.Dynamic, Dynamic{Kind: "dunder", Name: id, Line: line, Col: col})
			}
			if n.Ctx != ast.Load {
				continue
			}
		}
		if it.callee || it.chain {
			// a reference is the whole chain used as a value
		} else if root := w.root(it.node.(ast.Expr)); root != "" && (len(w.alias[root]) > 0 || len(w.assigned[root]) > 0) {
			if a, ok := it.node.(*ast.Attribute); !ok || a.Ctx == ast.Load {
				for _, r := range w.resolve(it.node.(ast.Expr)) {
					if strings.Contains(r, ".") { // a bare module is not a reference of interest
						f.References = append(f.References, Call{Name: r, Line: line, Col: col})
					}
				}
			}
		}
		if n, ok := it.node.(*ast.Name); ok && len(w.alias[w.ident(n.Id)]) == 0 {
			// an unbound-by-import name: only the builtins matter
			if k := dynKind(w.ident(n.Id)); k != "" && !it.callee {
				f.Dynamic = append(f.Dynamic, Dynamic{Kind: k, Name: w.ident(n.Id), Line: line, Col: col})
			}
			continue
		}
		for _, r := range w.resolve(it.node.(ast.Expr)) {
			if r == "sys.modules" {
				f.Dynamic = append(f.Dynamic, Dynamic{Kind: "sys.modules", Name: r, Line: line, Col: col})
				continue
			}
			if !it.callee {
				if k := dynKind(r); k != "" {
					f.Dynamic = append(f.Dynamic, Dynamic{Kind: k, Name: r, Line: line, Col: col})
				}
			}
		}
	}
	sort.SliceStable(f.Imports, func(i, j int) bool {
		return less(f.Imports[i].Line, f.Imports[i].Col, f.Imports[j].Line, f.Imports[j].Col)
	})
	sort.SliceStable(f.Dynamic, func(i, j int) bool {
		return less(f.Dynamic[i].Line, f.Dynamic[i].Col, f.Dynamic[j].Line, f.Dynamic[j].Col)
	})
	for _, l := range [][]Call{f.Calls, f.References} {
		sort.SliceStable(l, func(i, j int) bool {
			return less(l[i].Line, l[i].Col, l[j].Line, l[j].Col)
		})
	}
	return f
}

func less(l1, c1, l2, c2 int) bool {
	return l1 < l2 || l1 == l2 && c1 < c2
}
