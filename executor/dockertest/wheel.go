package dockertest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteWheel writes a pure-Python wheel of package name (a module of the
// same name holding VALUE = value) into dir: a wheelhouse for install tests,
// as there is no package index to install from.
func WriteWheel(t testing.TB, dir, name, version, value string) {
	t.Helper()
	WriteWheelRequiring(t, dir, name, version, value)
}

// WriteWheelRequiring is WriteWheel with dependencies: each entry of
// requires becomes a Requires-Dist line of the metadata (a PEP 508
// requirement, e.g. "pdmc>=2" or "extra1; extra == 'x'").
func WriteWheelRequiring(t testing.TB, dir, name, version, value string, requires ...string) {
	t.Helper()
	info := name + "-" + version + ".dist-info"
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := [][2]string{
		{name + "/__init__.py", "VALUE = " + value + "\n"},
		{info + "/METADATA", meta},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: python-docker-mcp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "/RECORD,,\n")
	files = append(files, [2]string{info + "/RECORD", record.String()})
	f, err := os.Create(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for _, file := range files {
		w, err := z.Create(file[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(file[1]))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
