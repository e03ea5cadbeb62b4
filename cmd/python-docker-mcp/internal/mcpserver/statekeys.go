package mcpserver

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// pythonKeywords are Python 3.13's hard keywords: not usable as names.
var pythonKeywords = words("False None True and as assert async await break class continue def del elif else except " +
	"finally for from global if import in is lambda nonlocal not or pass raise return try while with yield")

// pythonBuiltins are the public names of Python 3.13's builtins module
// (dir(builtins) without the underscore names), as the sandbox image has them.
var pythonBuiltins = words("ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception ExceptionGroup False FileExistsError FileNotFoundError FloatingPointError FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError NameError None NotADirectoryError NotImplemented NotImplementedError OSError OverflowError PendingDeprecationWarning PermissionError ProcessLookupError PythonFinalizationError RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError True TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod compile complex copyright credits delattr dict dir divmod enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help hex id input int isinstance issubclass iter len license list locals map max memoryview min next object oct open ord pow print property quit range repr reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip")

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// isIdentifier approximates str.isidentifier: a letter or underscore, then
// letters, digits or underscores (Unicode letters and digits included).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || unicode.IsLetter(r) {
			continue
		}
		if i > 0 && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)) {
			continue
		}
		return false
	}
	return true
}

// checkStateKeys says what is wrong with the names of a transient call's
// state, one sentence per bad name (nil when all are usable): each must be
// a Python identifier that is not a keyword, does not shadow a builtin and
// is not a dunder name.
func checkStateKeys[V any](state map[string]V) []string {
	names := make([]string, 0, len(state))
	for k := range state {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		switch {
		case !isIdentifier(k):
			out = append(out, fmt.Sprintf("state key %q is not a Python identifier: use letters, digits and underscores, not starting with a digit (e.g. %q)", k, suggestIdentifier(k)))
		case pythonKeywords[k]:
			out = append(out, fmt.Sprintf("state key %q is a Python keyword and cannot be a variable name: rename it (e.g. %q)", k, k+"_"))
		case strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__"):
			out = append(out, fmt.Sprintf("state key %q is a dunder name reserved for the interpreter: rename it (e.g. %q)", k, strings.Trim(k, "_")+"_value"))
		case pythonBuiltins[k]:
			out = append(out, fmt.Sprintf("state key %q would shadow Python's builtin %s: rename it (e.g. %q)", k, k, k+"_"))
		}
	}
	return out
}

func suggestIdentifier(k string) string {
	var b strings.Builder
	for i, r := range k {
		switch {
		case r == '_' || unicode.IsLetter(r) || (unicode.IsDigit(r) && i > 0):
			b.WriteRune(r)
		case unicode.IsDigit(r):
			b.WriteString("_")
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 {
		return "value"
	}
	return b.String()
}

// checkStateNames says what is wrong with the names of a transient call's
// state_keys, one sentence per bad name (nil when all are usable): each is
// a Python identifier, or "*" for every global; at most
// executor.MaxStateKeys of them.
func checkStateNames(names []string) []string {
	if len(names) > executor.MaxStateKeys {
		return []string{fmt.Sprintf("state_keys has %d names; the maximum is %d (use [\"*\"] for every global)", len(names), executor.MaxStateKeys)}
	}
	var out []string
	for _, k := range names {
		if k != "*" && (!isIdentifier(k) || len(k) > 256) {
			out = append(out, fmt.Sprintf("state_keys name %q is not a Python identifier (or \"*\" for every global)", k))
		}
	}
	return out
}
