package protocol

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestWriteFrameWithin: a write nobody reads is cut at the limit, or when
// ctx ends (after grace); a write that is read is never cut.
func TestWriteFrameWithin(t *testing.T) {
	stalled := func(t *testing.T) (net.Conn, func()) {
		w, r := net.Pipe() // synchronous: a write waits for a read
		t.Cleanup(func() { w.Close(); r.Close() })
		return w, func() { w.Close() }
	}
	t.Run("limit", func(t *testing.T) {
		w, cut := stalled(t)
		cutOff, err := WriteFrameWithin(context.Background(), w, Ping{}, 100*time.Millisecond, time.Hour, cut)
		if !cutOff || err == nil {
			t.Errorf("cutOff %v, err %v; want the write cut with an error", cutOff, err)
		}
	})
	t.Run("ctx", func(t *testing.T) {
		w, cut := stalled(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if cutOff, err := WriteFrameWithin(ctx, w, Ping{}, time.Hour, 50*time.Millisecond, cut); !cutOff || err == nil {
			t.Errorf("cutOff %v, err %v; want the write cut once ctx ended and the grace passed", cutOff, err)
		}
	})
	t.Run("read", func(t *testing.T) {
		w, r := net.Pipe()
		defer w.Close()
		go io.Copy(io.Discard, r)
		cut := func() { t.Error("a write that was read was cut") }
		if cutOff, err := WriteFrameWithin(context.Background(), w, Ping{}, 50*time.Millisecond, 0, cut); cutOff || err != nil {
			t.Errorf("cutOff %v, err %v; want written", cutOff, err)
		}
		time.Sleep(100 * time.Millisecond) // past the limit: the timer must be stopped
	})
}
