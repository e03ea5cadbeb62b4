package analyze

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// kind is a token kind of the Python 3.13 tokenizer.
type kind uint8

const (
	kEOF kind = iota
	kName
	kNumber
	kString // a complete non-f string literal; val is its source text
	kOp
	kNewline
	kIndent
	kDedent
	kFStart    // start of an f-string; val is the prefix and quote
	kFField    // '{' of a replacement field (format-spec fields included)
	kFFieldEnd // '}' closing a replacement field
	kFEnd      // closing quote of an f-string
)

// token flags set by the structural rewrite.
const (
	fCallParen uint8 = 1 << iota // treat this '(' as an argument list
	fNonASCII                    // a name written with non-ASCII characters
	fKeep                        // keep this token as written (invalid code)
	fSynth                       // a name the lowering made up: emitted as is
)

type token struct {
	k    kind
	flag uint8
	val  string
	line int32
	col  int32
}

type lexer struct {
	src       string
	pos       int
	line      int
	lineStart int
	maxDepth  int
	toks      []token
	// brackets holds open brackets: '(', '[', '{', or 'F' for a
	// replacement field, with their positions for error messages.
	brackets []openBracket
	indents  []int
	alts     []int
	// runs holds the expression size count of each bracket level:
	// runs[0] the logical line outside brackets, runs[i] the inside of
	// brackets[i-1]. See count.
	runs    []run
	maxExpr int
	// over is the level of a run that went over maxExpr, or -1. From
	// then on tokens are counted but not kept (each new one overwrites
	// toks[mark]), so an oversized expression is measured to its end
	// without allocating for it.
	over, mark int
	// emitted counts the tokens emitted, kept or not.
	emitted int
}

// run is the count of one expression at one bracket level: its tokens
// up to a separator (a comma, a semicolon, the end of the logical line or
// of its brackets). A bracketed group counts its closing bracket in the
// enclosing run and everything else in its own, so a chain whose links
// are groups (`f()()()`, `(a)**(a)**…`) still grows its run.
type run struct {
	n         int
	line, col int
	// commas in lambda parameters and in the targets of a for do not
	// separate: `lambda a, b: lambda a, b: …` and
	// `[x for a, b in y for a, b in y …]` are single chains.
	lambdas, fors int
}

type openBracket struct {
	c         byte
	line, col int
}

func (l *lexer) col() int { return l.pos - l.lineStart }

func (l *lexer) fail(line, col int, kind, format string, args ...any) {
	if l.over >= 0 && l.over < len(l.runs) {
		// the code is refused for its size whatever follows
		l.endRun(l.over)
	}
	panic(errAt(line, col, kind, format, args...))
}

func (l *lexer) emit(k kind, val string, line, col int) {
	if l.over >= 0 {
		l.toks = l.toks[:l.mark]
	}
	l.toks = append(l.toks, token{k: k, val: val, line: int32(line), col: int32(col)})
	l.emitted++
	l.count(k, val, line, col)
}

// count adds a token to the expression of the current bracket level and
// ends that expression at a separator. It is the gate's bound on what one
// expression may cost: gpython's parser keeps a stack entry of some
// hundred bytes per pending operator of a right-recursive chain (`**`,
// unary `-`/`+`/`~`/`not`, `if`-`else`, `lambda`, comprehension clauses)
// and the tree grows with every link of any chain, so an expression is
// capped before the parser sees it.
func (l *lexer) count(k kind, val string, line, col int) {
	top := len(l.runs) - 1
	r := &l.runs[top]
	switch k {
	case kIndent, kDedent, kEOF:
		return
	case kNewline:
		l.endRun(top)
		return
	case kName:
		switch val {
		case "lambda":
			r.lambdas++
		case "for":
			r.fors++
		case "in":
			if r.fors > 0 {
				r.fors--
			}
		}
	case kOp:
		switch val {
		case ";":
			l.endRun(top)
			return
		case ",":
			if r.lambdas == 0 && r.fors == 0 {
				l.endRun(top)
				return
			}
		case ":":
			if r.lambdas > 0 {
				r.lambdas--
			}
		}
	}
	if r.n == 0 {
		r.line, r.col = line, col
	}
	r.n++
	if r.n > l.maxExpr && l.over < 0 {
		l.over, l.mark = top, len(l.toks)-1
	}
}

