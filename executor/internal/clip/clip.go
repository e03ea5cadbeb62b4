// Package clip applies the operator's size caps to what a sandbox sent,
// a second time: the runner applies them already, and the server again
// because the sandbox runs untrusted code. It cuts text at rune
// boundaries around a marker saying how much was dropped, drops what is
// over a count, and says how large a reply may be before it is read.
package clip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Caps are the caps of one run's reply, from the configuration in force.
type Caps struct {
	// Output is what is shown of a stream or a result (limits.max_output_bytes).
	Output int64
	// Retain is what is kept of a stream (outputs.max_stream_bytes, at
	// least Output): shown cut to Output, the rest handed over whole.
	Retain int64
	// State caps a transient call's state (limits.max_state_bytes).
	State int64
	// Image caps the PNG images' bytes (limits.max_image_bytes), Images
	// their count.
	Image  int64
	Images int
}

// Caps of one reply from the sandbox. The runner applies them already; the
// server applies them again because the sandbox runs untrusted code.
const (
	// JSONGrowth is how much JSON may grow a string: a control character
	// becomes a 6-byte \u00XX escape.
	JSONGrowth = 6
	// MaxErrorText caps the message and the traceback of a RunError.
	MaxErrorText = 64 << 10
	// MaxDropped caps DroppedState, StateTooLarge and MissingState
	// entries; each name and type at 256 bytes.
	MaxDropped = 1000
	// MaxUnreturned caps Unreturned, 256 bytes a name.
	MaxUnreturned = 100
	// MaxFiles and MaxFilesBytes cap Result.Files.
	MaxFiles      = 1000
	MaxFilesBytes = 256 << 10
	// Slack is room for a "... [N bytes dropped] ..." marker.
	Slack = 256
	// ReplySlack covers the fixed fields of a reply.
	ReplySlack = 64 << 10
	// PreloadReplyLimit caps a preload answer (the list of failed imports).
	PreloadReplyLimit = 1 << 20
	// ListReplyLimit caps a list answer: the runner stops listing after
	// 2 MiB of entries.
	ListReplyLimit = JSONGrowth*(2<<20) + ReplySlack
)

// RunReply is the largest run reply the server reads: the sum of the
// configured caps (stdout, stderr and the result at the retained output
// cap, the error text, dropped-state names, the files list, as JSON), the
// state cap, the images as base64, and slack. A reply announcing more
// kills the sandbox before any of it is read.
func (c Caps) RunReply() int64 {
	out := c.Retain
	text := 3*(out+Slack) + 2*MaxErrorText + MaxDropped*1200 + MaxUnreturned*300 + MaxFilesBytes + MaxFiles*8
	return JSONGrowth*text + JSONGrowth*c.State + c.Image*4/3 + int64(c.Images)*256 + richReplyLimit + ReplySlack
}

// richReplyLimit is what the rich representations add to a run reply:
// their HTML and SVG as base64 (their PNGs are within the image cap), and
// each item's and each dropped entry's fields.
const richReplyLimit = protocol.MaxRichTotalBytes*4/3 + protocol.MaxRich*256 + protocol.MaxRichDropped*2048

// Text keeps at most max bytes of s: its head and tail around a
// marker, cut at rune boundaries. It reports whether it cut.
func Text(s string, max int64) (string, bool) {
	if int64(len(s)) <= max+Slack {
		return s, false
	}
	half := int(max / 2)
	h, t := half, len(s)-half
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	head, tail := s[:h], s[t:]
	return fmt.Sprintf("%s\n... [%d bytes dropped] ...\n%s", head, len(s)-len(head)-len(tail), tail), true
}

// clipNames keeps at most n names, each clipped to 256 bytes.
func clipNames(names []string, n int) []string {
	if len(names) > n {
		names = names[:n]
	}
	for i := range names {
		names[i], _ = Text(names[i], 256-Slack)
	}
	return names
}

