// Package runner holds the Python program every sandbox runs. It is embedded
// in the server binary and written to a new sandbox's stdin, where the
// bootstrap that `python3 -I -B -c` runs reads and compiles it, so the
// sandbox image holds no code of the server and a runner change needs no
// image rebuild.
package runner

import _ "embed"

// Source is the runner's Python source. Its frame protocol is documented at
// the top of runner.py and spoken by package executor.
//
//go:embed runner.py
var Source string
