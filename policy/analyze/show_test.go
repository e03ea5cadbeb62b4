package analyze

import "testing"

func TestErrorShow(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
		col  int
	}{
		{"x = 1\n\tif (é + (\n", "  File \"f.py\", line 2\n    if (é + (\n            ^\nSyntaxError: '(' was never closed", 10},
		{"def f(:\n", "  File \"f.py\", line 1\n    def f(:\n         ^\nSyntaxError: '(' was never closed", 6},
	} {
		_, err := Source([]byte(tc.src), Options{})
		aerr, ok := err.(*Error)
		if !ok || aerr.Kind != "syntax" {
			t.Fatalf("Source(%q) = %v, want a syntax error", tc.src, err)
		}
		col, got := aerr.Show([]byte(tc.src), "f.py")
		if got != tc.want || col != tc.col {
			t.Errorf("Show(%q) = %d, %q; want %d, %q", tc.src, col, got, tc.col, tc.want)
		}
	}
	if col, got := (&Error{Line: 9, Msg: "m"}).Show([]byte("x\n"), "f.py"); col != 0 || got != "SyntaxError: m" {
		t.Errorf("a line past the end: %d, %q", col, got)
	}
}
