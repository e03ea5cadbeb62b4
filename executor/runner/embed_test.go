package runner

import (
	"io/fs"
	"strings"
	"testing"
)

// maxPartLines caps one part of the runner: each holds one concern.
const maxPartLines = 500

// TestParts: ORDER lists every part once and nothing else, each part is
// at most maxPartLines lines, and Source holds them all in that order.
func TestParts(t *testing.T) {
	files, err := fs.Glob(parts, "pdm_runner/*.py")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, name := range Parts() {
		listed[name]++
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "pdm_runner/")
		if listed[name] != 1 {
			t.Errorf("%s is listed %d times in pdm_runner/ORDER, want once", name, listed[name])
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("pdm_runner/ORDER lists %s, which is not a file of pdm_runner", name)
	}
	at := 0
	for _, name := range Parts() {
		src, err := parts.ReadFile("pdm_runner/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxPartLines {
			t.Errorf("%s has %d lines, more than %d: split it by concern", name, n, maxPartLines)
		}
		i := strings.Index(Source[at:], string(src))
		if i < 0 {
			t.Fatalf("Source does not hold %s after the parts before it", name)
		}
		at += i + len(src)
	}
	if first := Parts()[0]; first != "process.py" {
		t.Errorf("the first part is %s, want process.py (process 1's protection comes before anything else)", first)
	}
	if last := Parts()[len(Parts())-1]; last != "main.py" {
		t.Errorf("the last part is %s, want main.py (the loop starts once everything is defined)", last)
	}
}
