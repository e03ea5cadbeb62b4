// Package runner holds the Python program every sandbox runs. It is embedded
// in the server binary and written to a new sandbox's stdin, where the
// bootstrap that `python3 -I -B -c` runs reads and compiles it, so the
// sandbox image holds no code of the server and a runner change needs no
// image rebuild.
//
// The program is written as parts, one concern each (pdm_runner/*.py),
// joined in the order pdm_runner/ORDER lists them into one source: the
// sandbox runs it as one code object in one namespace, as the audit hook,
// the worker's clearing of the runner's globals and the executor's cache
// of the compiled code (protocol.Codes) expect. See README.md.
package runner

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed pdm_runner/ORDER pdm_runner/*.py
var parts embed.FS

// Source is the runner's Python source: its parts joined in order. Its
// frame protocol is package protocol's, spoken by package executor.
var Source = join()

// Parts lists the runner's parts in the order they are joined.
func Parts() []string {
	order, err := parts.ReadFile("pdm_runner/ORDER")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	return strings.Fields(string(order))
}

func join() string {
	var b strings.Builder
	for _, name := range Parts() {
		src, err := parts.ReadFile("pdm_runner/" + name)
		if err != nil {
			panic(fmt.Sprintf("runner part %s in ORDER is not embedded: %v", name, err))
		}
		b.Write(src)
		if len(src) > 0 && src[len(src)-1] != '\n' {
			b.WriteByte('\n')
		}
		b.WriteString("\n\n")
	}
	return b.String()
}
