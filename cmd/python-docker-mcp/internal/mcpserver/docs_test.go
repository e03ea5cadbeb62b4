package mcpserver

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// TestDocsNameServedSchemes keeps the docs' resource URIs true: every URI
// scheme a Markdown file of the repository names, other than the web's and
// file://, is the scheme of a resource template the server lists.
func TestDocsNameServedSchemes(t *testing.T) {
	h := start(t, config.Default(), "")
	res, err := h.session.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{"http": true, "https": true, "file": true}
	for _, tpl := range res.ResourceTemplates {
		scheme, _, ok := strings.Cut(tpl.URITemplate, "://")
		if !ok {
			t.Fatalf("template %q has no scheme", tpl.URITemplate)
		}
		served[scheme] = true
	}
	uri := regexp.MustCompile(`\b([a-z][a-z0-9+.-]*)://`)
	root := filepath.Join("..", "..", "..", "..")
	var docs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil || len(docs) == 0 {
		t.Fatalf("no Markdown files under %s: %v", root, err)
	}
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range uri.FindAllStringSubmatch(line, -1) {
				if !served[m[1]] {
					t.Errorf("%s:%d names %s://, which the server does not serve (its templates: %v)", path, i+1, m[1], slices.Sorted(maps.Keys(served)))
				}
			}
		}
	}
}
