package executor

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// maxFrame caps one frame from the runner. Its content is already capped
// (output head and tail, state, images); this bounds a misbehaving runner.
const maxFrame = 256 << 20

// writeFrame writes one length-prefixed JSON frame: a 4-byte big-endian
// length, then the JSON.
func writeFrame(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(data) > maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(data), maxFrame)
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame's JSON.
func readFrame(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxFrame {
		return nil, fmt.Errorf("runner frame of %d bytes exceeds %d", n, maxFrame)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return data, nil
}
