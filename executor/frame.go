package executor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxRequestFrame caps one frame the server sends (code, state and file
// data are capped well below it by the limits).
const maxRequestFrame = 256 << 20

// idleFrameLimit caps a frame from the sandbox when no request is waiting
// for one: the ready frame, or anything the sandbox has no business
// sending.
const idleFrameLimit = 64 << 10

// errFrameTooLarge: the sandbox announced a frame longer than the limit of
// the request it answers. Nothing of it was read into memory.
var errFrameTooLarge = errors.New("frame exceeds the limit")

// writeFrame writes one length-prefixed JSON frame: a 4-byte big-endian
// length, then the JSON.
func writeFrame(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(data) > maxRequestFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(data), maxRequestFrame)
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame's JSON of at most limit() bytes, asked once
// the length has arrived (the reader waits for frames before the request
// that sets the limit is sent). The length is checked before anything is
// allocated: a frame over the limit is an errFrameTooLarge (wrapped with
// the sizes) and the stream is left unusable.
func readFrame(r io.Reader, limit func() int64) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if limit := limit(); int64(n) > limit {
		return nil, fmt.Errorf("%w: a frame of %d bytes, the limit is %d bytes", errFrameTooLarge, n, limit)
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

// decodeReply decodes one frame from the sandbox and checks that it
// answers request id with its nonce. Everything in the frame is untrusted:
// an error here means the sandbox is to be killed.
func decodeReply(data []byte, id uint64, nonce string) (*runnerResponse, error) {
	var resp runnerResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("undecodable frame: %v", err)
	}
	if resp.ID != id || resp.Nonce != nonce {
		return nil, fmt.Errorf("a frame for request %d with the wrong nonce or id (want request %d)", resp.ID, id)
	}
	switch resp.Status {
	case "ok", "error", "timeout", "oom", "killed", "refused", "syntax_error":
	default:
		return nil, fmt.Errorf("unknown status %.40q", resp.Status)
	}
	return &resp, nil
}
