package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the structs")

func ptr[T any](v T) *T { return &v }

// goldenGuard is the guard of the golden run; the golden preload arms a
// spare worker with it (the runner's tests check both give one key).
var goldenGuard = Guard{
	Capabilities: &Capabilities{Sockets: []string{"unix"}, NativeCode: true},
	Modules: ModuleRules{
		Allowed: []string{},
		Blocked: []string{"subprocess", "socket"},
		Calls:   []CallGuard{{Name: "eval", Entry: "eval", Event: "builtins.eval", Direct: true}},
	},
}

// goldenFrames are the requests the executor builds, one of each kind, as
// testdata/<name>.json holds them; the runner's tests
// (executor/runner/tests) read the same files.
var goldenFrames = map[string]Request{
	"run": &Run{
		Header:    Header{ID: 3, Nonce: "6e6f6e6365"},
		Code:      "import os\nfrom json import dumps as d, loads\nx = 1\nd({'s': x + y})",
		Transient: true,
		Imports: []Import{
			{Module: "os", Line: 1},
			{Module: "json", From: true, Names: []Alias{{Name: "dumps", AsName: "d"}, {Name: "loads"}}, Line: 2},
		},
		Modules:      goldenGuard.Modules,
		Capabilities: goldenGuard.Capabilities,
		Limits: RunLimits{TimeoutMS: 30000, MaxOutputBytes: 1 << 20, MaxStateBytes: 1 << 20, MaxImageBytes: 4 << 20,
			MaxImages: 16, GraceMS: 1000},
		State:     json.RawMessage(`{"y":2}`),
		StateKeys: []string{"x"},
	},
	"run_bash": &Run{
		Header:   Header{ID: 1, Nonce: "62617368"},
		Code:     "echo hi",
		Language: "bash",
		Imports:  []Import{},
		Modules:  ModuleRules{Allowed: []string{}, Blocked: []string{}},
		Limits:   RunLimits{TimeoutMS: 5000, MaxOutputBytes: 1 << 20, MaxStateBytes: 1 << 20, MaxImageBytes: 4 << 20, MaxImages: 16, GraceMS: 1000},
	},
	"run_live": &Run{
		Header:  Header{ID: 2, Nonce: "6c697665"},
		Code:    "print('a')",
		Imports: []Import{},
		Modules: ModuleRules{Allowed: []string{}, Blocked: []string{}},
		Limits:  RunLimits{TimeoutMS: 5000, MaxOutputBytes: 1 << 20, MaxStateBytes: 1 << 20, MaxImageBytes: 4 << 20, MaxImages: 16, GraceMS: 1000},
		Stream:  true,
	},
	"preload":   &Preload{Header: Header{ID: 1, Nonce: "70"}, Modules: []string{"json"}, Arm: &goldenGuard, RunnerCode: true},
	"parse":     &Parse{Header: Header{ID: 2, Nonce: "71"}, Code: "def f(:\n    pass\n"},
	"read":      &Read{Header: Header{ID: 5, Nonce: "72"}, Path: "out/a.txt", MaxBytes: 1 << 20},
	"read_part": &Read{Header: Header{ID: 6, Nonce: "73"}, Path: "out/a.txt", Offset: 2, Length: ptr[int64](3), MaxBytes: 1 << 20, MaxFileBytes: 64 << 20},
	"write":     &Write{Header: Header{ID: 4, Nonce: "74"}, Path: "out/a.txt", Data: []byte("hello"), Append: false, MaxFileBytes: 64 << 20},
	"list":      &List{Header: Header{ID: 7, Nonce: "75"}, Path: "."},
	"interrupt": &Interrupt{Header: Header{ID: 3}},
	"exit":      &Exit{},
	"ping":      &Ping{Header: Header{ID: 8, Nonce: "76"}},
	"reset":     &Reset{Header: Header{ID: 9, Nonce: "77"}, Arm: &goldenGuard},
}

// goldenPNG is a 2×1 grey PNG.
var goldenPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAAAAADRSSBWAAAAC0lEQVR4nGNg+A8AAQIBAEK+vGgAAAAASUVORK5CYII=")