// endRun ends the expression counted at level i: it fails when that
// expression is over the bound, else starts a new one.
func (l *lexer) endRun(i int) {
	r := l.runs[i]
	if r.n > l.maxExpr {
		l.over = -1
		panic(&Error{Line: r.line, Col: r.col, Kind: "expression", Size: r.n,
			Msg: fmt.Sprintf("expression of %d tokens, over the limit of %d tokens; split it into smaller expressions", r.n, l.maxExpr)})
	}
	l.runs[i] = run{}
}

// pop closes the innermost bracket.
func (l *lexer) pop() {
	l.endRun(len(l.runs) - 1)
	l.runs = l.runs[:len(l.runs)-1]
	l.brackets = l.brackets[:len(l.brackets)-1]
}

func (l *lexer) newline() {
	l.line++
	l.lineStart = l.pos
}

// tokenize turns src (pre-checked UTF-8) into tokens with NEWLINE, INDENT
// and DEDENT as CPython's tokenizer makes them.
// An expression over maxExpr tokens (see count) is an *Error of kind
// "expression".
func tokenize(src []byte, maxDepth, maxExpr int) (toks []token, err error) {
	l := &lexer{src: string(src), line: 1, maxDepth: maxDepth, indents: []int{0}, alts: []int{0},
		runs: make([]run, 1, 16), maxExpr: maxExpr, over: -1}
	// room for the tokens of most code; a longer one grows. Not
	// len(src)/3 at once: a refused chain of 1 MiB would cost 13 MiB.
	l.toks = make([]token, 0, min(len(src)/3, 1<<14)+16)
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	l.run()
	return l.toks, nil
}

func (l *lexer) lastIsNewline() bool {
	if len(l.toks) == 0 {
		return true
	}
	k := l.toks[len(l.toks)-1].k
	return k == kNewline || k == kIndent || k == kDedent
}

func (l *lexer) run() {
	atLineStart := true
	for {
		if atLineStart && len(l.brackets) == 0 {
			if !l.indentation() {
				break
			}
		}
		atLineStart = false
		if !l.skipSpace() {
			break
		}
		if l.pos >= len(l.src) {
			break
		}
		c := l.src[l.pos]
		if c == '\n' {
			if len(l.brackets) == 0 && !l.lastIsNewline() {
				l.emit(kNewline, "", l.line, l.col())
			}
			l.pos++
			l.newline()
			atLineStart = true
			continue
		}
		l.token()
	}
	if len(l.brackets) > 0 {
		b := l.brackets[len(l.brackets)-1]
		if b.c == 'F' {
			l.fail(b.line, b.col, "syntax", "f-string: expecting '}'")
		}
		l.fail(b.line, b.col, "syntax", "'%c' was never closed", b.c)
	}
	if !l.lastIsNewline() {
		l.emit(kNewline, "", l.line, l.col())
	}
	for len(l.indents) > 1 {
		l.indents = l.indents[:len(l.indents)-1]
		l.emit(kDedent, "", l.line, 0)
	}
	l.emit(kEOF, "", l.line, l.col())
}

// skipSpace skips blanks, comments and line continuations. It returns
// false at end of input.
func (l *lexer) skipSpace() bool {
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; c {
		case ' ', '\t', '\f':
			l.pos++
		case '\r':
			l.pos++ // precheck guarantees \r\n
		case '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' && l.src[l.pos] != '\r' {
				l.pos++
			}
		case '\\':
			p := l.pos + 1
			if p < len(l.src) && l.src[p] == '\r' {
				p++
			}
			if p < len(l.src) && l.src[p] == '\n' {
				l.pos = p + 1
				l.newline()
				if l.pos >= len(l.src) {
					l.fail(l.line, 0, "syntax", "unexpected EOF while parsing")
				}
				continue
			}
			if p >= len(l.src) {
				l.fail(l.line, l.col(), "syntax", "unexpected EOF while parsing")
			}
			l.fail(l.line, l.col()+1, "syntax", "unexpected character after line continuation character")
		default:
			return true
		}
	}
	return true
}

