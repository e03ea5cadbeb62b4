package analyze

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

const sandboxImage = "python-docker-mcp-sandbox:latest"

// importsScript prints, for every .py file under argv[1], whether CPython
// parses it and its imports as [module, level, line, col].
const importsScript = `
import ast, json, os, sys
root = sys.argv[1]
for dp, dn, fn in os.walk(root):
    dn.sort()
    for f in sorted(fn):
        if not f.endswith('.py'):
            continue
        p = os.path.join(dp, f)
        rel = os.path.relpath(p, root)
        try:
            with open(p, 'rb') as fh:
                t = ast.parse(fh.read())
        except Exception as e:
            print(json.dumps({"path": rel, "ok": False, "err": type(e).__name__ + ": " + str(e)}))
            continue
        imps = []
        for n in ast.walk(t):
            if isinstance(n, ast.Import):
                for a in n.names:
                    imps.append([a.name, 0, n.lineno, n.col_offset])
            elif isinstance(n, ast.ImportFrom):
                imps.append([n.module or "", n.level, n.lineno, n.col_offset])
        imps.sort()
        print(json.dumps({"path": rel, "ok": True, "imports": imps}))
`

type cpythonFile struct {
	Path    string  `json:"path"`
	OK      bool    `json:"ok"`
	Err     string  `json:"err"`
	Imports [][]any `json:"imports"`
}

func parseScriptOutput(t *testing.T, out []byte) []cpythonFile {
	t.Helper()
	var files []cpythonFile
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var f cpythonFile
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("decode CPython output line %q: %v", sc.Text(), err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("CPython listed no files")
	}
	return files
}

func importKey(module string, level, line, col int) string {
	return fmt.Sprintf("%s|%d|%d|%d", module, level, line, col)
}

// compareStdlib runs the gate on every file CPython looked at and reports
// the files where the two disagree.
func compareStdlib(t *testing.T, label string, files []cpythonFile, read func(string) ([]byte, error)) {
	t.Helper()
	same, precheckRefused := 0, 0
	var diffs []string
	for _, f := range files {
		src, err := read(f.Path)
		if err != nil {
			t.Fatalf("read %s: %v", f.Path, err)
		}
		facts, err := Source(src, Options{MaxBytes: 64 << 20})
		var gateErr *Error
		if err != nil && !errors.As(err, &gateErr) {
			t.Fatalf("%s: error of type %T: %v", f.Path, err, err)
		}
		switch {
		case !f.OK && err != nil:
			same++
		case !f.OK:
			diffs = append(diffs, fmt.Sprintf("%s: CPython rejects (%s), gate accepts", f.Path, f.Err))
		case err != nil && (gateErr.Kind == "coding" || gateErr.Kind == "encoding"):
			// a declared non-UTF-8 encoding: refused on purpose
			precheckRefused++
		case err != nil:
			diffs = append(diffs, fmt.Sprintf("%s: CPython parses, gate rejects: %v", f.Path, err))
		default:
			want := make([]string, 0, len(f.Imports))
			for _, imp := range f.Imports {
				want = append(want, importKey(imp[0].(string), int(imp[1].(float64)), int(imp[2].(float64)), int(imp[3].(float64))))
			}
			got := make([]string, 0, len(facts.Imports))
			for _, imp := range facts.Imports {
				got = append(got, importKey(imp.Module, imp.Level, imp.Line, imp.Col))
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				diffs = append(diffs, fmt.Sprintf("%s: imports differ:\n  got  %v\n  want %v", f.Path, got, want))
				continue
			}
			same++
		}
	}
	t.Logf("%s: %d of %d files identical to CPython (%d more refused on purpose: non-UTF-8 coding declaration)",
		label, same, len(files)-precheckRefused, precheckRefused)
	for i, d := range diffs {
		if i == 40 {
			t.Errorf("... and %d more", len(diffs)-40)
			break
		}
		t.Error(d)
	}
}

func TestDifferentialHostStdlib(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: parses the whole standard library")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	rootOut, err := exec.Command(python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		t.Fatalf("find host stdlib: %v", err)
	}
	root := strings.TrimSpace(string(rootOut))
	out, err := exec.Command(python, "-c", importsScript, root).Output()
	if err != nil {
		t.Fatalf("run CPython: %v", err)
	}
	files := parseScriptOutput(t, out)
	compareStdlib(t, "host "+root, files, func(p string) ([]byte, error) {
		return os.ReadFile(filepath.Join(root, p))
	})
}

func TestDifferentialSandboxStdlib(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: parses the whole standard library")
	}
	dockertest.RequireImage(t, sandboxImage)
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("docker", append([]string{"run", "--rm", "--network", "none", "--label", "python-docker-mcp.test=1", sandboxImage}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker run %v: %v: %s", args, err, stderr.String())
		}
		return out
	}
	// The standard library and the third-party packages the image ships
	// (numpy, pandas, scipy, sympy, matplotlib, scikit-learn, ...).
	for _, root := range []string{"/usr/lib/python3.13", "/usr/lib/python3/dist-packages"} {
		t.Run(filepath.Base(root), func(t *testing.T) { diffImageDir(t, run, root) })
	}
}

func diffImageDir(t *testing.T, run func(...string) []byte, root string) {
	files := parseScriptOutput(t, run("python3", "-c", importsScript, root))
	sources := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(run("tar", "-c", "-h", "-C", root, ".")))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if !strings.HasSuffix(h.Name, ".py") {
			continue
		}
		if h.Typeflag == tar.TypeLink { // tar -h stores a file seen twice as a hard link
			sources[filepath.Clean(h.Name)] = sources[filepath.Clean(h.Linkname)]
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		sources[filepath.Clean(h.Name)] = b
	}
	compareStdlib(t, "sandbox image "+root, files, func(p string) ([]byte, error) {
		b, ok := sources[filepath.Clean(p)]
		if !ok {
			return nil, fmt.Errorf("not in the tar stream")
		}
		return b, nil
	})
}
