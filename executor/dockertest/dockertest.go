// Package dockertest holds the one helper every test that needs the real
// Docker daemon calls first.
package dockertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Require returns a client of the real Docker daemon. Without a reachable
// daemon the test is skipped, except when the CI environment variable is
// set: then it fails, so CI never goes green without the real daemon.
//
// Under -short it always skips: `go test -short ./...` is the fast run
// without Docker (the executor's logic runs on its fake backend there).
func Require(t testing.TB) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Docker daemon; run without -short")
	}
	cli, err := client.New(client.FromEnv)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Docker daemon required (CI is set, so this fails instead of skipping): %v", err)
		}
		t.Skipf("Docker daemon not reachable: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// RequireImage is Require plus a check that the image exists; without it the
// test fails (or skips locally) with the command that builds it.
func RequireImage(t testing.TB, image string) *client.Client {
	t.Helper()
	cli := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		msg := "sandbox image " + image + " missing (build it: go run ./cmd/python-docker-mcp image build): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return cli
}