// indentation handles the start of a logical line. It returns false at
// end of input.
func (l *lexer) indentation() bool {
	for {
		col, alt := 0, 0
		for l.pos < len(l.src) {
			c := l.src[l.pos]
			if c == ' ' {
				col++
				alt++
			} else if c == '\t' {
				col = (col/8 + 1) * 8
				alt++
			} else if c == '\f' {
				col, alt = 0, 0
			} else {
				break
			}
			l.pos++
		}
		if l.pos >= len(l.src) {
			return false
		}
		c := l.src[l.pos]
		if c == '#' || c == '\n' || c == '\r' {
			// blank line: no indentation change
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
			if l.pos >= len(l.src) {
				return false
			}
			l.pos++
			l.newline()
			continue
		}
		if c == '\\' {
			// a continuation at line start: CPython treats the line as
			// part of the indentation computation; accept as is.
			return true
		}
		top := l.indents[len(l.indents)-1]
		topAlt := l.alts[len(l.alts)-1]
		switch {
		case col == top:
			if alt != topAlt {
				l.fail(l.line, 0, "syntax", "inconsistent use of tabs and spaces in indentation")
			}
		case col > top:
			if alt <= topAlt {
				l.fail(l.line, 0, "syntax", "inconsistent use of tabs and spaces in indentation")
			}
			if len(l.indents) >= l.maxDepth {
				l.fail(l.line, 0, "depth", "too many levels of indentation (limit %d)", l.maxDepth)
			}
			l.indents = append(l.indents, col)
			l.alts = append(l.alts, alt)
			l.emit(kIndent, "", l.line, 0)
		default:
			for len(l.indents) > 1 && col < l.indents[len(l.indents)-1] {
				l.indents = l.indents[:len(l.indents)-1]
				l.alts = l.alts[:len(l.alts)-1]
				l.emit(kDedent, "", l.line, col)
			}
			if col != l.indents[len(l.indents)-1] {
				l.fail(l.line, col, "syntax", "unindent does not match any outer indentation level")
			}
			if alt != l.alts[len(l.alts)-1] {
				l.fail(l.line, 0, "syntax", "inconsistent use of tabs and spaces in indentation")
			}
		}
		return true
	}
}

const ops1 = "%&()*+,-./:;<=>@[]^{|}~"

func (l *lexer) push(c byte, line, col int) {
	if len(l.brackets) >= l.maxDepth {
		l.fail(line, col, "depth", "too many nested parentheses (limit %d)", l.maxDepth)
	}
	l.brackets = append(l.brackets, openBracket{c, line, col})
	l.runs = append(l.runs, run{})
}

