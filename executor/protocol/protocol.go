// Package protocol is the runner protocol between the executor and the
// runner in a sandbox (executor/runner/pdm_runner): length-prefixed JSON
// frames (a 4-byte big-endian length, then UTF-8 JSON) over the sandbox's
// stdin (requests) and stdout (replies).
//
// The runner sends a Ready frame once, then exactly one Reply per request,
// carrying the request's id and nonce. Everything a sandbox sends is
// untrusted: ReadFrame checks a frame's length before reading it, and
// DecodeReply its id, nonce and status.
package protocol

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Ops of request frames (the request structs are in requests.go). Every
// request carries "op", "id" (1, 2, … per sandbox) and "nonce" (fresh
// random text per request), except interrupt (no nonce) and exit.
const (
	OpRun       = "run"       // run code (Run)
	OpPreload   = "preload"   // import "modules" ahead of a call
	OpParse     = "parse"     // compile "code" to an AST only: syntax check
	OpRead      = "read"      // read "path" of the working directory (whole, at most "max_bytes"; or "length" bytes from "offset")
	OpWrite     = "write"     // write "data" to "path" (replace, or "append"), the file at most "max_file_bytes"
	OpList      = "list"      // list "path" (recursively)
	OpInterrupt = "interrupt" // interrupt the running request "id" (no reply of its own)
	OpExit      = "exit"      // end the runner (no reply)
	OpPing      = "ping"      // answer at once (an attach stream's first request)
	OpReset     = "reset"     // end a transient call's processes, restore the sandbox, check it (Reset)
	OpReady     = "ready"     // the runner's first frame
	OpOutput    = "output"    // output of a run with Stream, while it runs (Output)
)

// Statuses a Reply may carry.
var Statuses = []string{"ok", "error", "timeout", "oom", "killed", "refused", "syntax_error"}

// MaxRequestFrame caps one frame the server sends (code, state and file
// data are capped well below it by the limits).
const MaxRequestFrame = 256 << 20

// ErrFrameTooLarge: the sandbox announced a frame longer than the limit.
// Nothing of it was read into memory.
var ErrFrameTooLarge = errors.New("frame exceeds the limit")

// WriteFrameWithin is WriteFrame for a reader that may take no input (a
// hung runner holds the write): once limit has passed, or ctx has ended
// and then grace, it calls cut, which must end the write (close the
// stream), and reports cutOff. A write that was cut reports cutOff true,
// whatever error it returned. No goroutine runs unless a deadline passes.
func WriteFrameWithin(ctx context.Context, w io.Writer, v any, limit, grace time.Duration, cut func()) (cutOff bool, err error) {
	var written, cutDone atomic.Bool
	t := time.AfterFunc(limit, func() {
		if !written.Load() {
			cutDone.Store(true)
			cut()
		}
	})
	stop := context.AfterFunc(ctx, func() { t.Reset(grace) })
	err = WriteFrame(w, v)
	written.Store(true)
	stop()
	t.Stop()
	return cutDone.Load(), err
}

// WriteFrame writes v as one frame.
func WriteFrame(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(data) > MaxRequestFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(data), MaxRequestFrame)
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	_, err = w.Write(buf)
	return err
}

// ReadFrame reads one frame's JSON of at most limit() bytes, asked once
// the length has arrived (the reader waits for frames before the request
// that sets the limit is sent). The length is checked before anything is
// allocated: a frame over the limit is an ErrFrameTooLarge (wrapped with
// the sizes) and the stream is left unusable.
func ReadFrame(r io.Reader, limit func() int64) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if limit := limit(); int64(n) > limit {
		return nil, fmt.Errorf("%w: a frame of %d bytes, the limit is %d bytes", ErrFrameTooLarge, n, limit)
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

// Output is a frame the runner sends while a Run with Stream set runs, any
// number of times before its Reply, with the run's id and nonce: the next
// bytes of one of the worker's streams. A stream's frames come in order;
// each starts at or after the end of the one before (Offset+Bytes), and a
// later start means the bytes between were skipped (the runner sends a
// stream at most every 50 ms, at most 64 KiB a frame, and skips what more
// came). The Reply holds the whole streams, capped, as without Stream.
type Output struct {
	Op     string `json:"op"`
	ID     uint64 `json:"id"`
	Nonce  string `json:"nonce"`
	Stream string `json:"stream"` // "stdout" or "stderr"
	// Offset is the stream offset of the chunk's first byte and Bytes the
	// chunk's length in the stream, both in bytes as the code wrote them.
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
	// Data is the chunk as text: the bytes decoded as UTF-8, invalid ones
	// as U+FFFD. A chunk ends on a character boundary unless it is the
	// stream's last or bytes after it were skipped.
	Data string `json:"data"`
}

// DecodeOutput decodes a frame as an Output of request id with nonce. A
// frame whose op is not OpOutput gives (nil, false, nil): the reply. An
// output frame for another request or with bad fields is an error, and
// the sandbox is to be killed.
func DecodeOutput(data []byte, id uint64, nonce string) (*Output, bool, error) {
	var o Output
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, false, fmt.Errorf("undecodable frame: %v", err)
	}
	if o.Op != OpOutput {
		return nil, false, nil
	}
	switch {
	case o.ID != id || o.Nonce != nonce:
		return nil, true, fmt.Errorf("an output frame for request %d with the wrong nonce or id (want request %d)", o.ID, id)
	case o.Stream != "stdout" && o.Stream != "stderr":
		return nil, true, fmt.Errorf("an output frame of unknown stream %.40q", o.Stream)
	case o.Offset < 0 || o.Bytes < 0 || int64(len(o.Data)) > 3*o.Bytes:
		return nil, true, fmt.Errorf("an output frame with bad offset %d or length %d", o.Offset, o.Bytes)
	}
	return &o, true, nil
}

