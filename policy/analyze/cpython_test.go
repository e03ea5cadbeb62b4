package analyze

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// snippetScript reads a JSON list of base64 sources on stdin and prints,
// for each, whether CPython parses it, its imports as
// "module:level@line:col", and for a SyntaxError its line and 0-based
// column.
const snippetScript = `
import ast, base64, json, sys
out = []
for b in json.load(sys.stdin):
    src = base64.b64decode(b)
    try:
        t = ast.parse(src)
    except SyntaxError as e:
        out.append({"ok": False, "line": e.lineno or 0, "col": (e.offset or 1) - 1, "msg": e.msg})
        continue
    imps = []
    for n in ast.walk(t):
        if isinstance(n, ast.Import):
            imps += ["%s:0@%d:%d" % (a.name, n.lineno, n.col_offset) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            imps.append("%s:%d@%d:%d" % (n.module or "", n.level, n.lineno, n.col_offset))
    out.append({"ok": True, "imports": sorted(imps)})
json.dump(out, sys.stdout)
`

type snippetResult struct {
	OK      bool     `json:"ok"`
	Imports []string `json:"imports"`
	Line    int      `json:"line"`
	Col     int      `json:"col"`
	Msg     string   `json:"msg"`
}

// TestSourceAgreesWithCPython runs every table-test source through the
// sandbox image's CPython 3.13: what it parses must parse here with the
// same imports, and what it rejects as a syntax error must be rejected on
// the same line.
func TestSourceAgreesWithCPython(t *testing.T) {
	dockertest.RequireImage(t, sandboxImage)
	var srcs [][]byte
	for _, tt := range sourceTests {
		srcs = append(srcs, []byte(tt.src))
	}
	var errIdx []int
	for i, tt := range errorTests {
		if tt.want.Kind == "syntax" {
			errIdx = append(errIdx, i)
			srcs = append(srcs, []byte(tt.src))
		}
	}
	// testdata/snippets.json holds edge cases of the 3.5-3.13 grammar;
	// CPython decides at test time which of them are valid.
	var snippets []string
	raw, err := os.ReadFile("testdata/snippets.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &snippets); err != nil {
		t.Fatal(err)
	}
	snipAt := len(srcs)
	for _, s := range snippets {
		srcs = append(srcs, []byte(s))
	}
	in, err := json.Marshal(srcs) // []byte encodes as base64
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "run", "-i", "--rm", "--network", "none", "--label", "python-docker-mcp.test=1", sandboxImage, "python3", "-c", snippetScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, stderr.String())
	}
	var results []snippetResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("decode CPython output: %v", err)
	}
	if len(results) != len(srcs) {
		t.Fatalf("CPython gave %d results for %d sources", len(results), len(srcs))
	}
	for i, tt := range sourceTests {
		r := results[i]
		if !r.OK {
			t.Errorf("%s: CPython rejects %q: line %d col %d: %s", tt.name, tt.src, r.Line, r.Col, r.Msg)
			continue
		}
		f, err := Source([]byte(tt.src), Options{})
		if err != nil {
			t.Errorf("%s: Source: %v", tt.name, err)
			continue
		}
		var got []string
		for _, imp := range f.Imports {
			got = append(got, importSummary(imp))
		}
		sort.Strings(got)
		if diff := cmp.Diff(r.Imports, got, cmp.Transformer("nilEmpty", nilEmpty)); diff != "" {
			t.Errorf("%s: imports differ from CPython (-cpython +gate):\n%s", tt.name, diff)
		}
	}
	overAccepted := 0
	for k, s := range snippets {
		r := results[snipAt+k]
		f, err := Source([]byte(s), Options{})
		switch {
		case r.OK && err != nil:
			t.Errorf("CPython parses %q, the gate rejects it: %v", s, err)
		case r.OK:
			var got []string
			for _, imp := range f.Imports {
				got = append(got, importSummary(imp))
			}
			sort.Strings(got)
			if diff := cmp.Diff(r.Imports, got, cmp.Transformer("nilEmpty", nilEmpty)); diff != "" {
				t.Errorf("%q: imports differ from CPython (-cpython +gate):\n%s", s, diff)
			}
		case err == nil:
			// Invalid code the gate lets through: CPython refuses to
			// run it, so it cannot hide anything; listed for the record.
			overAccepted++
			t.Logf("accepted although CPython rejects it (%s): %q", r.Msg, s)
		}
	}
	t.Logf("%d snippets: %d invalid ones accepted", len(snippets), overAccepted)
	for k, i := range errIdx {
		tt, r := errorTests[i], results[len(sourceTests)+k]
		if r.OK {
			t.Errorf("%s: CPython parses %q, the gate rejects it", tt.name, tt.src)
			continue
		}
		if r.Line != tt.want.Line {
			t.Errorf("%s: CPython reports line %d col %d (%s), the gate line %d col %d", tt.name, r.Line, r.Col, r.Msg, tt.want.Line, tt.want.Col)
		} else if r.Col != tt.want.Col {
			t.Logf("%s: CPython reports col %d (%s), the gate col %d", tt.name, r.Col, r.Msg, tt.want.Col)
		}
	}
}

func importSummary(i Import) string {
	return i.Module + ":" + itoa(i.Level) + "@" + itoa(i.Line) + ":" + itoa(i.Col)
}

func itoa(n int) string { return strconv.Itoa(n) }

func nilEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