// token scans one token at l.pos (not blank, not newline).
func (l *lexer) token() {
	src := l.src
	c := src[l.pos]
	line, col := l.line, l.col()
	switch {
	case c >= '0' && c <= '9' || c == '.' && l.pos+1 < len(src) && src[l.pos+1] >= '0' && src[l.pos+1] <= '9':
		l.number()
		return
	case c == '"' || c == '\'':
		l.str(l.pos, l.pos)
		return
	case c < utf8.RuneSelf && (c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || c >= utf8.RuneSelf:
		l.name()
		return
	}
	// the three- and two-character operators, by a switch: a 1 MiB
	// operator chain is refused, but only once each of its tokens was read
	if rest := src[l.pos:]; len(rest) >= 2 {
		if len(rest) >= 3 {
			switch op := rest[:3]; op {
			case "**=", "//=", ">>=", "<<=", "...":
				l.pos += 3
				l.emit(kOp, op, line, col)
				return
			}
		}
		switch op := rest[:2]; op {
		case "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=", ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=":
			l.pos += 2
			l.emit(kOp, op, line, col)
			return
		}
	}
	op := strings.IndexByte(ops1, c)
	if op < 0 {
		if c == '!' && len(l.brackets) > 0 && l.brackets[len(l.brackets)-1].c == 'F' {
			l.pos++
			l.emit(kOp, "!", line, col)
			return
		}
		l.fail(line, col, "syntax", "invalid character '%c' (U+%04X)", c, c)
	}
	l.pos++
	switch c {
	case '(', '[', '{':
		l.push(c, line, col)
	case ')', ']', '}':
		if len(l.brackets) == 0 {
			l.fail(line, col, "syntax", "unmatched '%c'", c)
		}
		o := l.brackets[len(l.brackets)-1]
		if o.c == 'F' || o.c == '(' && c != ')' || o.c == '[' && c != ']' || o.c == '{' && c != '}' {
			if o.c == 'F' {
				l.fail(line, col, "syntax", "f-string: unmatched '%c'", c)
			}
			l.fail(line, col, "syntax", "closing parenthesis '%c' does not match opening parenthesis '%c'", c, o.c)
		}
		l.pop()
	}
	l.emit(kOp, ops1[op:op+1], line, col) // not string(c): that allocates per token
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digits scans digits accepted by ok with single underscores between
// them; it returns the number of digits.
func (l *lexer) digits(ok func(byte) bool) int {
	n := 0
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if ok(c) {
			n++
			l.pos++
			continue
		}
		if c == '_' && n > 0 && l.pos+1 < len(l.src) && ok(l.src[l.pos+1]) {
			l.pos++
			continue
		}
		if c == '_' {
			l.fail(l.line, l.col(), "syntax", "invalid decimal literal")
		}
		break
	}
	return n
}

func (l *lexer) number() {
	src := l.src
	line, col := l.line, l.col()
	start := l.pos
	c := src[l.pos]
	if c == '0' && l.pos+1 < len(src) && strings.IndexByte("xXoObB", src[l.pos+1]) >= 0 {
		var ok func(byte) bool
		name := "hexadecimal"
		switch src[l.pos+1] | 0x20 {
		case 'x':
			ok = func(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
		case 'o':
			ok, name = func(c byte) bool { return c >= '0' && c <= '7' }, "octal"
		default:
			ok, name = func(c byte) bool { return c == '0' || c == '1' }, "binary"
		}
		l.pos += 2
		if l.pos < len(src) && src[l.pos] == '_' {
			l.pos++
		}
		if l.digits(ok) == 0 {
			l.fail(line, col, "syntax", "invalid %s literal", name)
		}
		if l.pos < len(src) && isDigit(src[l.pos]) {
			l.fail(l.line, l.col(), "syntax", "invalid digit '%c' in %s literal", src[l.pos], name)
		}
		l.endNumber(start, line, col)
		return
	}
	intDigits := 0
	if c != '.' {
		intDigits = l.digits(isDigit)
	}
	isFloat := false
	if l.pos < len(src) && src[l.pos] == '.' {
		isFloat = true
		l.pos++
		if l.pos < len(src) && isDigit(src[l.pos]) {
			l.digits(isDigit)
		}
	}
	if l.pos < len(src) && src[l.pos]|0x20 == 'e' {
		p := l.pos + 1
		if p < len(src) && (src[p] == '+' || src[p] == '-') {
			p++
		}
		if p < len(src) && isDigit(src[p]) {
			l.pos = p
			l.digits(isDigit)
			isFloat = true
		}
	}
	imag := false
	if l.pos < len(src) && src[l.pos]|0x20 == 'j' {
		l.pos++
		imag = true
	}
	if !isFloat && !imag && intDigits > 1 {
		s := strings.ReplaceAll((src[start:l.pos]), "_", "")
		if s[0] == '0' && strings.Trim(s, "0") != "" {
			l.fail(line, col, "syntax", "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers")
		}
	}
	l.endNumber(start, line, col)
}

// endNumber checks what follows a number, like CPython's
// verify_end_of_number: a keyword may follow directly, a name may not.
func (l *lexer) endNumber(start, line, col int) {
	if l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf || isDigit(c) {
			rest := l.src[l.pos:]
			ok := false
			for _, kw := range []string{"and", "else", "for", "if", "in", "is", "not", "or"} {
				if len(rest) >= len(kw) && (rest[:len(kw)]) == kw {
					ok = true
				}
			}
			if !ok {
				l.fail(line, col, "syntax", "invalid decimal literal")
			}
		}
	}
	l.emit(kNumber, (l.src[start:l.pos]), line, col)
}

func isIDStart(r rune) bool {
	return r == '_' || unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Lm, unicode.Lo, unicode.Nl, unicode.Other_ID_Start)
}

func isIDContinue(r rune) bool {
	return isIDStart(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue)
}