// Reply re-applies the output, state, image, file and error caps to a
// run reply, in place: what is over a cap is cut (text) or dropped (images,
// files, dropped-state entries); a state over its cap (which the runner
// trims, so only a misbehaving sandbox sends one) is left out whole, each
// of its globals named in StateTooLarge, and the status stays the run's.
//
// Streams are kept up to the retained cap (Caps.Retain): the
// run's result cuts them for display and keeps the rest as a resource. A
// final expression's repr is shown whole, so it is cut at the output cap.
func (c Caps) Reply(r *protocol.Reply, transient bool) {
	stream := c.Retain
	var cut bool
	if r.Stdout, cut = Text(r.Stdout, stream); cut {
		r.StdoutTruncated = true
	}
	if r.Stderr, cut = Text(r.Stderr, stream); cut {
		r.StderrTruncated = true
	}
	if r.Result != nil {
		s, _ := Text(*r.Result, c.Output)
		r.Result = &s
	}
	if r.Error != nil {
		r.Error.Type, _ = Text(r.Error.Type, 256-Slack)
		r.Error.Message, _ = Text(r.Error.Message, MaxErrorText)
		r.Error.Traceback, _ = Text(r.Error.Traceback, MaxErrorText)
		if r.Error.Line < 0 {
			r.Error.Line = 0
		}
		if r.Error.Col < 0 {
			r.Error.Col = 0
		}
	}
	if !transient {
		r.State = nil
		r.DroppedState = nil
		r.StateTooLarge = nil
		r.MissingState = nil
		r.Unreturned = nil
	}
	if st := bytes.TrimSpace(r.State); len(st) > 0 && !bytes.Equal(st, []byte("null")) {
		var members map[string]json.RawMessage
		switch {
		case st[0] != '{':
			r.State = nil
		case int64(len(st)) > c.State+Slack:
			r.State = nil
			if json.Unmarshal(st, &members) == nil {
				var all []protocol.StateSize
				for k, v := range members {
					all = append(all, protocol.StateSize{Name: k, Bytes: int64(len(v))})
				}
				sort.Slice(all, func(i, j int) bool { return all[i].Bytes > all[j].Bytes })
				r.StateTooLarge = append(all, r.StateTooLarge...)
			}
		}
	}
	if len(r.DroppedState) > MaxDropped {
		r.DroppedState = r.DroppedState[:MaxDropped]
	}
	if len(r.StateTooLarge) > MaxDropped {
		r.StateTooLarge = r.StateTooLarge[:MaxDropped]
	}
	for i := range r.StateTooLarge {
		r.StateTooLarge[i].Name, _ = Text(r.StateTooLarge[i].Name, 256-Slack)
		if r.StateTooLarge[i].Bytes < 0 {
			r.StateTooLarge[i].Bytes = 0
		}
	}
	r.MissingState = clipNames(r.MissingState, MaxDropped)
	r.Unreturned = clipNames(r.Unreturned, MaxUnreturned)
	for i := range r.DroppedState {
		r.DroppedState[i].Name, _ = Text(r.DroppedState[i].Name, 256-Slack)
		r.DroppedState[i].Type, _ = Text(r.DroppedState[i].Type, 256-Slack)
	}
	pngs, total := c.rich(r)
	var kept []protocol.Image
	for _, im := range r.Images {
		if pngs+len(kept) >= c.Images || total+int64(len(im.PNG)) > c.Image {
			continue
		}
		total += int64(len(im.PNG))
		kept = append(kept, im)
	}
	r.Images = kept
	var files []string
	size := 0
	for _, f := range r.Files {
		size += len(f)
		if len(files) >= MaxFiles || size > MaxFilesBytes {
			break
		}
		files = append(files, f)
	}
	r.Files = files
}

