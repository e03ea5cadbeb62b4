package executor

import "testing"

func TestStdlibPathOK(t *testing.T) {
	for p, want := range map[string]bool{
		"/usr/lib/python3.13":        true,
		"/usr/local/lib/python3.12":  true,
		"/opt/conda/lib/python3.11":  true,
		"/usr":                       false, // one level: too broad
		"/":                          false,
		"usr/lib/python3.13":         false,
		"/usr/lib/../lib/python3.13": false,
		"/usr/lib/python3.13/":       false,
		"/tmp/python3.13":            false,
		"/workspace/lib":             false,
		"/opt/pdm-packages/lib":      false,
		"/opt/pdm-packages":          false,
		"/etc/python3.13":            false,
		"/usr/bin/python3":           false,
		"/proc/self/cwd":             false,
		"/var/lib/python3.13":        false,
		"/dev/shm/python3.13":        false,
	} {
		if got := stdlibPathOK(p, "/workspace"); got != want {
			t.Errorf("stdlibPathOK(%q) = %v, want %v", p, got, want)
		}
	}
	// A mount over a directory that holds the working directory would
	// hide it.
	if stdlibPathOK("/home/sandbox", "/home/sandbox/work") {
		t.Error("a path above the working directory was accepted")
	}
}