func (l *lexer) name() {
	src := l.src
	line, col := l.line, l.col()
	start := l.pos
	ascii := true
	for l.pos < len(src) {
		c := src[l.pos]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) {
			l.pos++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, n := utf8.DecodeRuneInString(src[l.pos:])
		if !isIDContinue(r) && !(l.pos == start && isIDStart(r)) {
			// NFKC may turn it into an identifier char (e.g. fullwidth
			// digits are Nd already); anything else ends the name.
			if !unicode.In(r, unicode.L, unicode.N, unicode.M, unicode.Pc) {
				break
			}
		}
		ascii = false
		l.pos += n
	}
	if l.pos == start {
		r, _ := utf8.DecodeRuneInString(src[l.pos:])
		l.fail(line, col, "syntax", "invalid character '%c' (U+%04X)", r, r)
	}
	s := (src[start:l.pos])
	if !ascii {
		s = norm.NFKC.String(s)
		for i, r := range s {
			if i == 0 && !isIDStart(r) || i > 0 && !isIDContinue(r) {
				l.fail(line, col, "syntax", "invalid character '%c' (U+%04X)", r, r)
			}
		}
	}
	// string prefix?
	if l.pos < len(src) && (src[l.pos] == '"' || src[l.pos] == '\'') && ascii && len(s) <= 2 {
		switch strings.ToLower(s) {
		case "r", "u", "b", "br", "rb", "f", "fr", "rf":
			l.str(start, l.pos)
			return
		}
	}
	l.emit(kName, s, line, col)
	if !ascii {
		l.toks[len(l.toks)-1].flag = fNonASCII
	}
}

// str scans a string literal whose prefix starts at start and whose
// quote is at q.
func (l *lexer) str(start, q int) {
	src := l.src
	line, col := l.line, start-l.lineStart
	prefix := strings.ToLower((src[start:q]))
	raw := strings.IndexByte(prefix, 'r') >= 0
	quote := src[q]
	triple := q+2 < len(src) && src[q+1] == quote && src[q+2] == quote
	qlen := 1
	if triple {
		qlen = 3
	}
	l.pos = q + qlen
	if strings.IndexByte(prefix, 'f') >= 0 {
		l.emit(kFStart, (src[start:l.pos]), line, col)
		l.fstring(quote, triple, raw, line, col)
		return
	}
	for {
		if l.pos >= len(src) {
			if triple {
				l.fail(line, col, "syntax", "unterminated triple-quoted string literal (detected at line %d)", l.line)
			}
			l.fail(line, col, "syntax", "unterminated string literal (detected at line %d)", l.line)
		}
		c := src[l.pos]
		switch {
		case c == quote && (!triple || l.pos+2 < len(src) && src[l.pos+1] == quote && src[l.pos+2] == quote):
			l.pos += qlen
			l.emit(kString, (src[start:l.pos]), line, col)
			return
		case c == '\\':
			l.pos++
			if l.pos < len(src) {
				if src[l.pos] == '\r' && l.pos+1 < len(src) {
					l.pos++
				}
				if src[l.pos] == '\n' {
					l.pos++
					l.newline()
					continue
				}
				l.pos++
			}
		case c == '\n':
			if !triple {
				l.fail(line, col, "syntax", "unterminated string literal (detected at line %d)", l.line)
			}
			l.pos++
			l.newline()
		default:
			l.pos++
		}
	}
}

// fstring scans the rest of an f-string (PEP 701) after its opening
// quote: literal text, replacement fields (whose expressions are tokens)
// and format specs.
func (l *lexer) fstring(quote byte, triple, raw bool, line, col int) {
	src := l.src
	qlen := 1
	if triple {
		qlen = 3
	}
	for {
		if l.pos >= len(src) {
			if triple {
				l.fail(line, col, "syntax", "unterminated triple-quoted f-string literal (detected at line %d)", l.line)
			}
			l.fail(line, col, "syntax", "unterminated f-string literal (detected at line %d)", l.line)
		}
		c := src[l.pos]
		switch {
		case c == quote && (!triple || l.pos+2 < len(src) && src[l.pos+1] == quote && src[l.pos+2] == quote):
			l.emit(kFEnd, "", l.line, l.col())
			l.pos += qlen
			return
		case c == '\\':
			if l.pos+1 < len(src) {
				n := src[l.pos+1]
				switch {
				case n == '{' || n == '}':
					l.pos++
				case n == 'N' && !raw && l.pos+2 < len(src) && src[l.pos+2] == '{':
					l.pos += 3
					for l.pos < len(src) && src[l.pos] != '}' && src[l.pos] != quote && src[l.pos] != '\n' {
						l.pos++
					}
					if l.pos < len(src) && src[l.pos] == '}' {
						l.pos++
					}
				case n == '\n':
					l.pos += 2
					l.newline()
				case n == '\r':
					l.pos++
				default:
					l.pos += 2
				}
			} else {
				l.pos++
			}
		case c == '\n':
			if !triple {
				l.fail(line, col, "syntax", "unterminated f-string literal (detected at line %d)", l.line)
			}
			l.pos++
			l.newline()
		case c == '{':
			if l.pos+1 < len(src) && src[l.pos+1] == '{' {
				l.pos += 2
				continue
			}
			l.field(quote, triple, raw)
		case c == '}':
			if l.pos+1 < len(src) && src[l.pos+1] == '}' {
				l.pos += 2
				continue
			}
			l.fail(l.line, l.col(), "syntax", "f-string: single '}' is not allowed")
		default:
			l.pos++
		}
	}
}

