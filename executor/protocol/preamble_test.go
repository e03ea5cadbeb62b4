package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// A preamble is skipped exactly: the frame after it reads intact, with or
// without code.
func TestPreambleSkip(t *testing.T) {
	for _, code := range [][]byte{nil, []byte("\xe3marshalled")} {
		var b bytes.Buffer
		if err := WritePreamble(&b, "print(1)\n", code, [4]byte{0xf3, 0x0d, 0x0d, 0x0a}); err != nil {
			t.Fatal(err)
		}
		h := b.Bytes()[:PreambleHeaderSize]
		if got := binary.BigEndian.Uint32(h[4:]); got != uint32(len(code)) {
			t.Errorf("code length %d, want %d", got, len(code))
		}
		if wantMagic := len(code) > 0; wantMagic != (h[8] != 0) {
			t.Errorf("code %q: magic % x", code, h[8:])
		}
		if err := WriteFrame(&b, map[string]string{"op": "ping"}); err != nil {
			t.Fatal(err)
		}
		if err := SkipPreamble(&b); err != nil {
			t.Fatal(err)
		}
		f, err := ReadFrame(&b, func() int64 { return 1 << 10 })
		if err != nil || string(f) != `{"op":"ping"}` {
			t.Errorf("frame after the preamble: %q, %v", f, err)
		}
	}
}

// A stream that ends inside the preamble is an error, not a short skip.
func TestPreambleTruncated(t *testing.T) {
	var b bytes.Buffer
	if err := WritePreamble(&b, "print(1)\n", nil, [4]byte{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5, PreambleHeaderSize + 3} {
		err := SkipPreamble(bytes.NewReader(b.Bytes()[:n]))
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Errorf("%d bytes: %v, want an EOF error", n, err)
		}
	}
}
