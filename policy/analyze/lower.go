package analyze

import (
	"strconv"
	"strings"
)

// The lowering rewrites a Python 3.13 token stream into Python 3.4 source
// that gpython's parser accepts. Every sub-expression that can hold a
// call, an attribute access or an import survives; constructs with no
// 3.4 form become equivalent-for-analysis 3.4 expressions:
//
//	f"a{x!r:{w}}"          ('N', (x, (w)))        fields become expressions
//	"a" "b"                'N'                    one placeholder per literal group
//	x: T = v               x = (v); (T)           (a.b: T = v: a.b, (T), (v))
//	(y := f())             (pdmU_walrus(y) or f())  (a lambda value: (lambda…))
//	await x, async def     x, def
//	match s: / case P if G:  if (s): / if (P) and (G):
//	Cls(a, k=p) as n       Cls and (a, p)         (class patterns are not calls)
//	  under match S (a dotted name), a keyword capture k=p becomes
//	  k=pdmU_bind(p, (S).k): p is S.k

//	f(*a, k=v, **d)        f(a, v, d)             arguments become positional
//	[*a], {**d}            [a], {0: d}
//	a @ b, a @= b          a * b, a *= b
//	@expr                  @pdmU_deco(expr)
//	def f[T: B](a, /) -> R:  def f(a) -> ((R), (B)):
//	class C[T: B](X):      class C(X, (B)):
//	type X[T: B] = V       X = (V), (B)
//	except* E              except E
//	with (a as b, c,):     with a as b, c:
//
// Each logical line becomes one output line; a table maps every output
// token back to its original line and column.

// The lowering's own names are emitted as written (fSynth); names of the
// code with the prefix become pdmU_<N> like non-ASCII ones, so they can
// never be spelt by the code.
const (
	placeholderPrefix = "pdmU_"
	decoName          = placeholderPrefix + "deco"
	bindName          = placeholderPrefix + "bind"
	walrusName        = placeholderPrefix + "walrus"
)

// synName is a name the lowering makes up.
func synName(v string, at token) token {
	t := syn(kName, v, at)
	t.flag |= fSynth
	return t
}

type mapEnt struct {
	outCol    int32
	line, col int32
}

// strGroup is one group of adjacent string literals.
type strGroup struct {
	parts []string // raw source of the literal parts
	fstr  bool     // holds an f-string: not a constant
}

type lowered struct {
	out   []byte
	ents  []mapEnt // output tokens, line after line
	lines []int32  // lines[i] is the index in ents of output line i+1's first token
	strs  []strGroup
	names []string // identifiers emitted as pdmU_<i>
}

type outTok struct {
	text      string
	line, col int32
}

var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true,
}

func isOp(t token, v string) bool   { return t.k == kOp && t.val == v }
func isName(t token, v string) bool { return t.k == kName && t.val == v && t.flag&fNonASCII == 0 }

func syn(k kind, v string, at token) token {
	return token{k: k, val: v, line: at.line, col: at.col}
}

type lowerer struct {
	lw    *lowered
	names map[string]int
	line  []outTok // output tokens of the current line
	// subject is the dotted-name subject of the match statement just
	// lowered; caseSubject that of the match whose case is being lowered.
	subject, caseSubject []token
}

func lower(toks []token) (*lowered, error) {
	lr := &lowerer{lw: &lowered{out: make([]byte, 0, len(toks)*4), ents: make([]mapEnt, 0, len(toks)+len(toks)/4)}, names: map[string]int{}}
	level := 0
	matchBody := []bool{false}
	pendingMatch := false
	// subjects[i] is the subject of the match whose body is at level i
	// when it is a dotted name (nil otherwise).
	subjects := [][]token{nil}
	for i := 0; i < len(toks) && toks[i].k != kEOF; {
		switch toks[i].k {
		case kIndent:
			level++
			matchBody = append(matchBody, pendingMatch)
			subjects = append(subjects, lr.subject)
			pendingMatch = false
			lr.subject = nil
			i++
			continue
		case kDedent:
			level--
			if len(matchBody) > 1 {
				matchBody = matchBody[:len(matchBody)-1]
				subjects = subjects[:len(subjects)-1]
			}
			i++
			continue
		case kNewline:
			i++
			continue
		}
		j := i
		for j < len(toks) && toks[j].k != kNewline && toks[j].k != kEOF {
			j++
		}
		lr.caseSubject = subjects[len(subjects)-1]
		ts, isMatch := lr.structural(toks[i:j], matchBody[len(matchBody)-1])
		pendingMatch = isMatch
		if err := lr.emitLine(level, ts, toks[j]); err != nil {
			return nil, err
		}
		i = j + 1
	}
	return lr.lw, nil
}

