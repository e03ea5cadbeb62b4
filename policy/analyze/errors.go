package analyze

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Defaults for the zero values of Options.
const (
	// DefaultMaxBytes is the source size limit when Options.MaxBytes is 0.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxDepth is the nesting limit when Options.MaxDepth is 0.
	// CPython rejects 200 nested brackets and 100 indentation levels.
	DefaultMaxDepth = 100
	// DefaultMaxExpressionTokens is the expression size limit when
	// Options.MaxExpressionTokens is 0. CPython itself gives up on chains
	// of a few thousand operators (RecursionError or MemoryError when
	// compiling); flat lists separated by commas are not one expression.
	DefaultMaxExpressionTokens = 10000
)

// Options bound the work Source does. Zero values mean the defaults.
type Options struct {
	// MaxBytes is the largest accepted source, in bytes (default 1 MiB).
	MaxBytes int
	// MaxDepth caps bracket nesting (f-string replacement fields count as
	// brackets) and, separately, indentation levels (default 100).
	MaxDepth int
	// MaxExpressionTokens caps the size of one expression, in tokens: the
	// tokens of one bracket level up to a comma, a semicolon, the end of
	// the line or of the brackets (a comma in lambda parameters or a for
	// target does not end it). Every chain of operators, attributes,
	// calls or subscripts counts link by link; an element of a list,
	// tuple, dict or argument list counts alone. Checked while
	// tokenizing, before the parser allocates anything (default 10000).
	MaxExpressionTokens int
}

// Error is every rejection of Source: a pre-check, the lowering or the
// parse. Line is 1-based and Col 0-based, in UTF-8 bytes, like CPython's
// SyntaxError.lineno and the ast's col_offset.
type Error struct {
	Line, Col int
	// Kind is one of "encoding" (not strict UTF-8), "nul" (NUL byte),
	// "coding" (a coding declaration other than utf-8/ascii), "cr" (a \r
	// not followed by \n), "size" (over Options.MaxBytes), "depth" (nesting
	// over Options.MaxDepth), "expression" (an expression over
	// Options.MaxExpressionTokens: Line and Col are where it starts) or
	// "syntax".
	Kind string
	Msg  string
	// Size is the measured size for Kind "expression", in tokens (the
	// whole expression: it is measured to its end without being kept).
	Size int
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d, col %d: %s", e.Line, e.Col, e.Msg)
}

func errAt(line, col int, kind, format string, args ...any) *Error {
	return &Error{Line: line, Col: col, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Show renders e as CPython renders a SyntaxError: the file and line, the
// source line (without its indentation) with a caret under the error, and
// the message. col is CPython's 1-based column in characters (0 when the
// line is not in src).
func (e *Error) Show(src []byte, file string) (col int, shown string) {
	lines := strings.Split(string(src), "\n")
	if e.Line < 1 || e.Line > len(lines) {
		return 0, "SyntaxError: " + e.Msg
	}
	text := strings.TrimRight(lines[e.Line-1], "\r")
	c := min(max(e.Col, 0), len(text))
	col = utf8.RuneCountInString(text[:c]) + 1
	indent := len(text) - len(strings.TrimLeft(text, " \t\f"))
	caret := strings.Repeat(" ", max(col-1-utf8.RuneCountInString(text[:indent]), 0))
	return col, fmt.Sprintf("  File %q, line %d\n    %s\n    %s^\nSyntaxError: %s", file, e.Line, text[indent:], caret, e.Msg)
}
