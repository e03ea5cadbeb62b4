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
	h := scanHead(line)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case h.method == string(mcp.MethodNotificationCancelled):
		if _, ok := f.inflight[h.requestID]; ok && h.requestID != "" {
			f.inflight[h.requestID] = true
		}
	case h.method != "" && h.id != "":
		f.inflight[h.id] = false
	}
}

// head is what the filter needs of a JSON-RPC message.
type head struct {
	id, method string
	requestID  string // params.requestId of notifications/cancelled
	response   bool   // has "result" or "error"
}

// scanHead reads the top-level members of a JSON-RPC message it needs and
// stops as soon as it knows them: a reply's large "result" after its "id"
// (as mcp-go writes replies) and a request's large "params" after its
// "id" and "method" are not scanned. A line that is not a JSON object
// gives the zero head.
func scanHead(line []byte) head {
	var h head
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return head{}
	}
	var params json.RawMessage
	haveID := false
	skip := func() bool { var raw json.RawMessage; return dec.Decode(&raw) == nil }
	for dec.More() {
		t, err := dec.Token()
		key, _ := t.(string)
		if err != nil {
			return head{}
		}
		switch key {
		case "id":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return head{}
			}
			h.id, haveID = idKey(raw), true
		case "method":
			if dec.Decode(&h.method) != nil {
				return head{}
			}
		case "result", "error":
			h.response = true
			if haveID {
				return h
			}
			if !skip() {
				return head{}
			}
		case "params":
			if h.method != "" && h.method != string(mcp.MethodNotificationCancelled) {
				if !skip() {
					return head{}
				}
				continue
			}
			if dec.Decode(&params) != nil {
				return head{}
			}
		default:
			if !skip() {
				return head{}
			}
		}
		if haveID && h.method != "" && h.method != string(mcp.MethodNotificationCancelled) {
			return h // a request: its params are not needed
		}
	}
	if h.method == string(mcp.MethodNotificationCancelled) && params != nil {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(params, &p) == nil {
			h.requestID = idKey(p.RequestID)
		}
	}
	return h
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
	h := scanHead(line)
	if !h.response || h.method != "" || h.id == "" {
		return false
	}
	cancelled, ok := f.inflight[h.id]
	if !ok {
		return false
	}
	delete(f.inflight, h.id)
	return cancelled
}
