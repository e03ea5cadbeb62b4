// Package rules holds the shipped Rego policy of python-docker-mcp. Each
// rules/X.rego has its tests in rules/X_test.rego; run them with
// `go tool opa test rules/`. The policy engine (package policy) loads the
// non-test files from FS.
package rules

import "embed"

// FS holds every .rego file of this directory, tests included.
//
//go:embed *.rego
var FS embed.FS
