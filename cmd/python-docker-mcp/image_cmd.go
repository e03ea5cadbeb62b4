package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// dockerClient connects to the daemon named by the environment (DOCKER_HOST
// etc.) and negotiates the API version.
func dockerClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("Docker daemon unreachable (is it running, and may this user use it?): %w", err)
	}
	return cli, nil
}

// runImage serves `image build`.
func runImage(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "build-server" {
		return runBuildServer(ctx, args[1:], stdout, stderr)
	}
	if len(args) != 1 || args[0] != "build" {
		return usageError(stderr, fmt.Errorf("image: want `image build` or `image build-server [--tag NAME:TAG]`"))
	}
	cli, err := dockerClient(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp:", err)
		return exitDocker
	}
	defer cli.Close()
	ref := cfg.Docker.Image
	if why := explainBuild(ctx, cli, ref, image.RecipeFrom(cfg)); why != "" {
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