// Ready is the runner's first frame. Runner is "loaded" when the bootstrap
// ran the compiled code of the preamble, "compiled" when it compiled the
// source.
type Ready struct {
	Op     string `json:"op"`
	Runner string `json:"runner"`
}

// Reply is the runner's answer to one request. Which fields are set
// depends on the op: run fills the output fields, preload Failed (and,
// when the request set "runner_code", RunnerCode: the runner's Python's
// 4-byte magic number, then its marshalled code; and Stdlib: the
// directory of its standard library), parse Syntax, read Data, list
// Entries. Read and write replies carry FileSize, the file's size in
// bytes after the operation (also on their errors FileTooLarge, NoSpace
// and BadOffset).
type Reply struct {
	ID              uint64          `json:"id"`
	Nonce           string          `json:"nonce"`
	Status          string          `json:"status"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Result          *string         `json:"result"`
	Error           *RunError       `json:"error"`
	State           json.RawMessage `json:"state"`
	DroppedState    []Dropped       `json:"dropped_state"`
	StateTooLarge   []StateSize     `json:"state_too_large"`    // run: globals left out of State to keep it under its cap
	MissingState    []string        `json:"missing_state"`      // run: names asked for as state that are not defined
	Unreturned      []string        `json:"unreturned_globals"` // run: other JSON-typed globals, not asked for
	Images          []Image         `json:"images"`
	Files           []string        `json:"files"`
	DurationMS      float64         `json:"duration_ms"`
	StateLost       bool            `json:"state_lost"`
	Armed           bool            `json:"armed"` // run: the worker had installed the call's guard ahead of it
	// run (persistent): whether the reply can be shown to come only from
	// this call's code ("verified", "unverified"), why, and the CPU time
	// the session's processes used while frozen between calls.
	Integrity       string       `json:"integrity"`
	IntegrityReason string       `json:"integrity_reason"`
	IdleCPUMS       float64      `json:"idle_cpu_ms"`
	Failed          []string     `json:"failed"`
	RunnerCode      []byte       `json:"runner_code"`
	Stdlib          string       `json:"stdlib"`
	Syntax          *SyntaxError `json:"syntax"`
	Data            []byte       `json:"data"`
	Entries         []Entry      `json:"entries"`
	FileSize        int64        `json:"file_size"`
	// reset: what the runner checked (one line each) and, status
	// "error", the first thing it could not restore.
	Checked []string `json:"checked"`
	Reason  string   `json:"reason"`

	// run: the rich representations display() and a final expression
	// produced, in order, and those left out (see Rich).
	Rich        []Rich        `json:"rich"`
	RichDropped []RichDropped `json:"rich_dropped"`
}

// DecodeReply decodes one frame from the sandbox and checks that it
// answers request id with its nonce and a known status. An error here
// means the sandbox is to be killed.
func DecodeReply(data []byte, id uint64, nonce string) (*Reply, error) {
	var resp Reply
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("undecodable frame: %v", err)
	}
	if resp.ID != id || resp.Nonce != nonce {
		return nil, fmt.Errorf("a frame for request %d with the wrong nonce or id (want request %d)", resp.ID, id)
	}
	for _, s := range Statuses {
		if resp.Status == s {
			return &resp, nil
		}
	}
	return nil, fmt.Errorf("unknown status %.40q", resp.Status)
}

// RunError describes an exception of the user's code (or why the sandbox
// stopped). Line is 1-based in the submitted code, 0 when unknown;
// Traceback holds only user frames (and library frames they called).
type RunError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	// Col is a syntax error's column (1-based, in characters).
	Col       int    `json:"col,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

// Dropped is a global left out of the returned state because it does not
// round-trip through JSON.
type Dropped struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// StateSize is a global left out of a transient run's state because the
// state would not fit limits.max_state_bytes with it: its name and the
// size its JSON would have taken.
type StateSize struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// Image is one matplotlib figure left open by a run, rendered to PNG.
type Image struct {
	PNG    []byte `json:"png"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// Rich is one rich representation of an object that user code passed to
// display() or left as a cell's final expression: its HTML (MIMEHTML:
// _repr_html_, or a pandas DataFrame's or Series' to_html with at most
// RichHTMLRows rows and RichHTMLCols columns), PNG (MIMEPNG: _repr_png_)
// or SVG (MIMESVG: _repr_svg_). An object gives at most its HTML and one
// image (PNG over SVG).
//
// Bounds, applied by the runner and again by the server: an HTML or SVG
// item is at most MaxRichBytes, all HTML and SVG of a run at most
// MaxRichTotalBytes, at most MaxRich items in a run; PNG items share the
// figures' limits (the run's max_images and max_image_bytes, rich PNGs
// counted first). What does not fit is a RichDropped, never cut.
type Rich struct {
	MIME string `json:"mime"`
	// Data is the representation: UTF-8 text for HTML and SVG, the PNG
	// file for PNG.
	Data []byte `json:"data"`
	// From is RichFromDisplay (N is then the object's place among every
	// display() argument of the run, from 1) or RichFromResult (N is 0).
	From string `json:"from"`
	N    int    `json:"n"`
	// Width and Height are a PNG's, from its header; 0 for text.
	Width  int `json:"width"`
	Height int `json:"height"`
}

// RichDropped is a rich representation left out of a reply: which, its
// size in bytes (0 when it could not be made), why (Rich* reasons) and
// the limit it would break (bytes, or a count for RichOverCount and
// RichOverImageCount), or the exception that made it fail.
type RichDropped struct {
	MIME  string `json:"mime"`
	From  string `json:"from"`
	N     int    `json:"n"`
	Bytes int64  `json:"bytes"`
	Why   string `json:"why"`
	Limit int64  `json:"limit"`
	Error string `json:"error,omitempty"`
}

// MIME types of Rich items.
const (
	MIMEHTML = "text/html"
	MIMEPNG  = "image/png"
	MIMESVG  = "image/svg+xml"
)

// Where a Rich item comes from.
const (
	RichFromDisplay = "display"
	RichFromResult  = "result"
)

// Why a rich representation was dropped.
const (
	RichTooLarge       = "too_large"        // over MaxRichBytes (HTML, SVG)
	RichOverTotal      = "over_total"       // the run's HTML and SVG would pass MaxRichTotalBytes
	RichOverCount      = "over_count"       // the run has MaxRich items already
	RichOverImageBytes = "over_image_bytes" // the run's PNG images (figures too) would pass the run's max_image_bytes
	RichOverImageCount = "over_image_count" // the run has max_images PNG images already
	RichFailed         = "failed"           // the _repr_*_ method raised or returned something unusable (Error says what)
)

// Bounds of rich representations (see Rich); the runner has the same
// numbers (output.py; its tests read them here).
const (
	MaxRichBytes      = 256 << 10
	MaxRichTotalBytes = 1 << 20
	MaxRich           = 16
	MaxRichDropped    = 64
	RichHTMLRows      = 60
	RichHTMLCols      = 20
)

// Entry is one file or directory of a list reply.
type Entry struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Dir     bool   `json:"dir"`
	MTimeNS int64  `json:"mtime_ns"`
}

// SyntaxError is CPython's verdict on code that does not parse.
type SyntaxError struct {
	// Type is SyntaxError, IndentationError or TabError; RecursionError or
	// MemoryError when the code is nested too deeply for the parser.
	Type    string `json:"type"`
	Message string `json:"message"`
	// Line and Col are CPython's lineno and offset (1-based; the column
	// counts characters); EndLine and EndCol are 0 when CPython has none.
	Line    int `json:"line"`
	Col     int `json:"col"`
	EndLine int `json:"end_line"`
	EndCol  int `json:"end_col"`
	// Text is the source line (a window of it when the line is long).
	Text string `json:"text"`
	// Detail is CPython's rendering: the line number, the source line with
	// a caret under the error, and the message.
	Detail string `json:"detail"`
}

// NonceIs says whether a reply frame carries nonce. Where several servers
// share one sandbox's output (a session on a Shared backend), each skips
// the replies whose nonce is not that of its own request.
func NonceIs(data []byte, nonce string) bool {
	var r struct {
		Nonce string `json:"nonce"`
	}
	return json.Unmarshal(data, &r) == nil && r.Nonce == nonce
}
