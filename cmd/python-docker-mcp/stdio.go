package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// stdioHint is what a person who started the server by hand in a terminal
// (`go run ./cmd/python-docker-mcp`) reads on stderr. A client that starts
// the server gives it a pipe, not a terminal, and never sees it.
const stdioHint = "python-docker-mcp: this is an MCP server speaking JSON-RPC on stdin/stdout; it is waiting for an MCP client.\n" +
	"  Add it to your MCP client's configuration (command: python-docker-mcp), or serve HTTP with --transport http.\n" +
	"  Ctrl-C stops it.\n"

// announceStdio writes stdioHint to stderr when stdin is a terminal.
func announceStdio(stdin io.Reader, stderr io.Writer) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, stdioHint)
	}
}

// The stdio transport of mcp-go reads request ids as float64, so an
// integer id beyond 2^53 or a number written as 1e3 would come back
// altered. stdinFilter hands such ids to it as strings carrying the
// original text after idMark, and stdoutFilter puts the original back:
// every id is echoed exactly as the client wrote it.
const idMark = "\x00pdm-id:"

var markedID = regexp.MustCompile(`"(id|requestId)":"\\u0000pdm-id:([-+.0-9eE]+)"`)

// stdinFilter passes stdin to the stdio transport one line (one JSON-RPC
// message) at a time. A line longer than max bytes is not passed, so the
// transport never holds more than max bytes of one message: when the id
// is among its first bytes the client gets an error response for that id
// saying the limit; otherwise the transport gets a short line that is not
// JSON and answers it with a parse error.
type stdinFilter struct {
	r       *bufio.Reader
	max     int
	line    []byte // the current line, at most max bytes
	head    []byte // the start of an oversized line, to find its id
	discard bool   // dropping the rest of an oversized line
	dropped int
	out     []byte // processed bytes not yet read
	reply   *stdoutFilter
	log     *slog.Logger
}

// oversizedHead is how much of an oversized message is searched for its id.
const oversizedHead = 4 << 10

var headID = regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"method"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*)?"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9][-+.0-9eE]*)`)

func filterStdin(stdin io.Reader, max int64, reply *stdoutFilter, log *slog.Logger) io.Reader {
	return &stdinFilter{r: bufio.NewReaderSize(stdin, 64<<10), max: int(max), reply: reply, log: log}
}

func (f *stdinFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		chunk, err := f.r.ReadSlice('\n')
		f.add(chunk)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(f.line) > 0 && !f.discard {
				f.out = append(f.out, exactIDs(f.line)...)
				f.line = f.line[:0]
			}
			if len(f.out) == 0 {
				return 0, err
			}
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// add takes bytes of the current line, ending it at a newline.
func (f *stdinFilter) add(b []byte) {
	end := len(b) > 0 && b[len(b)-1] == '\n'
	if end {
		b = b[:len(b)-1]
	}
	switch {
	case f.discard:
		f.dropped += len(b)
	case len(f.line)+len(b) > f.max:
		f.discard, f.dropped = true, len(f.line)+len(b)
		f.head = append(append(f.head[:0], f.line[:min(len(f.line), oversizedHead)]...), b[:min(len(b), oversizedHead-min(len(f.line), oversizedHead))]...)
		f.line = f.line[:0]
	default:
		f.line = append(f.line, b...)
	}
	if !end {
		return
	}
	if f.discard {
		f.log.Warn("stdio: dropped a message longer than server.max_body_bytes", "bytes", f.dropped, "max", f.max)
		msg := fmt.Sprintf("the message is %d bytes, over the server's limit of %d bytes (server.max_body_bytes); send less, e.g. write large data with several write-file calls", f.dropped, f.max)
		if m := headID.FindSubmatch(f.head); m != nil && f.reply != nil {
			resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m[1]), "error": map[string]any{"code": -32600, "message": msg}})
			if _, err := f.reply.Write(append(resp, '\n')); err != nil {
				f.log.Warn("stdio: could not answer an oversized message", "err", err)
			}
		} else {
			f.out = append(f.out, "{\"message too long\"\n"...)
		}
		f.discard, f.dropped, f.head = false, 0, f.head[:0]
		return
	}
	f.out = append(f.out, exactIDs(f.line)...)
	f.out = append(f.out, '\n')
	f.line = f.line[:0]
}

// exactIDs returns line with a numeric id (or the requestId of a
// cancellation) that would not survive a float64 round trip marked as a
// string; other lines come back unchanged.
func exactIDs(line []byte) []byte {
	if !bytes.Contains(line, []byte(`"id"`)) && !bytes.Contains(line, []byte(`"requestId"`)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	changed := mark(msg, "id")
	if p, ok := msg["params"]; ok {
		var params map[string]json.RawMessage
		if json.Unmarshal(p, &params) == nil && mark(params, "requestId") {
			msg["params"], _ = json.Marshal(params)
			changed = true
		}
	}
	if !changed {
		return line
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return out
}

// mark replaces m[key] by its marked string form when it is a number that
// float64 would alter.
func mark(m map[string]json.RawMessage, key string) bool {
	raw, ok := m[key]
	if !ok || len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return false
	}
	var back string
	if f == float64(int64(f)) {
		back = strconv.FormatInt(int64(f), 10)
	} else {
		b, _ := json.Marshal(f)
		back = string(b)
	}
	if back == string(raw) {
		return false
	}
	m[key], _ = json.Marshal(idMark + string(raw))
	return true
}

// stdoutFilter restores the ids stdinFilter marked. mcp-go writes each
// message with one Write; stdinFilter's own answers go through the same
// lock, so messages never interleave.
type stdoutFilter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *stdoutFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return writeRestored(f.w, p)
}

// writeRestored writes p to w with every marked id put back as the client
// wrote it, and reports len(p) written (p was one message as mcp-go wrote
// it, however long the restored form).
func writeRestored(w io.Writer, p []byte) (int, error) {
	if !bytes.Contains(p, []byte(`\u0000pdm-id:`)) {
		return w.Write(p)
	}
	if _, err := w.Write(markedID.ReplaceAll(p, []byte(`"$1":$2`))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// clientOutput is the stdio transport's stdout. A write that fails (the
// client closed its end of the pipe, or was killed) means the client is
// gone, like EOF on stdin: gone is called once, and the server then
// cancels the calls in flight, removes their sandboxes and exits 0.
type clientOutput struct {
	w    io.Writer
	once sync.Once
	gone func(error)
}

func (c *clientOutput) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.once.Do(func() { c.gone(err) })
	}
	return n, err
}

// survivePipes makes a write to a closed stdout or stderr fail with EPIPE
// instead of killing the process with SIGPIPE (the Go runtime's default for
// file descriptors 1 and 2), so that clientOutput sees it. Notify rather
// than Ignore: an ignored signal would stay ignored in the processes the
// server starts (an image build's tools), a handled one is reset for them.
func survivePipes() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
