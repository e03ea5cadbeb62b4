package analyze

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chain is head, link n times, then tail.
func chain(head, link, tail string, n int) string {
	return head + strings.Repeat(link, n) + tail
}

// TestSourceExpressionSize: every unbounded chain of gpython's grammar is
// refused while tokenizing, as one expression measured to its end, where
// it starts; lists separated by commas are not one expression.
func TestSourceExpressionSize(t *testing.T) {
	tests := []struct {
		name              string
		head, link, tail  string
		headN, linkN, tlN int // tokens of the expression in head, each link, tail
		line, col         int // where the expression starts
	}{
		{"power chain", "x = x", "**x", "\n", 3, 2, 0, 1, 0},
		{"unary minus chain", "y = 1\nx = ", "- ", "1\n", 2, 1, 1, 2, 0},
		{"unary plus and invert", "x = ", "+~", "1\n", 2, 2, 1, 1, 0},
		{"not chain", "x = ", "not ", "1\n", 2, 1, 1, 1, 0},
		{"binary chain", "x = 1", "+1", "\n", 3, 2, 0, 1, 0},
		{"comparison chain", "x = 1", "<1", "\n", 3, 2, 0, 1, 0},
		{"boolean chain", "x = a", " or a and a", "\n", 3, 4, 0, 1, 0},
		{"attribute chain", "x = a", ".b", "\n", 3, 2, 0, 1, 0},
		// a group counts its closing bracket where it stands
		{"call chain", "x = f", "()", "\n", 3, 1, 0, 1, 0},
		{"subscript chain", "x = a", "[0]", "\n", 3, 1, 0, 1, 0},
		{"chain of groups", "x = (a)", "**(a)", "\n", 3, 2, 0, 1, 0},
		{"conditional chain", "x = ", "a if b else ", "c\n", 2, 4, 1, 1, 0},
		{"lambda chain", "f = ", "lambda: ", "0\n", 2, 2, 1, 1, 0},
		{"lambda chain with parameters", "f = ", "lambda a, b: ", "0\n", 2, 5, 1, 1, 0},
		{"comprehension clauses", "x = [a ", "for a, b in c if d ", "]\n", 2, 8, 0, 1, 4},
		{"adjacent strings", "x = (", "'a' ", ")\n", 1, 1, 0, 1, 4},
		{"assignment chain", "", "x = ", "1\n", 0, 2, 1, 1, 0},
		{"inside a call", "print(1, x", "**x", ")\n", 1, 2, 0, 1, 9},
		{"inside an f-string field", "x = f'{x", "**x", "}'\n", 2, 2, 1, 1, 6},
		{"indented", "if x:\n    y = 1\n    z = x", "**x", "\n", 3, 2, 0, 3, 4},
		{"chain then a syntax error", "x = x", "**x", " +\n", 3, 2, 1, 1, 0},
		{"chain never closed", "x = (x", "**x", "\n", 2, 2, 0, 1, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := (1<<20 - len(tt.head) - len(tt.tail)) / len(tt.link) // up to the 1 MiB code limit
			src := tt.head + strings.Repeat(tt.link, n) + tt.tail
			_, err := Source([]byte(src), Options{})
			var got *Error
			if !errors.As(err, &got) || got.Kind != "expression" {
				t.Fatalf("Source(%.40q…) error = %v, want an expression error", src, err)
			}
			want := tt.headN + n*tt.linkN + tt.tlN
			if got.Size != want || got.Line != tt.line || got.Col != tt.col {
				t.Errorf("error = %d tokens at %d:%d, want %d at %d:%d", got.Size, got.Line, got.Col, want, tt.line, tt.col)
			}
			if !strings.Contains(got.Msg, "over the limit of 10000 tokens") {
				t.Errorf("message %q does not name the limit", got.Msg)
			}
		})
	}
}