// goldenReplies are replies of the runner, as testdata/<name>.json holds
// them; the runner's tests check that its reply checks pass them unchanged
// and that a run of theirs gives the same shape.
var goldenReplies = map[string]*Reply{
	"reply_rich": {
		ID: 3, Nonce: "6e6f6e6365", Status: "ok", Stdout: "   a\n0  1\n", Result: ptr("   a\n0  1"), State: json.RawMessage(`{}`),
		Rich: []Rich{
			{MIME: MIMEHTML, Data: []byte("<table><tr><td>1</td></tr></table>"), From: RichFromDisplay, N: 1},
			{MIME: MIMESVG, Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`), From: RichFromDisplay, N: 2},
			{MIME: MIMEPNG, Data: goldenPNG, From: RichFromResult, Width: 2, Height: 1},
		},
		RichDropped: []RichDropped{
			{MIME: MIMEHTML, From: RichFromDisplay, N: 3, Bytes: 300000, Why: RichTooLarge, Limit: MaxRichBytes},
			{MIME: MIMEPNG, From: RichFromDisplay, N: 4, Why: RichFailed, Error: "ValueError: returned data that is not a PNG file"},
		},
		DurationMS: 12.5,
	},
}

// TestGoldenReplies: each reply marshals to its golden file, and the file
// decodes back to the same reply.
func TestGoldenReplies(t *testing.T) {
	for name, r := range goldenReplies {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, '\n')
		want, ok := golden(t, name, data)
		if !ok {
			continue
		}
		got, err := DecodeReply(want, r.ID, r.Nonce)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("%s decodes to another reply (-want +got):\n%s", name, diff)
		}
	}
}

// TestGoldenFrames: each request marshals to its golden file, byte for
// byte once indented, and carries the op its type stands for.
func TestGoldenFrames(t *testing.T) {
	ops := map[string]string{"run": OpRun, "run_bash": OpRun, "run_live": OpRun, "preload": OpPreload, "parse": OpParse, "read": OpRead,
		"read_part": OpRead, "write": OpWrite, "list": OpList, "interrupt": OpInterrupt, "exit": OpExit, "ping": OpPing, "reset": OpReset}
	for name, req := range goldenFrames {
		if got := req.Head().Op; got != ops[name] {
			t.Errorf("%s: op %q, want %q", name, got, ops[name])
		}
		var frame bytes.Buffer
		if err := WriteRequest(&frame, req); err != nil {
			t.Fatal(err)
		}
		data, err := ReadFrame(&frame, func() int64 { return MaxRequestFrame })
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := json.Indent(&got, data, "", "  "); err != nil {
			t.Fatal(err)
		}
		got.WriteByte('\n')
		golden(t, name, got.Bytes())
	}
	files, _ := filepath.Glob("testdata/*.json")
	if n := len(goldenFrames) + len(goldenReplies) + len(sandboxFrames); !*update && len(files) != n {
		t.Errorf("testdata holds %d frames, the tests build %d: a golden file without its struct", len(files), n)
	}
}

// sandboxFrames are frames the runner sends, as testdata/<name>.json holds
// them; the runner's tests check that its frames have these fields.
var sandboxFrames = map[string]any{
	"output": &Output{Op: OpOutput, ID: 2, Nonce: "6c697665", Stream: "stdout", Offset: 0, Bytes: 2, Data: "a\n"},
}

// TestGoldenSandboxFrames: each frame the runner sends marshals to its
// golden file and decodes back to itself.
func TestGoldenSandboxFrames(t *testing.T) {
	for name, frame := range sandboxFrames {
		data, err := json.MarshalIndent(frame, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, '\n')
		golden(t, name, data)
	}
	o, isOutput, err := DecodeOutput(mustRead(t, "testdata/output.json"), 2, "6c697665")
	if err != nil || !isOutput || *o != *sandboxFrames["output"].(*Output) {
		t.Errorf("DecodeOutput(output.json) = %+v, %v, %v; want the golden frame", o, isOutput, err)
	}
}

// golden compares data with testdata/<name>.json and returns the file's
// contents, or with -update writes data there (ok false: nothing to
// compare).
func golden(t *testing.T, name string, data []byte) (want []byte, ok bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return nil, false
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./executor/protocol -update to write it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("%s marshals to\n%s\nwant (%s)\n%s", name, data, path, want)
	}
	return want, true
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeOutput: a reply is no output frame; an output frame of
// another request, stream or with a bad length is an error.
func TestDecodeOutput(t *testing.T) {
	for _, tc := range []struct {
		frame          string
		output, failed bool
	}{
		{`{"id":2,"nonce":"n","status":"ok","stdout":"x"}`, false, false},
		{`{"op":"output","id":2,"nonce":"n","stream":"stdout","offset":0,"bytes":1,"data":"x"}`, true, false},
		{`{"op":"output","id":3,"nonce":"n","stream":"stdout","offset":0,"bytes":1,"data":"x"}`, true, true},
		{`{"op":"output","id":2,"nonce":"m","stream":"stdout","offset":0,"bytes":1,"data":"x"}`, true, true},
		{`{"op":"output","id":2,"nonce":"n","stream":"stdin","offset":0,"bytes":1,"data":"x"}`, true, true},
		{`{"op":"output","id":2,"nonce":"n","stream":"stderr","offset":-1,"bytes":1,"data":"x"}`, true, true},
		{`{"op":"output","id":2,"nonce":"n","stream":"stderr","offset":0,"bytes":1,"data":"xxxx"}`, true, true},
		{`not json`, false, true},
	} {
		_, isOutput, err := DecodeOutput([]byte(tc.frame), 2, "n")
		if isOutput != tc.output || (err != nil) != tc.failed {
			t.Errorf("DecodeOutput(%s) = output %v, err %v; want output %v, failed %v", tc.frame, isOutput, err, tc.output, tc.failed)
		}
	}
}
