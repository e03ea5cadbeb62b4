package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

var (
	mdLink    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// markdownFiles lists the repository's Markdown files (not under .git or
// testdata), relative to repoRoot.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			docs = append(docs, rel)
		}
		return nil
	})
	if err != nil || len(docs) == 0 {
		t.Fatalf("no Markdown files under %s: %v", repoRoot, err)
	}
	return docs
}

// proseLines returns a Markdown file's lines with fenced code blocks
// emptied and inline code spans blanked out (same length), so that what
// looks like a link inside code is not taken for one.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trim := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			lines[i] = ""
			continue
		}
		if strings.HasPrefix(line, "    ") && (i == 0 || strings.TrimSpace(lines[i-1]) == "" || strings.HasPrefix(lines[i-1], "    ")) && !strings.HasPrefix(trim, "-") && !strings.HasPrefix(trim, "|") {
			// An indented code block (as the Kubernetes README's commands).
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			// Keep the span's text (link text may be code), but not
			// anything in it that could open a link.
			return strings.NewReplacer("[", " ", "]", " ", "(", " ", ")", " ").Replace(s)
		})
	}
	return lines
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation other than - and _ dropped, spaces as -,
// a repeated heading suffixed -1, -2, ….
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestMarkdownLinksResolve keeps the docs' cross-references true: every
// relative link of every Markdown file names a file or directory of the
// repository, and every #anchor a heading of the file it points to.
func TestMarkdownLinksResolve(t *testing.T) {
	docs := markdownFiles(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := cache[rel]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		cache[rel] = anchors(string(b))
		return cache[rel]
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range proseLines(string(b)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				rel := doc
				if path != "" {
					if filepath.IsAbs(path) {
						t.Errorf("%s:%d: link %q is absolute; use a path relative to the file", doc, i+1, target)
						continue
					}
					rel = filepath.Clean(filepath.Join(filepath.Dir(doc), path))
					if rel == ".." || strings.HasPrefix(rel, "../") {
						t.Errorf("%s:%d: link %q leaves the repository", doc, i+1, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil {
						t.Errorf("%s:%d: link %q: no such file or directory %s", doc, i+1, target, rel)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s:%d: link %q has an anchor into %s, which is not Markdown", doc, i+1, target, rel)
					continue
				}
				if !anchorsOf(rel)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", doc, i+1, target, rel, anchor)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
	t.Logf("%d relative links in %d Markdown files resolve", links, len(docs))
}

// TestAnchors pins the anchor rule to GitHub's on headings the docs use.
func TestAnchors(t *testing.T) {
	got := anchors("# A\n## `policy check` and `policy eval`\n## Shared sessions (`backend.Shared`)\n" +
		"## python-docker-mcp's configuration, run as it is\n## Figures\n## Figures\n```\n# not a heading\n```\n")
	for _, want := range []string{"a", "policy-check-and-policy-eval", "shared-sessions-backendshared",
		"python-docker-mcps-configuration-run-as-it-is", "figures", "figures-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block made an anchor")
	}
}
