package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDisplayStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		runnerCut bool
		shown     int64
		wantText  string
		wantCut   bool
		wantFull  string
		wantTotal int64
	}{
		{name: "short", in: "hello\n", shown: 10, wantText: "hello\n", wantTotal: 6},
		{name: "exactly the cap", in: "0123456789", shown: 10, wantText: "0123456789", wantTotal: 10},
		{name: "cut here", in: "0123456789abcdef", shown: 10, wantText: "01234\n... [6 bytes dropped] ...\nbcdef", wantCut: true, wantFull: "0123456789abcdef", wantTotal: 16},
		{name: "cut by the runner only", in: "01\n... [100 bytes dropped] ...\n89", runnerCut: true, shown: 1000,
			wantText: "01\n... [100 bytes dropped] ...\n89", wantCut: true, wantTotal: 104},
		{name: "cut by both", in: "0123456789\n... [100 bytes dropped] ...\nabcdefghij", runnerCut: true, shown: 10,
			wantText: "01234\n... [110 bytes dropped] ...\nfghij", wantCut: true, wantFull: "0123456789\n... [100 bytes dropped] ...\nabcdefghij", wantTotal: 120},
		{name: "UTF-8 boundaries", in: "ééééé" + "ééééé", shown: 7, wantText: "é\n... [16 bytes dropped] ...\né", wantCut: true, wantFull: "éééééééééé", wantTotal: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, cut, full, total := Display(tc.in, tc.runnerCut, tc.shown)
			if text != tc.wantText || cut != tc.wantCut || full != tc.wantFull || total != tc.wantTotal {
				t.Errorf("Display(%q, %v, %d) = %q, %v, %q, %d; want %q, %v, %q, %d",
					tc.in, tc.runnerCut, tc.shown, text, cut, full, total, tc.wantText, tc.wantCut, tc.wantFull, tc.wantTotal)
			}
			if !utf8.ValidString(text) || strings.Count(text, "bytes dropped") > 1 {
				t.Errorf("shown text %q: invalid UTF-8 or two markers", text)
			}
		})
	}
}
