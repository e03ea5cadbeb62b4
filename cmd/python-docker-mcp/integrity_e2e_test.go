package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// The worker cannot rewrite itself: each attack below reached the worker's
// memory or called libc for the code on main at 32689de. Each must fail
// with a message that says why, and the server must go on serving.

const nativePolicy = "policy.capabilities.native_code is false"

// attack runs code in a transient sandbox and wants an error whose text
// holds every string of want, and stdout holding every line of out.
func attack(t *testing.T, c *mcpClient, name, code string, want, out []string) {
	t.Helper()
	res := c.call(t, "execute-transient", map[string]any{"code": code})
	got := text(res)
	sc := structured(t, res)
	if !res.IsError || sc["status"] != "error" {
		t.Errorf("%s: status %v, isError %v: %q; want an error", name, sc["status"], res.IsError, got)
		return
	}
	// The text shows the output and the traceback; the structured error's
	// message names the policy where the kernel's errno does not.
	e, _ := sc["error"].(map[string]any)
	msg, _ := e["message"].(string)
	for _, w := range want {
		if !strings.Contains(got, w) && !strings.Contains(msg, w) {
			t.Errorf("%s: %q (message %q) lacks %q", name, got, msg, w)
		}
	}
	for _, o := range out {
		if !strings.Contains(got, "\n"+o+"\n") {
			t.Errorf("%s: %q lacks the output line %q", name, got, o)
		}
	}
}

// stillServes checks the server answers a plain call after the attacks.
func stillServes(t *testing.T, c *mcpClient) {
	t.Helper()
	res := c.call(t, "execute-transient", map[string]any{"code": "print(6 * 7)"})
	if res.IsError || !strings.Contains(text(res), "42") {
		t.Errorf("a plain call after the attacks: %q, want 42", text(res))
	}
}

func TestWorkerStaysNonDumpable(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)

	t.Run("native code allowed: prctl cannot make the worker dumpable", func(t *testing.T) {
		// The default configuration grants native_code: ctypes may call
		// libc, and the kernel filter still refuses the way back.
		c := stdioClient(t, "", nil)
		code := `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("oom_score_adj", open("/proc/self/oom_score_adj").read().strip())
print("prctl", libc.prctl(4, 1, 0, 0, 0), ctypes.get_errno(), "dumpable", libc.prctl(3, 0, 0, 0, 0))
d = os.open("/proc/self", os.O_RDONLY)
try:
    os.close(os.open("mem", os.O_RDWR, dir_fd=d))
    print("kernel: opened")
except OSError as e:
    print("kernel: errno", e.errno)
open("/proc/self/mem", "r+b")
`
		attack(t, c, "prctl(PR_SET_DUMPABLE) then /proc/self/mem", code,
			[]string{"PermissionError", "/proc/self/mem", "non-dumpable"},
			[]string{"oom_score_adj 1000", "prctl -1 1 dumpable 0", "kernel: errno 13"})
		stillServes(t, c)
		c.cs.Close()
		waitNoSandboxes(t, cli, c.pid, "prctl attack")
	})

	t.Run("native code denied", func(t *testing.T) {
		c := stdioClient(t, "", []string{"--set", "policy.capabilities.native_code=false"})
		// Pure Python, no FFI: the worker's memory through /proc.
		attack(t, c, "/proc/self/mem from pure Python", `open("/proc/self/mem", "r+b")`,
			[]string{"PermissionError", "/proc/self/mem", "non-dumpable"}, nil)
		attack(t, c, "/proc/self/task/N/mem by a relative path", `import os, threading
d = os.open("/proc/self/task/%d" % threading.get_native_id(), os.O_RDONLY)
try:
    os.open("mem", os.O_RDWR, dir_fd=d)
except OSError as e:
    print("kernel: errno", e.errno)
    raise
`, []string{"PermissionError"}, []string{"kernel: errno 13"})

		// Executable memory from /dev/zero: shared read+exec (a second,
		// writable view of it comes from mremap), private read+write+exec.
		code := `import mmap, os
fd = os.open("/dev/zero", os.O_RDWR)
for flags, prot in ((mmap.MAP_SHARED, 5), (mmap.MAP_PRIVATE, 7), (mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, 7)):
    try:
        mmap.mmap(-1 if flags & mmap.MAP_ANONYMOUS else fd, 4096, flags, prot)
        print("mapped", flags, prot)
    except OSError as e:
        print("refused", flags, prot, e.errno)
for line in open("/proc/self/mounts"):
    f = line.split()
    if f[1] in ("/tmp", "/workspace", "/dev/shm"):
        print(f[1], "noexec" in f[3].split(","))
mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
`
		attack(t, c, "mmap of /dev/zero with PROT_EXEC", code,
			[]string{"PermissionError", nativePolicy},
			[]string{"refused 1 5 1", "refused 2 7 1", "refused 34 7 1", "/tmp True", "/workspace True", "/dev/shm True"})
		stillServes(t, c)
		c.cs.Close()
		waitNoSandboxes(t, cli, c.pid, "native code denied")
	})
}

