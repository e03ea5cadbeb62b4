package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
)

// RunnerTag is the last argument of every sandbox's command line. It says
// that the sandbox's stdin starts with a runner preamble, before the first
// frame.
const RunnerTag = "pdm-runner"

// PreambleHeaderSize is the size of a preamble's fixed header: the
// source's length and the code's (4-byte big-endian each), then the
// 4-byte magic number of the Python that marshalled the code (zero when
// there is no code).
const PreambleHeaderSize = 12

// WritePreamble writes what a sandbox's bootstrap reads before anything
// else: the header, the runner's source, then its compiled code (marshal
// of the source compiled by a Python whose importlib MAGIC_NUMBER is
// magic; nil for none). The bootstrap runs the code when its own Python's
// magic number is the same, and compiles the source otherwise.
func WritePreamble(w io.Writer, source string, code []byte, magic [4]byte) error {
	if len(code) == 0 {
		magic = [4]byte{}
	}
	buf := make([]byte, PreambleHeaderSize, PreambleHeaderSize+len(source)+len(code))
	binary.BigEndian.PutUint32(buf[0:], uint32(len(source)))
	binary.BigEndian.PutUint32(buf[4:], uint32(len(code)))
	copy(buf[8:], magic[:])
	buf = append(buf, source...)
	buf = append(buf, code...)
	_, err := w.Write(buf)
	return err
}

// SkipPreamble reads a preamble from r and discards it: what a stand-in
// for the runner (a test's fake backend) does before reading frames.
func SkipPreamble(r io.Reader) error {
	var h [PreambleHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return fmt.Errorf("runner preamble: %w", err)
	}
	n := int64(binary.BigEndian.Uint32(h[0:])) + int64(binary.BigEndian.Uint32(h[4:]))
	if _, err := io.CopyN(io.Discard, r, n); err != nil {
		return fmt.Errorf("runner preamble: %d bytes announced: %w", n, err)
	}
	return nil
}