// rich re-applies the bounds of rich representations (see
// protocol.Rich) to r, in place: an item of an unknown type or with text
// that is not UTF-8 is left out; one over a bound moves to RichDropped,
// named with the bound. It returns the count and bytes of the PNG items
// kept, which the figures share.
func (c Caps) rich(r *protocol.Reply) (pngs int, pngBytes int64) {
	if len(r.RichDropped) > protocol.MaxRichDropped {
		r.RichDropped = r.RichDropped[:protocol.MaxRichDropped]
	}
	for i := range r.RichDropped {
		d := &r.RichDropped[i]
		d.MIME, _ = Text(d.MIME, 64)
		d.From, _ = Text(d.From, 16)
		d.Why, _ = Text(d.Why, 32)
		d.Error, _ = Text(d.Error, 512)
		d.N, d.Bytes, d.Limit = max(d.N, 0), max(d.Bytes, 0), max(d.Limit, 0)
	}
	drop := func(it protocol.Rich, why string, limit int64) {
		if len(r.RichDropped) < protocol.MaxRichDropped {
			r.RichDropped = append(r.RichDropped, protocol.RichDropped{MIME: it.MIME, From: it.From, N: max(it.N, 0),
				Bytes: int64(len(it.Data)), Why: why, Limit: limit})
		}
	}
	var kept []protocol.Rich
	var text int64
	for _, it := range r.Rich {
		size := int64(len(it.Data))
		if it.From != protocol.RichFromDisplay && it.From != protocol.RichFromResult {
			continue
		}
		switch {
		case len(kept) >= protocol.MaxRich:
			drop(it, protocol.RichOverCount, protocol.MaxRich)
			continue
		case it.MIME == protocol.MIMEPNG:
			if pngs >= c.Images {
				drop(it, protocol.RichOverImageCount, int64(c.Images))
				continue
			}
			if pngBytes+size > c.Image {
				drop(it, protocol.RichOverImageBytes, c.Image)
				continue
			}
			pngs++
			pngBytes += size
		case it.MIME == protocol.MIMEHTML || it.MIME == protocol.MIMESVG:
			if !utf8.Valid(it.Data) {
				continue
			}
			if size > protocol.MaxRichBytes {
				drop(it, protocol.RichTooLarge, protocol.MaxRichBytes)
				continue
			}
			if text+size > protocol.MaxRichTotalBytes {
				drop(it, protocol.RichOverTotal, protocol.MaxRichTotalBytes)
				continue
			}
			text += size
		default:
			continue
		}
		kept = append(kept, it)
	}
	r.Rich = kept
	return pngs, pngBytes
}

// runnerDropped matches the marker the runner puts where it dropped the
// middle of a stream.
var runnerDropped = regexp.MustCompile(`\n\.\.\. \[(\d+) bytes dropped\] \.\.\.\n`)

// Display cuts a stream the runner returned (at most Caps.Retain,
// possibly already cut by the runner) to shown bytes: its head and tail
// with a marker saying how many bytes were dropped in between, cut on
// UTF-8 boundaries. It returns the text to show, whether it was cut
// (here or by the runner), and the full text kept ("" when nothing was cut
// here: the shown text is all there is). total is the stream's length as
// written by the code.
func Display(s string, runnerCut bool, shown int64) (text string, cut bool, full string, total int64) {
	total = int64(len(s))
	if runnerCut {
		if m := runnerDropped.FindStringSubmatchIndex(s); m != nil {
			n, _ := strconv.ParseInt(s[m[2]:m[3]], 10, 64)
			total = int64(len(s)) - int64(m[1]-m[0]) + n
		}
	}
	if int64(len(s)) <= shown {
		return s, runnerCut, "", total
	}
	half := int(shown / 2)
	head := s[:half]
	for i := 0; i < utf8.UTFMax-1 && len(head) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(head); r != utf8.RuneError || size > 1 {
			break
		}
		head = head[:len(head)-1]
	}
	tail := s[len(s)-half:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	dropped := total - int64(len(head)) - int64(len(tail))
	return head + fmt.Sprintf("\n... [%d bytes dropped] ...\n", dropped) + tail, true, s, total
}
