package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/python-docker-mcp/python-docker-mcp/config"
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
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tENV")
	for _, k := range config.Keys() {
		v, _ := l.Config.Value(k)
		b, _ := json.Marshal(v)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k, b, l.Origin[k], config.EnvName(k))
	}
	tw.Flush()
	return exitOK
}

// runConfigValidate serves `config validate FILE`: every error, exit 1 when
// there is any. The environment is not read: the file is judged alone.
func runConfigValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageError(stderr, fmt.Errorf("config validate: want exactly one FILE"))
	}
	_, err := config.Load(config.Options{File: args[0], Home: "/nonexistent"})
	if err != nil {
		if errs, ok := err.(config.Errors); ok {
			fmt.Fprintf(stderr, "%s: %d error(s)\n", args[0], len(errs))
		}
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: valid\n", args[0])
	return exitOK
}
