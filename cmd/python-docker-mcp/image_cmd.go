package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// runImage serves `image build`.
func runImage(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "build-server" {
		return runBuildServer(ctx, args[1:], stdout, stderr)
	}
	if len(args) != 1 || args[0] != "build" {
		return usageError(stderr, fmt.Errorf("image: want `image build` or `image build-server [--tag NAME:TAG]`"))
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp:", err)
		return exitDocker
	}
	defer cli.Close()
	ref := cfg.Docker.Image
	if why := image.Explain(ctx, cli, ref, image.RecipeFrom(cfg)); why != "" {
		fmt.Fprintln(stderr, why)
	}
	start := time.Now()
	built, err := image.Ensure(ctx, cli, ref, image.RecipeFrom(cfg), func(line string) {
		fmt.Fprintln(stderr, line)
	})
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp: image build:", err)
		return exitDocker
	}
	if built {
		fmt.Fprintf(stdout, "built %s in %s\n", ref, time.Since(start).Round(time.Second))
	} else {
		fmt.Fprintf(stdout, "%s is current (recipe %s)\n", ref, image.RecipeFrom(cfg).Hash()[:12])
	}
	return exitOK
}
