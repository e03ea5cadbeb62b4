package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// fileBytes decodes read-file's content by its encoding.
func fileBytes(t *testing.T, sc map[string]any) []byte {
	t.Helper()
	content, _ := sc["content"].(string)
	if sc["encoding"] == "base64" {
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			t.Fatalf("read-file: base64 content: %v", err)
		}
		return b
	}
	return []byte(content)
}

// TestFilesInParts moves a file of about 10 MiB into a persistent session
// with write-file and appends of one call's limit each, reads it back with
// read-file at offsets, and compares hashes (and the session's own hash of
// it); the whole-file paths that cannot carry it say which limit they hit.
func TestFilesInParts(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "pool.enabled=false"})
	res := c.call(t, "execute-persistent", map[string]any{"code": "import hashlib"})
	id, _ := structured(t, res)["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("new session: %q", text(res))
	}
	defer c.call(t, "cleanup-session", map[string]any{"session_id": id})

	// Binary (not UTF-8) and not a multiple of the part size.
	want := make([]byte, 10<<20+12345)
	for i := range want {
		want[i] = byte(i*131 + i>>11)
	}
	const part = 1 << 20 // max(limits.max_code_bytes, 1 MiB) by default
	for off := 0; off < len(want); off += part {
		chunk := want[off:min(off+part, len(want))]
		args := map[string]any{"session_id": id, "path": "in/big.bin", "content": base64.StdEncoding.EncodeToString(chunk), "encoding": "base64"}
		if off > 0 {
			args["append"] = true
		}
		res, prog := c.callWithProgress(t, "write-file", args)
		sc := structured(t, res)
		if res.IsError || sc["total_size"] != float64(off+len(chunk)) || sc["size"] != float64(len(chunk)) {
			t.Fatalf("write-file at %d: %q %v", off, text(res), sc)
		}
		if len(prog) != 1 || !strings.Contains(prog[0], fmt.Sprintf("the file is %d bytes", off+len(chunk))) {
			t.Errorf("progress of write-file at %d: %q", off, prog)
		}
	}
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "hashlib.sha256(open('in/big.bin', 'rb').read()).hexdigest()"})
	if got, _ := structured(t, res)["result"].(string); got != fmt.Sprintf("'%x'", sha256.Sum256(want)) {
		t.Errorf("the session's hash of the file: %q, want %x", got, sha256.Sum256(want))
	}

	var got []byte
	calls := 0
	for off := 0; ; calls++ {
		res, prog := c.callWithProgress(t, "read-file", map[string]any{"session_id": id, "path": "/workspace/in/big.bin", "offset": off, "length": 3 << 20})
		sc := structured(t, res)
		if res.IsError || sc["offset"] != float64(off) || sc["total_size"] != float64(len(want)) {
			t.Fatalf("read-file at %d: %q", off, text(res))
		}
		b := fileBytes(t, sc)
		got = append(got, b...)
		off += len(b)
		if sc["next_offset"] != float64(off) {
			t.Fatalf("read-file: next_offset %v, want %d", sc["next_offset"], off)
		}
		if len(prog) != 1 || !strings.Contains(prog[0], fmt.Sprintf("%d of %d bytes", off, len(want))) {
			t.Errorf("progress of read-file at %d: %q", off, prog)
		}
		if sc["more"] != true {
			break
		}
		if !strings.Contains(text(res), fmt.Sprintf("call read-file again with offset %d", off)) {
			t.Errorf("read-file's text does not say where to go on: %q", text(res))
		}
	}
	if sha256.Sum256(got) != sha256.Sum256(want) || calls != 3 {
		t.Fatalf("read back %d bytes in %d calls (hash %x), want %d bytes in 4 calls (hash %x)", len(got), calls+1, sha256.Sum256(got), len(want), sha256.Sum256(want))
	}

	// Without offset and length, the old arguments: the first part, and
	// the way on.
	res = c.call(t, "read-file", map[string]any{"session_id": id, "path": "in/big.bin"})
	if sc := structured(t, res); res.IsError || sc["more"] != true || sc["size"] != float64(4<<20) || sc["next_offset"] != float64(4<<20) {
		t.Errorf("read-file without offset: %q", text(res))
	}
	// One call's content over the per-call limit: named, with the way out.
	res = c.call(t, "write-file", map[string]any{"session_id": id, "path": "x.bin", "content": base64.StdEncoding.EncodeToString(want[:part+1]), "encoding": "base64"})
	t.Logf("one call past the per-call limit: %s", text(res))
	if msg := text(res); !res.IsError || strings.Contains(msg, "invalid path") || !strings.Contains(msg, "limits.max_code_bytes") ||
		!strings.Contains(msg, fmt.Sprintf("at most %d bytes", part)) || !strings.Contains(msg, "append: true") {
		t.Errorf("write-file of %d bytes: %q", part+1, msg)
	}
	// resources/read returns whole files only, up to outputs.max_stream_bytes.
	_, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "sandbox://" + id + "/in/big.bin"})
	t.Logf("resources/read of the whole file: %v", err)
	if err == nil || strings.Contains(err.Error(), "invalid path") || !strings.Contains(err.Error(), "outputs.max_stream_bytes") || !strings.Contains(err.Error(), "offset") {
		t.Errorf("resources/read of a 10 MiB file: %v", err)
	}
}

