package policy

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
)

// minCoverage is the Rego line coverage the shipped and example rules
// must keep, as `go tool opa test --coverage --threshold 90` checks in CI.
const minCoverage = 90

// TestRego runs the Rego tests of rules/ and examples/policy/ (what
// `go tool opa test rules/ examples/policy/` runs) and checks coverage.
func TestRego(t *testing.T) {
	ctx := context.Background()
	modules, store, err := tester.LoadWithRegoVersion([]string{"../rules", "../examples/policy"}, nil, ast.RegoV1)
	if err != nil {
		t.Fatalf("load Rego: %v", err)
	}
	cov := cover.New()
	results, err := tester.NewRunner().
		SetStore(store).
		SetDefaultRegoVersion(ast.RegoV1).
		SetCoverageQueryTracer(cov).
		Run(ctx, modules)
	if err != nil {
		t.Fatalf("run Rego tests: %v", err)
	}
	n := 0
	for r := range results {
		n++
		if !r.Pass() {
			t.Errorf("%s: %v", r.String(), r.Error)
		}
	}
	if n < 50 {
		t.Errorf("ran %d Rego tests, want the whole suite (50 or more)", n)
	}
	report := cov.Report(modules)
	if report.Coverage < minCoverage {
		t.Errorf("Rego coverage %.1f%%, want at least %d%%", report.Coverage, minCoverage)
	}
	t.Logf("%d Rego tests, coverage %.2f%%", n, report.Coverage)
}