// TestSourceExpressionSizeAllows: long code that is not one long chain,
// and chains up to the limit.
func TestSourceExpressionSizeAllows(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		opts Options
	}{
		{"a list literal of 100000 numbers", "x = [" + strings.Repeat("1.5, ", 100000) + "]\n", Options{}},
		{"a dict literal", "x = {" + strings.Repeat("'k': [1, 2], ", 50000) + "}\n", Options{}},
		{"a call with many arguments", "f(" + strings.Repeat("a=1, ", 50000) + ")\n", Options{}},
		{"many statements", strings.Repeat("y = x ** 2 + f(x).mean() - 1\n", 20000), Options{}},
		{"a chain at the limit", chain("x", "+x", "\n", 4999), Options{MaxExpressionTokens: 9999}},
		{"lambda parameters and for targets end", "f = lambda a, b: a\nx = [a for a, b in c], " + strings.Repeat("x, ", 50000) + "\n", Options{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Source([]byte(tt.src), tt.opts); err != nil {
				t.Errorf("Source(%.40q…): %v", tt.src, err)
			}
		})
	}
	_, err := Source([]byte(chain("x", "+x", "\n", 5000)), Options{MaxExpressionTokens: 10000})
	var got *Error
	if !errors.As(err, &got) || got.Kind != "expression" || got.Size != 10001 {
		t.Errorf("one token over the limit: error = %v, want an expression error of 10001 tokens", err)
	}
}

// dataScript is typical pandas/numpy/matplotlib code, with its longest
// chains.
const dataScript = `import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

rng = np.random.default_rng(0)
df = pd.DataFrame({"a": rng.normal(size=1000), "b": rng.integers(0, 5, 1000), "c": list("xyzwv" * 200)})
out = (df[(df.a > 0) & (df.b < 4) | (df.c == "x")]
       .assign(d=lambda t: t.a ** 2 + 3 * t.a - 1 / (1 + np.exp(-t.b)))
       .groupby(["b", "c"], as_index=False)
       .agg(mean_a=("a", "mean"), n=("a", "size"))
       .sort_values(["b", "mean_a"], ascending=[True, False])
       .reset_index(drop=True)
       .rename(columns=str.upper)
       .head(20))
z = (out.MEAN_A - out.MEAN_A.mean()) / out.MEAN_A.std() if len(out) > 1 else out.MEAN_A * 0
label = "high" if z.max() > 2 else "mid" if z.max() > 1 else "low" if z.max() > 0 else "none"
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(np.linspace(0, 1, 100), np.sin(2 * np.pi * np.linspace(0, 1, 100)) ** 2 + 0.1 * rng.normal(size=100), "o-")
print(f"{label}: {z.max():.3f} over {len(out)} groups", out.to_string()[:200])
`

// TestSourceExpressionSizeRealCode: the default limit never refuses the
// Python this repository ships, typical data-science code or the snippets
// the gate is tested on; they stay far below it.
func TestSourceExpressionSizeRealCode(t *testing.T) {
	srcs := map[string][]byte{"a pandas script": []byte(dataScript), "benchmark code": benchSource(1000)}
	parts, err := filepath.Glob("../../executor/runner/pdm_runner/*.py")
	if err != nil || len(parts) == 0 {
		t.Fatalf("the runner's parts: %v, %d files", err, len(parts))
	}
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs["runner part "+filepath.Base(p)] = b
	}
	var snippets []string
	b, err := os.ReadFile("testdata/snippets.json")
	if err == nil {
		err = json.Unmarshal(b, &snippets)
	}
	if err != nil || len(snippets) == 0 {
		t.Fatalf("testdata/snippets.json: %v, %d snippets", err, len(snippets))
	}
	for i, s := range snippets {
		srcs[fmt.Sprintf("snippet %d", i)] = []byte(s)
	}
	for name, src := range srcs {
		if _, err := Source(src, Options{}); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == "syntax" {
				continue // some snippets are invalid on purpose
			}
			t.Errorf("%s: %v", name, err)
		}
		// 300: real code is far below the default
		if _, err := Source(src, Options{MaxExpressionTokens: 300}); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == "expression" {
				t.Errorf("%s with MaxExpressionTokens 300: %v", name, err)
			}
		}
	}
}
