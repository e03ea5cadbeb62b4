package docker

import (
	"context"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

const image = "python-docker-mcp-sandbox:latest"

// TestSuite runs the shared backend suite against the real daemon.
func TestSuite(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			dockertest.RequireImage(t, image)
			cli, err := Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cli.Close() })
			return New(cli)
		},
		Image: image,
	})
}
