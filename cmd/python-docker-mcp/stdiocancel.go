package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// cancelFilter sits between the stdio transport and the process's stdin
// and stdout. It watches the client's requests and notifications/cancelled
// and drops the reply to a request the client cancelled while it was in
// flight: per the MCP specification the server must not send one (mcp-go
// cancels the handler's context but would still write its result).
// A cancellation that arrives after the reply was written changes nothing.
type cancelFilter struct {
	mu        sync.Mutex
	inflight  map[string]bool // request id -> cancelled
	pending   []byte          // a reply line not yet complete
	out       io.Writer
	cancelled int // replies dropped, for tests and logs
}

func newCancelFilter(out io.Writer) *cancelFilter {
	return &cancelFilter{inflight: map[string]bool{}, out: out}
}

// Reader returns in with every line observed before mcp-go reads it.
func (f *cancelFilter) Reader(in io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				f.observe(line)
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

func (f *cancelFilter) observe(line []byte) {
	var head rpcHead
	if json.Unmarshal(bytes.TrimSpace(line), &head) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case head.Method == string(mcp.MethodNotificationCancelled):
		if id := idKey(head.Params.RequestID); id != "" {
			if _, ok := f.inflight[id]; ok {
				f.inflight[id] = true
			}
		}
	case head.Method != "":
		if id := idKey(head.ID); id != "" {
			f.inflight[id] = false
		}
	}
}

// Write passes the transport's output through, except replies to
// cancelled requests. mcp-go writes one message per call, but a message
// split across calls is handled too.
func (f *cancelFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	data := p
	if len(f.pending) > 0 {
		data = append(f.pending, p...)
		f.pending = nil
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			f.pending = append([]byte(nil), data...)
			return n, nil
		}
		line := data[:i+1]
		data = data[i+1:]
		if f.drop(line) {
			f.cancelled++
			continue
		}
		if _, err := f.out.Write(line); err != nil {
			return n, err
		}
	}
	return n, nil
}

// drop says whether line is the reply to a cancelled request; every reply
// ends its request's tracking. Called with mu held.
func (f *cancelFilter) drop(line []byte) bool {
	var head rpcHead
	if json.Unmarshal(bytes.TrimSpace(line), &head) != nil || head.Method != "" {
		return false
	}
	id := idKey(head.ID)
	if id == "" {
		return false
	}
	cancelled, ok := f.inflight[id]
	if !ok {
		return false
	}
	delete(f.inflight, id)
	return cancelled
}
