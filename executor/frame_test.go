package executor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/clip"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// The protocol's frame functions under the names these tests use.
const maxRequestFrame = protocol.MaxRequestFrame

var (
	errFrameTooLarge = protocol.ErrFrameTooLarge
	readFrame        = protocol.ReadFrame
	decodeReply      = protocol.DecodeReply
)

func frameOf(payload string, announced int) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(announced))
	copy(b[4:], payload)
	return b
}

func limitOf(n int64) func() int64 { return func() int64 { return n } }

func TestReadFrameLimit(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		limit   int64
		want    string
		wantErr error
	}{
		{name: "fits", in: frameOf(`{"id":1}`, 8), limit: 8, want: `{"id":1}`},
		{name: "announces more than the limit", in: frameOf(`{}`, 1<<31), limit: 1 << 20, wantErr: errFrameTooLarge},
		{name: "the largest length", in: frameOf(``, 1<<32-1), limit: 1 << 20, wantErr: errFrameTooLarge},
		{name: "short body", in: frameOf(`{"id"`, 100), limit: 1 << 20, wantErr: io.ErrUnexpectedEOF},
		{name: "short head", in: []byte{0, 0}, limit: 1 << 20, wantErr: io.ErrUnexpectedEOF},
		{name: "nothing", in: nil, limit: 1 << 20, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tt.in), limitOf(tt.limit))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("frame = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadFrameAsksTheLimitLate: the limit in force when the length
// arrives applies, not the one when the reader started waiting.
func TestReadFrameAsksTheLimitLate(t *testing.T) {
	r, w := io.Pipe()
	limit := int64(16)
	done := make(chan error, 1)
	go func() {
		_, err := readFrame(r, func() int64 { return limit })
		done <- err
	}()
	limit = 1 << 20 // set before the frame is written, as roundTrip does
	go w.Write(frameOf(strings.Repeat("x", 1000), 1000))
	if err := <-done; err != nil {
		t.Errorf("readFrame with the limit raised while waiting: %v", err)
	}
}

func TestDecodeReply(t *testing.T) {
	tests := []struct {
		name, in string
		wantErr  string
	}{
		{name: "valid", in: `{"id":7,"nonce":"n","status":"ok","stdout":"hi"}`},
		{name: "wrong id", in: `{"id":6,"nonce":"n","status":"ok"}`, wantErr: "wrong nonce or id"},
		{name: "wrong nonce", in: `{"id":7,"nonce":"m","status":"ok"}`, wantErr: "wrong nonce or id"},
		{name: "no nonce", in: `{"id":7,"status":"ok"}`, wantErr: "wrong nonce or id"},
		{name: "unknown status", in: `{"id":7,"nonce":"n","status":"done"}`, wantErr: "unknown status"},
		{name: "malformed", in: `{"id":7,"nonce":"n","status":"ok"`, wantErr: "undecodable"},
		{name: "not an object", in: `[1,2]`, wantErr: "undecodable"},
		{name: "wrong types", in: `{"id":"7","nonce":"n","status":"ok"}`, wantErr: "undecodable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeReply([]byte(tt.in), 7, "n")
			if tt.wantErr == "" {
				if err != nil || got == nil || got.Stdout != "hi" {
					t.Fatalf("decodeReply = %+v, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCapResult: the server re-applies every cap of a reply whatever the
// runner did.
func TestCapResult(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxOutputBytes = 1000
	cfg.Outputs.MaxStreamBytes = 1000 // streams are kept up to this cap
	cfg.Limits.MaxStateBytes = 100
	cfg.Limits.MaxImageBytes = 2000
	e := executorWith(ConfigFrom(cfg))
	big := strings.Repeat("é", 5000) // 10000 bytes
	res := big
	var images []Image
	for range 20 {
		images = append(images, Image{PNG: make([]byte, 300)})
	}
	files := make([]string, 3000)
	for i := range files {
		files[i] = strings.Repeat("f", 200)
	}
	r := &runnerResponse{
		Status: "ok", Stdout: big, Stderr: "short", Result: &res,
		Error:  &RunError{Type: strings.Repeat("T", 1000), Message: strings.Repeat("m", 1<<20), Traceback: big, Line: -3},
		State:  []byte(`{"a":"` + strings.Repeat("s", 1000) + `"}`),
		Images: images, Files: files, DroppedState: make([]Dropped, 5000),
	}
	e.config().caps().Reply(r, true)
	if len(r.Stdout) > 1000+clip.Slack || !r.StdoutTruncated || !strings.Contains(r.Stdout, "bytes dropped") {
		t.Errorf("stdout: %d bytes, truncated %v", len(r.Stdout), r.StdoutTruncated)
	}
	if !strings.HasPrefix(r.Stdout, "é") || !strings.HasSuffix(r.Stdout, "é") || !isUTF8(r.Stdout) {
		t.Errorf("stdout was not cut at rune boundaries: %.20q…%q", r.Stdout, r.Stdout[len(r.Stdout)-10:])
	}
	if r.Stderr != "short" || r.StderrTruncated {
		t.Errorf("stderr: %q truncated %v", r.Stderr, r.StderrTruncated)
	}
	if len(*r.Result) > 1000+clip.Slack {
		t.Errorf("result: %d bytes", len(*r.Result))
	}
	if r.State != nil || r.Status != "ok" || len(r.StateTooLarge) != 1 || r.StateTooLarge[0].Name != "a" || r.StateTooLarge[0].Bytes != 1002 {
		t.Errorf("state over its cap: state of %d bytes, status %s, too large %v; want no state, status ok, a (1002 bytes) named", len(r.State), r.Status, r.StateTooLarge)
	}
	var total int
	for _, im := range r.Images {
		total += len(im.PNG)
	}
	if len(r.Images) > maxImages || total > 2000 {
		t.Errorf("%d images of %d bytes, want at most %d and 2000 bytes", len(r.Images), total, maxImages)
	}
	if len(r.Files) > clip.MaxFiles || len(r.Files)*200 > clip.MaxFilesBytes {
		t.Errorf("%d files", len(r.Files))
	}
	if len(r.DroppedState) > clip.MaxDropped {
		t.Errorf("%d dropped-state entries", len(r.DroppedState))
	}

	r = &runnerResponse{Status: "ok", Error: &RunError{Type: "X", Message: strings.Repeat("m", 1<<20), Line: -3}, State: []byte(`{"a":1}`)}
	e.config().caps().Reply(r, false)
	if len(r.Error.Message) > clip.MaxErrorText+clip.Slack || r.Error.Line != 0 || r.State != nil {
		t.Errorf("persistent reply: message %d bytes, line %d, state %q", len(r.Error.Message), r.Error.Line, r.State)
	}
}

func isUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// FuzzReadFrame feeds random and hostile byte streams to the frame reader
// and the reply decoder: no panic, nothing allocated past the limit, and
// whatever decodes carries the request's id and nonce.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameOf(`{"id":1,"nonce":"n","status":"ok","stdout":"x"}`, 47), uint16(64))
	f.Add(frameOf(`{"id":1,"nonce":"n","status":"ok"}`, 1<<31), uint16(64))
	f.Add(frameOf(`{"id":1,"nonce":"n","status":"ok","images":[{"png":"AAAA"}],"state":{"a":[1,2]}}`, 85), uint16(200))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(1))
	f.Add(append(frameOf(`{"id":2,"nonce":"x"}`, 20), frameOf(`{"id":1,"nonce":"n","status":"timeout"}`, 39)...), uint16(100))
	f.Add(frameOf(`{"id":1,"nonce":"n","status":"ok","error":{"line":1e400}}`, 57), uint16(100))
	f.Fuzz(func(t *testing.T, stream []byte, limit uint16) {
		r := bytes.NewReader(stream)
		e := executorWith(ConfigFrom(config.Default()))
		for {
			data, err := readFrame(r, limitOf(int64(limit)))
			if err != nil {
				return
			}
			if len(data) > int(limit) {
				t.Fatalf("frame of %d bytes read with limit %d", len(data), limit)
			}
			resp, err := decodeReply(data, 1, "n")
			if err != nil {
				continue
			}
			if resp.ID != 1 || resp.Nonce != "n" {
				t.Fatalf("decoded a reply for %d/%q", resp.ID, resp.Nonce)
			}
			e.config().caps().Reply(resp, true)
		}
	})
}

// executorWith is an executor with cfg and nothing started, for the
// functions that only read the configuration.
func executorWith(cfg Config) *Executor {
	e := &Executor{}
	e.cfg.Store(&cfg)
	return e
}
