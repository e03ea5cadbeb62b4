package analyze

import (
	"encoding/json"
	"os"
	"testing"
)

// TestDebugFile prints the lowered source and the facts of the file named
// by ANALYZE_FILE; it is a development aid and skips otherwise.
func TestDebugFile(t *testing.T) {
	name := os.Getenv("ANALYZE_FILE")
	if name == "" {
		t.Skip("ANALYZE_FILE not set")
	}
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if pre, err := precheck(src, DefaultMaxBytes); err == nil {
		if toks, err := tokenize(pre, DefaultMaxDepth); err == nil {
			if lw, err := lower(toks); err == nil {
				t.Logf("lowered:\n%s", lw.out)
			}
		}
	}
	f, err := Source(src, Options{})
	if err != nil {
		t.Fatalf("Source: %v", err)
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	t.Logf("%s", b)
}
