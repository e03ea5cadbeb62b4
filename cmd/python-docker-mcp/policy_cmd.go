package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

const policyUsage = `usage:
  python-docker-mcp policy check [--config F] [--profile P] [--json] FILE.py
      judge FILE.py as the server judges execute-transient: each violation as
      FILE:LINE:COL: rule: message; exit 0 on allow, 1 on deny.
      --json prints {"facts": ..., "decision": ...} instead.
  python-docker-mcp policy eval [--config F] [--profile P] INPUT.json
      evaluate a raw policy input document (described in policy/README.md) and
      print the decision as JSON; exit 0 on allow, 1 on deny.
`

// runPolicy serves `policy check` and `policy eval`; args follow `policy`.
// Exit codes: 0 allow, 1 deny (or a file that cannot be read), 2 bad
// command line, 3 policy or configuration that does not load.
func runPolicy(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "check" && args[0] != "eval") {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, policyUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "python-docker-mcp policy: want check or eval\n\n%s", policyUsage)
		return exitUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("policy "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	profile := fs.String("profile", "", "policy profile: standard or strict")
	asJSON := fs.Bool("json", false, "print facts and decision as JSON")
	files, err := parseInterleaved(fs, args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy %s: %v\n\n%s", sub, err, policyUsage)
		return exitUsage
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "python-docker-mcp policy %s: want exactly one file, got %d\n\n%s", sub, len(files), policyUsage)
		return exitUsage
	}
	if sub == "eval" && *asJSON {
		fmt.Fprintf(stderr, "python-docker-mcp policy eval: the decision is always JSON; drop --json\n")
		return exitUsage
	}
	if *profile != "" {
		cfg.Policy.Profile = *profile
	}
	engine, err := policy.Load(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy: the policy does not load:\n%v\n", err)
		return exitConfig
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy %s: %v\n", sub, err)
		return exitFail
	}
	if sub == "eval" {
		return policyEval(ctx, engine, files[0], src, stdout, stderr)
	}
	return policyCheck(ctx, cfg, engine, files[0], src, *asJSON, stdout, stderr)
}

// policyCheck judges src as the server judges an execute-transient call
// (no requested limits, an anonymous principal).
func policyCheck(ctx context.Context, cfg config.Config, e *policy.Engine, file string, src []byte, asJSON bool, stdout, stderr io.Writer) int {
	c, err := e.Check(ctx, policy.Input{Tool: policy.ToolExecuteTransient, Principal: policy.Principal{Scopes: []string{}}}, src)
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy check: %v\n", err)
		return exitFail
	}
	facts, d := c.Facts, c.Decision
	for _, n := range gateOnlyNotes(cfg.BlockedCalls) {
		fmt.Fprintf(stderr, "python-docker-mcp policy check: note: %s\n", n)
	}
	var caret string
	if c.Syntax != nil {
		// The static step cannot parse the code: the server asks CPython
		// (status syntax_error); here, offline, the static checker's message
		// stands as a denial, with the line and a caret.
		d = policy.Denied(c.Syntax)
		if _, shown := c.Syntax.Show(src, file); strings.Count(shown, "\n") == 3 {
			caret = strings.Join(strings.Split(shown, "\n")[1:3], "\n") + "\n"
		}
	}
	if asJSON {
		if err := writeJSON(stdout, struct {
			Facts    analyze.Facts   `json:"facts"`
			Decision policy.Decision `json:"decision"`
		}{facts, d}); err != nil {
			fmt.Fprintf(stderr, "python-docker-mcp policy check: %v\n", err)
			return exitFail
		}
	} else {
		for _, v := range d.Violations {
			fmt.Fprintf(stdout, "%s:%d:%d: %s: %s\n", file, v.Line, v.Col, v.Rule, v.Msg)
			if v.Rule == "syntax" {
				fmt.Fprint(stdout, caret)
			}
		}
		for _, w := range d.Warnings {
			fmt.Fprintf(stdout, "%s:%d:%d: warning: %s: %s\n", file, w.Line, w.Col, w.Rule, w.Msg)
		}
	}
	if !d.Allow {
		return exitFail
	}
	return exitOK
}

// policyEval decides a raw input document. Unknown fields are errors, so
// a misspelt key is not silently ignored.
func policyEval(ctx context.Context, e *policy.Engine, file string, src []byte, stdout, stderr io.Writer) int {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var in policy.Input
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy eval: %s is not a policy input document: %v\n", file, err)
		return exitFail
	}
	if dec.More() {
		fmt.Fprintf(stderr, "python-docker-mcp policy eval: %s holds more than one JSON value\n", file)
		return exitFail
	}
	d, err := e.Decide(ctx, in)
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy eval: %v\n", err)
		return exitFail
	}
	if err := writeJSON(stdout, d); err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp policy eval: %v\n", err)
		return exitFail
	}
	if !d.Allow {
		return exitFail
	}
	return exitOK
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // ">=1" stays readable
	return enc.Encode(v)
}

// parseInterleaved parses flags wherever they appear among the positional
// arguments (`check x.py --json` as well as `check --json x.py`); "--"
// ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return positional, nil
}