// field scans a replacement field starting at '{'.
func (l *lexer) field(quote byte, triple, raw bool) {
	src := l.src
	line, col := l.line, l.col()
	l.push('F', line, col)
	depth := len(l.brackets)
	l.pos++
	l.emit(kFField, "", line, col)
	ntoks := l.emitted
	for {
		if !l.skipSpace() || l.pos >= len(src) {
			l.fail(line, col, "syntax", "f-string: expecting '}'")
		}
		c := src[l.pos]
		if c == '\n' {
			l.pos++
			l.newline()
			continue
		}
		if len(l.brackets) == depth {
			term := c == '}' || c == ':' ||
				c == '!' && !(l.pos+1 < len(src) && src[l.pos+1] == '=') ||
				c == '=' && !(l.pos+1 < len(src) && src[l.pos+1] == '=')
			if term {
				if l.emitted == ntoks {
					l.fail(l.line, l.col(), "syntax", "f-string: valid expression required before '%c'", c)
				}
				l.fieldTail(quote, triple, raw, line, col)
				return
			}
		}
		l.token()
	}
}

// fieldTail scans '=', '!conv', ':spec' and the closing '}' of a field.
func (l *lexer) fieldTail(quote byte, triple, raw bool, line, col int) {
	src := l.src
	if src[l.pos] == '=' {
		l.pos++
		l.skipSpace()
	}
	if l.pos < len(src) && src[l.pos] == '!' {
		l.pos++
		p := l.pos
		for l.pos < len(src) && (src[l.pos] >= 'a' && src[l.pos] <= 'z' || src[l.pos] >= 'A' && src[l.pos] <= 'Z') {
			l.pos++
		}
		switch src[p:l.pos] {
		case "s", "r", "a":
		default:
			l.fail(l.line, p-l.lineStart, "syntax", "f-string: invalid conversion character")
		}
		l.skipSpace()
	}
	if l.pos < len(src) && src[l.pos] == ':' {
		l.pos++
		l.spec(quote, triple, raw, line, col)
	}
	if l.pos >= len(src) || src[l.pos] != '}' {
		l.fail(l.line, l.col(), "syntax", "f-string: expecting '}'")
	}
	l.emit(kFFieldEnd, "", l.line, l.col())
	l.pos++
	l.pop()
}

// spec scans a format spec up to (not including) the '}' that closes the
// field; nested fields become tokens.
func (l *lexer) spec(quote byte, triple, raw bool, line, col int) {
	src := l.src
	for {
		if l.pos >= len(src) {
			l.fail(line, col, "syntax", "f-string: expecting '}'")
		}
		c := src[l.pos]
		switch {
		case c == '}':
			return
		case c == '{':
			l.field(quote, triple, raw)
		case c == quote && (!triple || l.pos+2 < len(src) && src[l.pos+1] == quote && src[l.pos+2] == quote):
			l.fail(line, col, "syntax", "f-string: expecting '}'")
		case c == '\n':
			if !triple {
				l.fail(line, col, "syntax", "f-string: newlines are not allowed in format specifiers for single quoted f-strings")
			}
			l.pos++
			l.newline()
		case c == '\\' && l.pos+1 < len(src) && src[l.pos+1] != '{' && src[l.pos+1] != '}':
			if src[l.pos+1] == '\n' {
				l.pos += 2
				l.newline()
				continue
			}
			l.pos += 2
		default:
			l.pos++
		}
	}
}