// TestFileLimitsAreNamed checks that a write past limits.max_file_bytes
// and one that does not fit the workspace tmpfs are refused whole with an
// error naming the limit, and that a read of a file past the cap is too.
func TestFileLimitsAreNamed(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", []string{"--set", "pool.enabled=false", "--set", "limits.max_file_bytes=2m", "--set", "docker.workspace_size=3584k"})
	res := c.call(t, "execute-persistent", map[string]any{"code": "1"})
	id, _ := structured(t, res)["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("new session: %q", text(res))
	}
	defer c.call(t, "cleanup-session", map[string]any{"session_id": id})
	mib := strings.Repeat("x", 1<<20)
	write := func(path string, appendTo bool, content string) *sdk.CallToolResult {
		return c.call(t, "write-file", map[string]any{"session_id": id, "path": path, "content": content, "append": appendTo})
	}
	size := func(path string) any {
		return structured(t, c.call(t, "read-file", map[string]any{"session_id": id, "path": path, "length": 1}))["total_size"]
	}
	for i := range 2 {
		if res := write("f.txt", i > 0, mib); res.IsError {
			t.Fatalf("write-file %d: %q", i, text(res))
		}
	}
	res = write("f.txt", true, "y")
	t.Logf("append past the cap: %s", text(res))
	if msg := text(res); !res.IsError || strings.Contains(msg, "invalid path") || !strings.Contains(msg, "limits.max_file_bytes") ||
		!strings.Contains(msg, fmt.Sprintf("would be %d bytes", 2<<20+1)) || !strings.Contains(msg, "nothing was written") {
		t.Errorf("an append past limits.max_file_bytes: %q", msg)
	}
	if got := size("f.txt"); got != float64(2<<20) {
		t.Errorf("after the refused append f.txt is %v bytes, want %d", got, 2<<20)
	}
	// 3.5 MiB of tmpfs with 2 MiB used: 1 MiB fits, another does not.
	if res := write("g.txt", false, mib); res.IsError {
		t.Fatalf("write-file g.txt: %q", text(res))
	}
	res = write("g.txt", true, mib)
	t.Logf("append past the workspace: %s", text(res))
	if msg := text(res); !res.IsError || !strings.Contains(msg, "docker.workspace_size") || !strings.Contains(msg, "full") {
		t.Errorf("an append past the workspace tmpfs: %q", msg)
	}
	if got := size("g.txt"); got != float64(1<<20) {
		t.Errorf("after the refused append g.txt is %v bytes, want %d", got, 1<<20)
	}
	// A file the code made past the cap cannot be read out.
	res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import os\nos.remove('g.txt')\nos.remove('f.txt')\nopen('h.bin', 'wb').write(b'z' * (2 << 20))\nopen('h.bin', 'ab').write(b'z')"})
	if res.IsError {
		t.Fatalf("making h.bin: %q", text(res))
	}
	res = c.call(t, "read-file", map[string]any{"session_id": id, "path": "h.bin", "offset": 0, "length": 10})
	t.Logf("read past the cap: %s", text(res))
	if msg := text(res); !res.IsError || strings.Contains(msg, "invalid path") || !strings.Contains(msg, "limits.max_file_bytes") || !strings.Contains(msg, fmt.Sprintf("%d bytes", 2<<20+1)) {
		t.Errorf("read-file of a file past limits.max_file_bytes: %q", msg)
	}
}