// scan calls fn for each token of ts at bracket depth 0 and outside
// f-strings; fn returns false to stop.
func scan(ts []token, from int, fn func(i int) bool) {
	depth, fdepth := 0, 0
	for i := from; i < len(ts); i++ {
		t := ts[i]
		switch t.k {
		case kFStart:
			fdepth++
			continue
		case kFEnd:
			fdepth--
			continue
		case kOp:
			switch t.val {
			case "(", "[", "{":
				depth++
				continue
			case ")", "]", "}":
				depth--
				continue
			}
		}
		if depth == 0 && fdepth == 0 && !fn(i) {
			return
		}
	}
}

// headerColon returns the index of the first top-level ':' that does not
// end a lambda's parameters, or -1.
func headerColon(ts []token, from int) int {
	at, lambdas := -1, 0
	scan(ts, from, func(i int) bool {
		switch {
		case isName(ts[i], "lambda"):
			lambdas++
		case isOp(ts[i], ":"):
			if lambdas > 0 {
				lambdas--
				return true
			}
			at = i
			return false
		}
		return true
	})
	return at
}

// matchClose returns the index of the bracket closing ts[i], or -1.
func matchClose(ts []token, i int) int {
	depth := 0
	for j := i; j < len(ts); j++ {
		if ts[j].k != kOp {
			continue
		}
		switch ts[j].val {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

func cat(parts ...[]token) []token {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]token, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// paren wraps ts in synthetic parentheses placed at its first token.
func paren(ts []token, at token) []token {
	if len(ts) > 0 {
		at = ts[0]
	}
	return cat([]token{syn(kOp, "(", at)}, ts, []token{syn(kOp, ")", at)})
}

// structural rewrites statement forms; it reports whether ts was a match
// statement (so the next block holds case clauses).
func (lr *lowerer) structural(ts []token, caseLevel bool) ([]token, bool) {
	if len(ts) > 1 && isName(ts[0], "async") && (isName(ts[1], "def") || isName(ts[1], "for") || isName(ts[1], "with")) {
		ts = ts[1:]
	}
	first := ts[0]
	switch {
	case isOp(first, "@"):
		last := ts[len(ts)-1]
		open := syn(kOp, "(", first)
		open.flag = fCallParen
		return cat([]token{first, synName(decoName, first), open}, ts[1:], []token{syn(kOp, ")", last)}), false
	case caseLevel && isName(first, "case") && len(ts) > 2:
		if out := lr.caseClause(ts); out != nil {
			return out, false
		}
	case isName(first, "match") && len(ts) > 2:
		if c := headerColon(ts, 1); c == len(ts)-1 && c > 1 && !isOp(ts[1], "=") && !isOp(ts[1], ".") {
			lr.subject = dottedName(ts[1:c])
			return cat([]token{syn(kName, "if", first)}, paren(ts[1:c], ts[1]), ts[c:]), true
		}
	case isName(first, "type") && len(ts) > 3 && ts[1].k == kName && (isOp(ts[2], "=") || isOp(ts[2], "[")):
		if out := typeAlias(ts); out != nil {
			return out, false
		}
	case isName(first, "def"):
		return lr.compound(defStmt(ts)), false
	case isName(first, "class"):
		return lr.compound(classStmt(ts)), false
	case isName(first, "with"):
		return lr.compound(withStmt(ts)), false
	case first.k == kName && first.flag&fNonASCII == 0:
		switch first.val {
		case "if", "elif", "while", "for", "try", "except", "else", "finally":
			return lr.compound(ts), false
		}
	}
	return simpleStmts(ts), false
}

// compound lowers the simple statements after a header's colon.
func (lr *lowerer) compound(ts []token) []token {
	c := headerColon(ts, 1)
	if c < 0 || c == len(ts)-1 {
		return ts
	}
	return cat(ts[:c+1], simpleStmts(ts[c+1:]))
}

// simpleStmts lowers annotated assignments in a ';'-separated list.
func simpleStmts(ts []token) []token {
	var cuts []int
	scan(ts, 0, func(i int) bool {
		if isOp(ts[i], ";") {
			cuts = append(cuts, i)
		}
		if isOp(ts[i], ":=") {
			// an unparenthesised walrus is not a statement: keep it so
			// the parse fails as CPython's does
			ts[i].flag |= fKeep
		}
		return true
	})
	if len(cuts) == 0 {
		return annAssign(ts)
	}
	var out []token
	start := 0
	for _, c := range cuts {
		out = append(out, annAssign(ts[start:c])...)
		out = append(out, ts[c])
		start = c + 1
	}
	return append(out, annAssign(ts[start:])...)
}

func annAssign(ts []token) []token {
	c := headerColon(ts, 0)
	if c <= 0 {
		return ts
	}
	eq := -1
	scan(ts, c+1, func(i int) bool {
		if isOp(ts[i], "=") {
			eq = i
			return false
		}
		return true
	})
	comma := syn(kOp, ",", ts[c])
	if eq < 0 {
		return cat(ts[:c], []token{comma}, paren(ts[c+1:], ts[c]))
	}
	if c == 1 && ts[0].k == kName {
		// `x: T = v` binds x: `x = (v); (T)`, so that the walker sees
		// the assignment (o: object = os makes o os)
		return cat(ts[:1], []token{ts[eq]}, paren(ts[eq+1:], ts[eq]), []token{syn(kOp, ";", ts[c])}, paren(ts[c+1:eq], ts[c]))
	}
	return cat(ts[:c], []token{comma}, paren(ts[c+1:eq], ts[c]), []token{syn(kOp, ",", ts[eq])}, paren(ts[eq+1:], ts[eq]))
}

func (lr *lowerer) caseClause(ts []token) []token {
	g := -1
	scan(ts, 1, func(i int) bool {
		if isName(ts[i], "if") {
			g = i
			return false
		}
		if isOp(ts[i], ":") {
			return false
		}
		return true
	})
	from := 1
	if g > 0 {
		from = g + 1
	}
	c := headerColon(ts, from)
	if c < 0 {
		return nil
	}
	end := c
	if g > 0 {
		end = g
	}
	out := cat([]token{syn(kName, "if", ts[0])}, paren(pattern(ts[1:end], lr.caseSubject), ts[1]))
	if g > 0 {
		out = cat(out, []token{syn(kName, "and", ts[g])}, paren(ts[g+1:c], ts[g]))
	}
	out = append(out, ts[c])
	if c+1 < len(ts) {
		out = append(out, simpleStmts(ts[c+1:])...)
	}
	return out
}

// pattern lowers a match pattern to an expression: class patterns
// become `Cls and (args)`, `as name` captures go. With a subject S that is
// a dotted name, a keyword capture `k=p` of a class pattern at the top of
// the pattern becomes `k=pdmU_bind(p, (S).k)`: the pattern reads attribute
// k of the subject into p (`match os: case object(system=f)` makes f
// os.system), which the walker binds like `p = S.k`.
func pattern(ts []token, subject []token) []token {
	out := make([]token, 0, len(ts)+4)
	depth, classDepth := 0, -1
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if isName(t, "as") && i+1 < len(ts) && ts[i+1].k == kName {
			i++
			continue
		}
		if subject != nil && depth == 1 && classDepth == 0 && t.k == kName && !keywords[t.val] &&
			i+3 < len(ts) && isOp(ts[i+1], "=") && ts[i+2].k == kName && !keywords[ts[i+2].val] &&
			(isOp(ts[i+3], ",") || isOp(ts[i+3], ")")) && (i == 0 || isOp(ts[i-1], "(") || isOp(ts[i-1], ",")) {
			// keep `k=` (a keyword among keywords), replace the capture
			open := syn(kOp, "(", t)
			open.flag |= fCallParen
			out = append(out, t, ts[i+1], synName(bindName, t), open, ts[i+2], syn(kOp, ",", t), syn(kOp, "(", t))
			for _, s := range subject {
				out = append(out, syn(s.k, s.val, t))
			}
			out = append(out, syn(kOp, ")", t), syn(kOp, ".", t), syn(kName, t.val, t), syn(kOp, ")", t))
			i += 2
			continue
		}
		if isOp(t, "(") && i > 0 && ts[i-1].k == kName && !keywords[ts[i-1].val] {
			out = append(out, syn(kName, "and", t))
			t.flag |= fCallParen
			if depth == 0 {
				classDepth = 0
			}
		}
		switch {
		case isOp(t, "(") || isOp(t, "[") || isOp(t, "{"):
			depth++
		case isOp(t, ")") || isOp(t, "]") || isOp(t, "}"):
			depth--
			if depth == 0 {
				classDepth = -1
			}
		}
		out = append(out, t)
	}
	return out
}

// dottedName returns ts when it is a dotted name of plain ASCII names
// (`os`, `a.b`), nil otherwise.
func dottedName(ts []token) []token {
	for i, t := range ts {
		if i%2 == 0 && (t.k != kName || keywords[t.val] || t.flag&fNonASCII != 0 || strings.HasPrefix(t.val, placeholderPrefix)) ||
			i%2 == 1 && !isOp(t, ".") {
			return nil
		}
	}
	if len(ts)%2 == 0 {
		return nil
	}
	return ts
}

// typeParams returns the bound and default expressions of a PEP 695 type
// parameter list (the tokens inside the brackets).
func typeParams(ts []token) [][]token {
	var exprs [][]token
	var cuts []int
	scan(ts, 0, func(i int) bool {
		if isOp(ts[i], ",") {
			cuts = append(cuts, i)
		}
		return true
	})
	cuts = append(cuts, len(ts))
	start := 0
	for _, c := range cuts {
		p := ts[start:c]
		start = c + 1
		sep := -1
		scan(p, 0, func(i int) bool {
			if isOp(p[i], ":") || isOp(p[i], "=") {
				if sep >= 0 && len(p[sep+1:i]) > 0 {
					exprs = append(exprs, p[sep+1:i])
				}
				sep = i
			}
			return true
		})
		if sep >= 0 && sep+1 < len(p) {
			exprs = append(exprs, p[sep+1:])
		}
	}
	return exprs
}

func joinExprs(exprs [][]token, at token) []token {
	var out []token
	for i, e := range exprs {
		if i > 0 {
			out = append(out, syn(kOp, ",", e[0]))
		}
		out = append(out, paren(e, at)...)
	}
	return out
}

func typeAlias(ts []token) []token {
	k := 2
	var extra [][]token
	if isOp(ts[2], "[") {
		m := matchClose(ts, 2)
		if m < 0 {
			return nil
		}
		if m == 3 {
			return nil // empty type parameter list: left for the parser to reject
		}
		extra = typeParams(ts[3:m])
		k = m + 1
	}
	if k+1 >= len(ts) || !isOp(ts[k], "=") {
		return nil
	}
	out := cat(ts[1:2], ts[k:k+1], paren(ts[k+1:], ts[k]))
	for _, e := range extra {
		out = append(out, syn(kOp, ",", e[0]))
		out = append(out, paren(e, e[0])...)
	}
	return out
}

func defStmt(ts []token) []token {
	if len(ts) < 4 {
		return ts
	}
	var extra [][]token
	if isOp(ts[2], "[") {
		m := matchClose(ts, 2)
		if m < 0 || m == 3 {
			return ts
		}
		extra = typeParams(ts[3:m])
		ts = cat(ts[:2], ts[m+1:])
	}
	if len(extra) == 0 || len(ts) < 3 || !isOp(ts[2], "(") {
		return ts
	}
	pm := matchClose(ts, 2)
	if pm < 0 {
		return ts
	}
	c := headerColon(ts, pm+1)
	if c < 0 {
		return ts
	}
	at := ts[pm]
	if pm+1 < c && isOp(ts[pm+1], "->") {
		inner := cat(paren(ts[pm+2:c], ts[pm+1]), []token{syn(kOp, ",", at)}, joinExprs(extra, at))
		return cat(ts[:pm+2], paren(inner, at), ts[c:])
	}
	return cat(ts[:pm+1], []token{syn(kOp, "->", at)}, paren(joinExprs(extra, at), at), ts[c:])
}

func classStmt(ts []token) []token {
	if len(ts) < 4 || !isOp(ts[2], "[") {
		return ts
	}
	m := matchClose(ts, 2)
	if m < 0 || m == 3 {
		return ts
	}
	extra := typeParams(ts[3:m])
	rest := ts[m+1:]
	ts = ts[:2]
	if len(extra) == 0 {
		return cat(ts, rest)
	}
	if len(rest) > 0 && isOp(rest[0], "(") {
		pm := matchClose(rest, 0)
		if pm < 0 {
			return cat(ts, rest)
		}
		mid := joinExprs(extra, rest[pm])
		if pm > 1 && !isOp(rest[pm-1], ",") {
			mid = cat([]token{syn(kOp, ",", rest[pm])}, mid)
		}
		return cat(ts, rest[:pm], mid, rest[pm:])
	}
	at := ts[1]
	return cat(ts, paren(joinExprs(extra, at), at), rest)
}

func withStmt(ts []token) []token {
	if len(ts) < 4 || !isOp(ts[1], "(") {
		return ts
	}
	m := matchClose(ts, 1)
	if m < 0 || m+1 >= len(ts) || !isOp(ts[m+1], ":") {
		return ts
	}
	inner := ts[2:m]
	hasAs := false
	scan(inner, 0, func(i int) bool {
		if isName(inner[i], "as") {
			hasAs = true
			return false
		}
		return true
	})
	if !hasAs {
		return ts
	}
	if len(inner) > 0 && isOp(inner[len(inner)-1], ",") {
		inner = inner[:len(inner)-1]
	}
	return cat(ts[:1], inner, ts[m+1:])
}

// frame is one open bracket of the expression rewrite.
type frame struct {
	kind    byte // 't' top, 'p' paren, 'l' list, 's' subscript, 'b' brace, 'c' call, 'd' def params, 'f' string group, 'F' field
	lambdas int  // lambdas whose parameters are open at this level
	end     int  // for 'f': index of the first token after the group
	kw      bool // a call has seen a keyword argument
	dstar   bool // a call has seen **
}

// argOrder checks the order of a call's arguments as arguments become
// positional: t starts an argument.
func (f *frame) argOrder(t, next token) error {
	switch {
	case isOp(t, ")"):
	case isOp(t, "**"):
		f.dstar = true
	case isOp(t, "*"):
		if f.dstar {
			return errAt(int(t.line), int(t.col), "syntax", "iterable argument unpacking follows keyword argument unpacking")
		}
	case t.k == kName && isOp(next, "="):
		f.kw = true
	case f.dstar:
		return errAt(int(t.line), int(t.col), "syntax", "positional argument follows keyword argument unpacking")
	case f.kw:
		return errAt(int(t.line), int(t.col), "syntax", "positional argument follows keyword argument")
	}
	return nil
}

func (lr *lowerer) put(text string, t token) {
	lr.line = append(lr.line, outTok{text, t.line, t.col})
}

func (lr *lowerer) lastIs(v string) bool {
	return len(lr.line) > 0 && lr.line[len(lr.line)-1].text == v
}

func (lr *lowerer) name(t token) string {
	if t.flag&fNonASCII == 0 && !strings.HasPrefix(t.val, placeholderPrefix) {
		return t.val
	}
	i, ok := lr.names[t.val]
	if !ok {
		i = len(lr.lw.names)
		lr.lw.names = append(lr.lw.names, t.val)
		lr.names[t.val] = i
	}
	return placeholderPrefix + strconv.Itoa(i)
}

// fend returns the index of the kFEnd matching the kFStart at i.
func fend(ts []token, i int) int {
	n := 0
	for j := i; j < len(ts); j++ {
		switch ts[j].k {
		case kFStart:
			n++
		case kFEnd:
			n--
			if n == 0 {
				return j
			}
		}
	}
	return len(ts) - 1
}

// emitLine rewrites one logical line's expressions and writes it out.
func (lr *lowerer) emitLine(level int, ts []token, nl token) error {
	lr.line = lr.line[:0]
	stack := []frame{{kind: 't'}}
	prevOperand := false
	defPending := false
	next := func(i int) token {
		if i+1 < len(ts) {
			return ts[i+1]
		}
		return token{k: kEOF}
	}
	for i := 0; i < len(ts); i++ {
		for stack[len(stack)-1].kind == 'f' && i == stack[len(stack)-1].end {
			lr.put(")", ts[i-1])
			stack = stack[:len(stack)-1]
			prevOperand = true
		}
		t := ts[i]
		top := &stack[len(stack)-1]
		if top.kind == 'c' && top.lambdas == 0 && i > 0 && (isOp(ts[i-1], "(") || isOp(ts[i-1], ",")) {
			if err := top.argOrder(t, next(i)); err != nil {
				return err
			}
		}
		switch t.k {
		case kName:
			v := t.val
			kw := keywords[v] && t.flag&fNonASCII == 0
			if kw && v == "async" {
				if n := next(i); isName(n, "def") || isName(n, "for") || isName(n, "with") {
					continue
				}
			}
			if kw && v == "await" {
				continue
			}
			if n := next(i); isOp(n, ":=") && n.flag&fKeep == 0 && !kw {
				// `y := v` becomes `pdmU_walrus(y) or v`, which the
				// walker reads as v bound to y (a lambda value, which
				// cannot follow `or`, just loses the target)
				if i+2 < len(ts) && !isName(ts[i+2], "lambda") {
					lr.put(walrusName, t)
					lr.put("(", t)
					lr.put(lr.name(t), t)
					lr.put(")", t)
					lr.put("or", n)
				}
				i++
				continue
			}
			if !kw && top.kind == 'c' && top.lambdas == 0 && isOp(next(i), "=") && (lr.lastIs("(") || lr.lastIs(",")) {
				i++
				continue
			}
			if kw {
				lr.put(v, t)
				prevOperand = v == "True" || v == "False" || v == "None"
				switch v {
				case "lambda":
					top.lambdas++
				case "def":
					defPending = true
				}
				continue
			}
			if t.flag&fSynth != 0 {
				lr.put(t.val, t)
			} else {
				lr.put(lr.name(t), t)
			}
			prevOperand = true
		case kNumber:
			lr.put("0", t)
			prevOperand = true
		case kString, kFStart, kFEnd:
			if top.kind == 'f' {
				continue // a part of the current group
			}
			if t.k == kFEnd {
				continue
			}
			g := i
			fields := false
			for g < len(ts) {
				if ts[g].k == kString {
					g++
					continue
				}
				if ts[g].k != kFStart {
					break
				}
				e := fend(ts, g)
				n := 0
				for j := g; j <= e; j++ {
					switch ts[j].k {
					case kFStart:
						n++
					case kFEnd:
						n--
					case kFField:
						if n == 1 {
							fields = true
						}
					}
				}
				g = e + 1
			}
			idx, err := lr.group(ts[i:g])
			if err != nil {
				return err
			}
			ph := "'" + strconv.Itoa(idx) + "'"
			prevOperand = true
			if !fields {
				lr.put(ph, t)
				i = g - 1
				continue
			}
			lr.put("(", t)
			lr.put(ph, t)
			stack = append(stack, frame{kind: 'f', end: g})
		case kFField:
			lr.put(",", t)
			lr.put("(", t)
			stack = append(stack, frame{kind: 'F'})
			prevOperand = false
		case kFFieldEnd:
			lr.put(")", t)
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			prevOperand = true
		case kOp:
			switch v := t.val; v {
			case "(":
				k := byte('p')
				prev := token{}
				if i > 0 {
					prev = ts[i-1]
				}
				if t.flag&fCallParen != 0 || prevOperand && !(prev.k == kName && keywords[prev.val] && prev.flag&fNonASCII == 0) {
					k = 'c'
				}
				if defPending {
					k = 'd'
					defPending = false
				}
				lr.put(v, t)
				stack = append(stack, frame{kind: k})
				prevOperand = false
			case "[", "{":
				k := byte('l')
				if v == "{" {
					k = 'b'
				} else if prevOperand {
					k = 's'
				}
				lr.put(v, t)
				stack = append(stack, frame{kind: k})
				prevOperand = false
			case ")", "]", "}":
				if top.kind == 'd' && lr.lastIs(",") {
					lr.line = lr.line[:len(lr.line)-1]
				}
				lr.put(v, t)
				if len(stack) > 1 {
					stack = stack[:len(stack)-1]
				}
				prevOperand = true
			case "*", "**":
				if prevOperand {
					lr.put(v, t)
					prevOperand = false
					continue
				}
				params := top.kind == 'd' || top.lambdas > 0
				switch {
				case i > 0 && isName(ts[i-1], "except") && isOp(next(i), ":"):
					lr.put(v, t) // `except*:` is invalid: keep it so the parse fails
				case i > 0 && isName(ts[i-1], "import"):
					lr.put(v, t)
					prevOperand = true
				case params && (lr.lastIs("(") || lr.lastIs(",") || lr.lastIs("lambda")):
					lr.put(v, t)
				case top.kind == 'b' && v == "**" && (lr.lastIs("{") || lr.lastIs(",")):
					lr.put("0", t)
					lr.put(":", t)
				}
				prevOperand = false
			case "/":
				if !prevOperand && (top.kind == 'd' || top.lambdas > 0) && lr.lastIs(",") {
					if isOp(next(i), ",") {
						i++
					} else {
						lr.line = lr.line[:len(lr.line)-1]
					}
					continue
				}
				lr.put(v, t)
				prevOperand = false
			case "@":
				if prevOperand {
					lr.put("*", t)
				} else {
					lr.put(v, t)
				}
				prevOperand = false
			case "@=":
				lr.put("*=", t)
				prevOperand = false
			case ":":
				if top.lambdas > 0 {
					top.lambdas--
					if lr.lastIs(",") {
						lr.line = lr.line[:len(lr.line)-1]
					}
				}
				lr.put(v, t)
				prevOperand = false
			case "...":
				lr.put(v, t)
				prevOperand = true
			default:
				lr.put(v, t)
				prevOperand = false
			}
		}
	}
	for len(stack) > 1 && stack[len(stack)-1].kind == 'f' {
		lr.put(")", ts[len(ts)-1])
		stack = stack[:len(stack)-1]
	}
	lr.flush(level, nl)
	return nil
}

// group registers a group of adjacent string literals.
func (lr *lowerer) group(ts []token) (int, error) {
	g := strGroup{}
	bytesSeen, strSeen := false, false
	for _, t := range ts {
		switch t.k {
		case kString:
			g.parts = append(g.parts, t.val)
			p := strings.ToLower(t.val[:strings.IndexAny(t.val, `'"`)])
			if strings.IndexByte(p, 'b') >= 0 {
				bytesSeen = true
			} else {
				strSeen = true
			}
		case kFStart:
			g.fstr = true
			strSeen = true
		}
	}
	if bytesSeen && strSeen {
		return 0, errAt(int(ts[0].line), int(ts[0].col), "syntax", "cannot mix bytes and nonbytes literals")
	}
	if bytesSeen {
		g.fstr = true // bytes are not constant strings
	}
	lr.lw.strs = append(lr.lw.strs, g)
	return len(lr.lw.strs) - 1, nil
}

func (lr *lowerer) flush(level int, nl token) {
	lw := lr.lw
	lw.lines = append(lw.lines, int32(len(lw.ents)))
	ents := lw.ents
	lineStart := len(lw.out)
	for i := 0; i < level; i++ {
		lw.out = append(lw.out, ' ')
	}
	for i, t := range lr.line {
		if i > 0 {
			lw.out = append(lw.out, ' ')
		}
		ents = append(ents, mapEnt{outCol: int32(len(lw.out) - lineStart), line: t.line, col: t.col})
		lw.out = append(lw.out, t.text...)
	}
	// the newline maps to the end of the logical line, where CPython
	// reports "expected ':'" and the like
	// (a space first, so a token's end and the newline never coincide)
	lw.out = append(lw.out, ' ')
	ents = append(ents, mapEnt{outCol: int32(len(lw.out) - lineStart), line: nl.line, col: nl.col})
	lw.out = append(lw.out, '\n')
	lw.ents = ents
}

// line returns the map entries of output line n (1-based).
func (lw *lowered) line(n int) []mapEnt {
	if n < 1 || n > len(lw.lines) {
		return nil
	}
	end := int32(len(lw.ents))
	if n < len(lw.lines) {
		end = lw.lines[n]
	}
	return lw.ents[lw.lines[n-1]:end]
}

// origPos maps a position in the lowered source back to the original.
func (lw *lowered) origPos(line, col int) (int, int) {
	if len(lw.lines) == 0 {
		return 1, 0
	}
	if line < 1 {
		line = 1
	}
	if line > len(lw.lines) {
		line = len(lw.lines)
	}
	ents := lw.line(line)
	for len(ents) == 0 && line > 1 {
		line--
		ents = lw.line(line)
	}
	if len(ents) == 0 {
		return 1, 0
	}
	best := ents[0]
	lo, hi := 0, len(ents)-1
	for lo <= hi {
		m := (lo + hi) / 2
		if int(ents[m].outCol) <= col {
			best = ents[m]
			lo = m + 1
		} else {
			hi = m - 1
		}
	}
	return int(best.line), int(best.col)
}
