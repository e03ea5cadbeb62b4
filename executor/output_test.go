package executor

import "testing"

func TestTransientReturnsSmallFiles(t *testing.T) {
	e, _ := newExec(t, nil)
	code := "open('small.csv', 'w').write('a,b\\n1,2\\n')\nopen('big.bin', 'wb').write(b'x' * (200 << 10))\nopen('bin.dat', 'wb').write(bytes(range(256)))\n"
	res := transient(t, e, Request{Code: code})
	wantStatus(t, res, "ok")
	got := map[string]string{}
	for _, f := range res.FileData {
		got[f.Path] = string(f.Data)
	}
	if len(res.Files) != 3 || len(got) != 2 || got["small.csv"] != "a,b\n1,2\n" || len(got["bin.dat"]) != 256 {
		t.Errorf("files %v, data of %v; want small.csv and bin.dat read back, big.bin (200 KiB) left out", res.Files, keys(got))
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
