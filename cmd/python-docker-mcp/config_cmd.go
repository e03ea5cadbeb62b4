package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// runConfig serves `config show [--json]`.
func runConfig(l *config.Loaded, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "show" {
		return usageError(stderr, fmt.Errorf("config: want `config show [--json]` or `config validate FILE`"))
	}
	asJSON := len(args) > 1 && (args[1] == "--json" || args[1] == "-json")
	for _, w := range l.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			File   string            `json:"file"`
			Config config.Config     `json:"config"`
			Origin map[string]string `json:"origin"`
		}{l.File, l.Config, l.Origin})
		return exitOK
	}
	file := l.File
	if file == "" {
		file = "(none: defaults)"
	}
	fmt.Fprintf(stdout, "# config file: %s\n", file)
	fmt.Fprintf(stdout, "# env: %sKEY in capitals, dots as underscores, e.g. %s\n", config.EnvPrefix, config.EnvName("pool.size"))
	rows := make([][3]string, 0, len(config.Keys()))
	for _, k := range config.Keys() {
		v, _ := l.Config.Value(k)
		b, _ := json.Marshal(v)
		rows = append(rows, [3]string{k, string(b), l.Origin[k]})
	}
	writeConfigTable(stdout, rows, showWidth)
	return exitOK
}

// showWidth is the width `config show` keeps to.
const showWidth = 100

// writeConfigTable prints KEY VALUE SOURCE rows within width columns: a
// long value wraps at its commas onto continuation lines under VALUE, and
// a source that does not fit (env or flag names) goes on a line of its own.
func writeConfigTable(w io.Writer, rows [][3]string, width int) {
	keyW := len("KEY")
	for _, r := range rows {
		keyW = max(keyW, len(r[0]))
	}
	const srcW = len("default")
	valW := max(width-keyW-2-2-srcW, 20)
	pad := strings.Repeat(" ", keyW+2)
	fmt.Fprintf(w, "%-*s  %-*s  %s\n", keyW, "KEY", valW, "VALUE", "SOURCE")
	for _, r := range rows {
		lines := wrapValue(r[1], valW)
		src := r[2]
		if len(src) > srcW {
			fmt.Fprintf(w, "%-*s  %s\n", keyW, r[0], lines[0])
		} else {
			fmt.Fprintf(w, "%-*s  %-*s  %s\n", keyW, r[0], valW, lines[0], src)
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%s%s\n", pad, l)
		}
		if len(src) > srcW {
			fmt.Fprintf(w, "%s(from %s)\n", pad, src)
		}
	}
}

// wrapValue splits a JSON value into lines of at most width characters,
// breaking after commas (a single element longer than width stays whole).
func wrapValue(v string, width int) []string {
	if len(v) <= width {
		return []string{v}
	}
	var lines []string
	line := ""
	for _, part := range strings.SplitAfter(v, ",") {
		if line != "" && len(line)+len(part) > width {
			lines = append(lines, line)
			line = ""
		}
		line += part
	}
	return append(lines, line)
}

// runConfigValidate serves `config validate FILE`: every error, exit 1 when
// there is any. The environment is not read: the file is judged alone.
func runConfigValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageError(stderr, fmt.Errorf("config validate: want exactly one FILE"))
	}
	l, err := config.Load(config.Options{File: args[0], Home: "/nonexistent"})
	if err != nil {
		if errs, ok := err.(config.Errors); ok {
			fmt.Fprintf(stderr, "%s: %d error(s)\n", args[0], len(errs))
		}
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: valid\n", args[0])
	for _, n := range gateOnlyNotes(l.Config.BlockedCalls) {
		fmt.Fprintf(stdout, "%s: note: %s\n", args[0], n)
	}
	return exitOK
}

// gateOnlyNotes name the blocked_calls entries (or their parts) that the
// static gate judges but the sandbox cannot enforce at run time (see
// executor.CallGuards), one line each.
func gateOnlyNotes(blocked []string) []string {
	_, gateOnly := executor.CallGuards(blocked)
	notes := make([]string, 0, len(gateOnly))
	for _, e := range gateOnly {
		notes = append(notes, fmt.Sprintf("blocked_calls: %s is enforced by the static gate only, not at run time", e))
	}
	return notes
}