// TestFFIRefusedWhateverTheFrame: with ctypes blocked (so native_code is
// denied) a library's frame between the code and ctypes proves nothing.
func TestFFIRefusedWhateverTheFrame(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "policy.profile=strict", "--set", "blocked_modules=ctypes"})
	routes := []struct{ name, code string }{
		{"ctypes and libc symbols through string.Formatter.get_field, CDLL and the call through functools.singledispatch",
			`import functools, string, numpy
ct = string.Formatter().get_field("0.ctypeslib.ctypes", (numpy,), {})[0]
libc = functools.singledispatch(ct.CDLL)(None)
getpid = string.Formatter().get_field("0.getpid", (libc,), {})[0]
print(functools.singledispatch(getpid)(0))
`},
		{"a symbol looked up by string.Formatter.get_field",
			`import functools, string, numpy
fn = string.Formatter().get_field("0.ctypeslib.ctypes.pythonapi.Py_GetVersion", (numpy,), {})[0]
print(functools.singledispatch(fn)(0))
`},
	}
	for _, r := range routes {
		attack(t, c, r.name, r.code, []string{"refused at run time", nativePolicy}, nil)
	}
	stillServes(t, c)
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "FFI routes")

	// The standard profile lets a computed import through the gate (with a
	// warning); native_code denied by the operator's word, ctypes in no list.
	c = stdioClient(t, "", []string{"--set", "policy.capabilities.native_code=false"})
	attack(t, c, "a computed import of ctypes by a library", `import functools, importlib
name = "ctyp" + "es"
functools.singledispatch(importlib.import_module)(name).CDLL(None).getpid()
`, []string{"refused at run time", nativePolicy}, nil)
	stillServes(t, c)
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "computed import")
}

