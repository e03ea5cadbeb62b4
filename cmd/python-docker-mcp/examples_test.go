package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// TestClientExamples keeps examples/clients true: each file parses, and the
// arguments it gives the server are flags the server accepts and settings
// that load.
func TestClientExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/clients/*.json")
	if len(files) == 0 {
		t.Fatal("no client examples found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			MCPServers map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
				URL     string   `json:"url"`
			} `json:"mcpServers"`
			Server *struct {
				Args []string `json:"args"`
			} `json:"server"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var argLists [][]string
		for name, s := range doc.MCPServers {
			if s.Command == "" && s.URL == "" {
				t.Errorf("%s: server %q has neither command nor url", f, name)
			}
			if s.Command != "" {
				argLists = append(argLists, s.Args)
			}
		}
		if doc.Server != nil {
			argLists = append(argLists, doc.Server.Args)
		}
		for _, args := range argLists {
			g, rest, err := parseGlobal("python-docker-mcp", args, io.Discard)
			if err != nil || len(rest) != 0 {
				t.Errorf("%s: args %q: %v, rest %q", f, args, err, rest)
				continue
			}
			o := g.options()
			o.File, o.Env, o.Home = "", nil, t.TempDir() // the example's own file is not here
			if _, err := config.Load(o); err != nil {
				t.Errorf("%s: args %q do not load: %v", f, args, err)
			}
		}
	}
}

// TestKubernetesManifestImages keeps examples/kubernetes/server.yaml true to
// what the build tags: the server container runs the image `image
// build-server` tags by default, and the sandbox image is the configured
// default.
func TestKubernetesManifestImages(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes/server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
			images = append(images, strings.Trim(v, `"'`))
		}
	}
	want := []string{config.Default().Docker.Image, DefaultServerImage}
	if diff := cmp.Diff(want, images); diff != "" {
		t.Errorf("images in server.yaml (-want +got):\n%s", diff)
	}
}
