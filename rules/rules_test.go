package rules

import (
	"io/fs"
	"strings"
	"testing"
)

// Every rules/X.rego has its tests in rules/X_test.rego, and every test
// file tests a rule file. (The tests themselves run with
// `go tool opa test rules/` and from go test ./policy/.)
func TestEveryRuleFileHasTests(t *testing.T) {
	files, err := fs.Glob(FS, "*.rego")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	if len(files) < 2 {
		t.Fatalf("FS holds %v, want the shipped rules", files)
	}
	for _, f := range files {
		if base, ok := strings.CutSuffix(f, "_test.rego"); ok {
			if !have[base+".rego"] {
				t.Errorf("%s tests no rule file (%s.rego is missing)", f, base)
			}
		} else if !have[strings.TrimSuffix(f, ".rego")+"_test.rego"] {
			t.Errorf("%s has no %s_test.rego beside it", f, strings.TrimSuffix(f, ".rego"))
		}
	}
}