// TestInstalledCodeIsNotTrusted: what install-package brought in runs as
// the code's own, not as the image's libraries.
func TestInstalledCodeIsNotTrusted(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// The package's module body: VALUE, then functions that call libc
	// for whoever imports them.
	dockertest.WriteWheel(t, dir, "pdmffi", "1.0", `1
def pid():
    import ctypes
    return ctypes.CDLL(None).getpid()
def computed():
    import importlib
    return importlib.import_module("ctypes").CDLL(None).getpid()
`)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("package:\n  find_links: ["+strconv.Quote(dir)+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := stdioClient(t, "", []string{"--config", cfgFile, "--set", "policy.profile=strict", "--set", "blocked_modules=ctypes"})
	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	if res.IsError {
		t.Fatalf("create session: %q", text(res))
	}
	id, _ := structured(t, res)["session_id"].(string)
	res = c.call(t, "install-package", map[string]any{"package_name": "pdmffi", "version": "1.0", "session_id": id})
	if res.IsError || structured(t, res)["status"] != "ok" {
		t.Fatalf("install pdmffi: %q", text(res))
	}
	for _, fn := range []string{"pid", "computed"} {
		res := c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmffi\npdmffi." + fn + "()"})
		got := text(res)
		if !res.IsError || !strings.Contains(got, "refused at run time") || !strings.Contains(got, nativePolicy) {
			t.Errorf("pdmffi.%s() from the package volume: %q; want a refusal naming %s", fn, got, nativePolicy)
		}
	}
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmffi\npdmffi.VALUE + x"})
	if res.IsError || !strings.Contains(text(res), "result: 2") {
		t.Errorf("the package's plain Python after the refusals: %q, want 2", text(res))
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "installed code")
}

// TestScienceStackWithoutNativeCode: the image's libraries import and work
// under the default configuration (native_code granted) and under strict
// with ctypes blocked (native_code denied); only what calls ctypes itself
// (scikit-learn's KMeans limits BLAS threads through threadpoolctl) needs
// native_code, and says so.
func TestScienceStackWithoutNativeCode(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	const stack = `import numpy as np, pandas as pd, scipy.linalg, scipy.optimize, scipy.integrate
import matplotlib.pyplot as plt
from sklearn.linear_model import LogisticRegression
X = np.random.RandomState(0).randn(200, 3)
y = (X[:, 0] > 0).astype(int)
df = pd.DataFrame(X, columns=list("abc"))
df.plot()
print(LogisticRegression().fit(X, y).score(X, y) > 0.9, df.groupby(df.a > 0).b.count().sum())
print(scipy.linalg.inv(np.eye(3)).sum(), round(scipy.integrate.quad(lambda x: x * x, 0, 3)[0], 6), round(scipy.optimize.minimize_scalar(lambda x: (x - 2) ** 2).x, 3))
`
	const kmeans = "import numpy as np\nfrom sklearn.cluster import KMeans\nprint(KMeans(2, n_init=1, random_state=0).fit(np.eye(4)).inertia_ >= 0)"
	for _, tc := range []struct {
		name       string
		args       []string
		kmeansFail bool
	}{
		{"default", []string{"--set", "docker.timeout=120s"}, false},
		{"strict with ctypes blocked", []string{"--set", "policy.profile=strict", "--set", "blocked_modules=ctypes", "--set", "docker.timeout=120s"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := stdioClient(t, "", tc.args)
			res := c.call(t, "execute-transient", map[string]any{"code": stack})
			if res.IsError || !strings.Contains(text(res), "True 200\n3.0 9.0 2.0\n") {
				t.Errorf("numpy, pandas, scipy, matplotlib, sklearn: %q", text(res))
			}
			res = c.call(t, "execute-transient", map[string]any{"code": kmeans})
			switch got := text(res); {
			case tc.kmeansFail && (!res.IsError || !strings.Contains(got, nativePolicy)):
				t.Errorf("KMeans without native_code: %q, want the policy's refusal", got)
			case !tc.kmeansFail && (res.IsError || !strings.Contains(got, "True")):
				t.Errorf("KMeans with native_code: %q, want True", got)
			}
			c.cs.Close()
			waitNoSandboxes(t, cli, c.pid, tc.name)
		})
	}
}

// TestInstalledExtensionRefused: without native_code an extension module
// that install-package brought in is refused before it is loaded.
func TestInstalledExtensionRefused(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// Not an ELF file: loading it would fail with "invalid ELF header".
	writeWheel(t, dir, "pdmext", map[string]string{"pdmext/__init__.py": "", "pdmext/_native.so": "not an ELF file\n"})
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("package:\n  find_links: ["+strconv.Quote(dir)+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := stdioClient(t, "", []string{"--config", cfgFile, "--set", "policy.capabilities.native_code=false"})
	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	if res.IsError {
		t.Fatalf("create session: %q", text(res))
	}
	id, _ := structured(t, res)["session_id"].(string)
	res = c.call(t, "install-package", map[string]any{"package_name": "pdmext", "version": "1.0", "session_id": id})
	if res.IsError || structured(t, res)["status"] != "ok" {
		t.Fatalf("install pdmext: %q", text(res))
	}
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmext._native"})
	if got := text(res); !res.IsError || !strings.Contains(got, "ModuleBlockedError") || !strings.Contains(got, "_native.so is native code from /opt/pdm-packages") || !strings.Contains(got, nativePolicy) {
		t.Errorf("an extension module from the package volume: %q; want a refusal naming %s", got, nativePolicy)
	}
	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "installed extension")
}

// writeWheel writes NAME-1.0-py3-none-any.whl into dir holding files.
func writeWheel(t *testing.T, dir, name string, files map[string]string) {
	t.Helper()
	info := name + "-1.0.dist-info"
	files[info+"/METADATA"] = "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"
	files[info+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: python-docker-mcp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	for path, body := range files {
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", path, base64.RawURLEncoding.EncodeToString(sum[:]), len(body))
	}
	record.WriteString(info + "/RECORD,,\n")
	files[info+"/RECORD"] = record.String()
	f, err := os.Create(filepath.Join(dir, name+"-1.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for path, body := range files {
		w, err := z.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
