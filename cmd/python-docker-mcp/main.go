// Command python-docker-mcp is an MCP server that runs Python for AI agents
// in hardened, network-less Docker sandboxes, behind a static gate and an
// OPA policy.
//
//	python-docker-mcp [flags]                  serve MCP (stdio by default)
//	python-docker-mcp config show [--json]     the effective config and where each value came from
//	python-docker-mcp config validate FILE     every error of FILE; exit 0 when valid
//	python-docker-mcp image build              build the sandbox image from Debian's packages (no-op when current)
//	python-docker-mcp image build-server       build the server's own container image (static binary)
//	python-docker-mcp policy check FILE.py     judge a file as the server would
//	python-docker-mcp policy eval INPUT.json   evaluate a raw policy input document
//	python-docker-mcp bench                    latency benchmark through a real MCP client
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/bench"
	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitFail    = 1 // a runtime failure, a denial, an invalid file
	exitUsage   = 2 // bad command line
	exitConfig  = 3 // the configuration does not load
	exitDocker  = 4 // Docker unreachable or the image cannot be built
	exitUnknown = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g, rest, err := parseGlobal("python-docker-mcp", args, stderr)
	if err != nil {
		return usageError(stderr, err)
	}
	cmd := "serve"
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	if cmd == "config" && len(rest) > 0 && rest[0] == "validate" {
		return runConfigValidate(rest[1:], stdout, stderr)
	}
	if cmd == "help" || cmd == "-h" {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	loaded, err := config.Load(g.options())
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp: configuration does not load:\n%v\n", err)
		return exitConfig
	}
	switch cmd {
	case "serve":
		return runServe(ctx, g, loaded, rest, stdin, stdout, stderr)
	case "config":
		return runConfig(loaded, rest, stdout, stderr)
	case "image":
		return runImage(ctx, loaded.Config, rest, stdout, stderr)
	case "policy":
		return runPolicy(ctx, loaded.Config, rest, stdout, stderr)
	case "bench":
		return bench.Run(ctx, bench.Server{Args: serverArgs(g), Version: version, Workers: stdioWorkers}, loaded.Config, rest, stdout, stderr)
	}
	return usageError(stderr, fmt.Errorf("unknown command %q", cmd))
}

const usage = `usage: python-docker-mcp [flags] [command]

commands:
  serve (default)          serve MCP over stdio, or Streamable HTTP with --transport http
  config show [--json]     print the effective configuration and each value's source
  config validate FILE     check FILE; print every error; exit 0 when valid
  image build              build the sandbox image from Debian's packages (needs root and a Debian
                           mirror, no container registry; a no-op when it is current)
  image build-server       build this server's container image from this (static) binary
  policy check FILE.py     judge FILE.py as the server would (exit 1 on deny)
  policy eval INPUT.json   evaluate a raw policy input document
  bench                    measure latency through a real MCP client

flags (before or after the command):
  --config FILE            config file (default $PYTHON_DOCKER_MCP_CONFIG, else ~/.python-docker-mcp/config.yaml)
  --transport stdio|http   --addr HOST:PORT   --image IMAGE   --profile standard|strict   --log-level LEVEL
  --metrics-addr HOST:PORT serve Prometheus /metrics there (also for stdio)
  --set KEY=VALUE          set any key, e.g. --set pool.size=4 (repeatable)
`

func usageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "python-docker-mcp: %v\n\n%s", err, usage)
	return exitUsage
}
