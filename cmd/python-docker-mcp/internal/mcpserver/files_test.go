package mcpserver

import "testing"

// A part of a text file that ends inside a character gives that
// character to the next part, so the part stays text; other data is kept.
func TestRuneCut(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"abc", "abc"},
		{"ab\xc3\xa9", "ab\xc3\xa9"},         // é whole
		{"ab\xc3", "ab"},                     // é cut after its first byte
		{"ab\xe2\x82", "ab"},                 // € cut after two bytes
		{"ab\xf0\x9f\x98", "ab"},             // 😀 cut after three bytes
		{"\xff\xfeab\xc3", "\xff\xfeab\xc3"}, // not UTF-8 anyway
		{"\xc3", "\xc3"},                     // nothing would be left
		{"", ""},
	} {
		if got := string(runeCut([]byte(tc.in))); got != tc.want {
			t.Errorf("runeCut(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
