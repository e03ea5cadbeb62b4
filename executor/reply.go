package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Caps of one reply from the sandbox. The runner applies them already; the
// server applies them again because the sandbox runs untrusted code.
const (
	// jsonGrowth is how much JSON may grow a string: a control character
	// becomes a 6-byte \u00XX escape.
	jsonGrowth = 6
	// maxErrorText caps the message and the traceback of a RunError.
	maxErrorText = 64 << 10
	// maxDropped caps DroppedState, StateTooLarge and MissingState
	// entries; each name and type at 256 bytes.
	maxDropped = 1000
	// maxUnreturned caps Unreturned, 256 bytes a name.
	maxUnreturned = 100
	// maxFiles and maxFilesBytes cap Result.Files.
	maxFiles      = 1000
	maxFilesBytes = 256 << 10
	// truncationSlack is room for a "... [N bytes dropped] ..." marker.
	truncationSlack = 256
	// replySlack covers the fixed fields of a reply.
	replySlack = 64 << 10
	// preloadReplyLimit caps a preload answer (the list of failed imports).
	preloadReplyLimit = 1 << 20
	// listReplyLimit caps a list answer: the runner stops listing after
	// 2 MiB of entries.
	listReplyLimit = jsonGrowth*(2<<20) + replySlack
)

func (c *Config) stateCap() int64 {
	if v := int64(c.Limits.MaxStateBytes); v > 0 {
		return v
	}
	return 1 << 20
}

func (c *Config) imageCap() int64 {
	if v := int64(c.Limits.MaxImageBytes); v > 0 {
		return v
	}
	return 4 << 20
}

// runReplyLimit is the largest run reply the server reads: the sum of the
// configured caps (stdout, stderr and the result at the retained output
// cap, the error text, dropped-state names, the files list, as JSON), the
// state cap, the images as base64, and slack. A reply announcing more
// kills the sandbox before any of it is read.
func (c *Config) runReplyLimit() int64 {
	out := c.retainCap()
	text := 3*(out+truncationSlack) + 2*maxErrorText + maxDropped*1200 + maxUnreturned*300 + maxFilesBytes + maxFiles*8
	return jsonGrowth*text + jsonGrowth*c.stateCap() + c.imageCap()*4/3 + maxImages*256 + richReplyLimit + replySlack
}

// richReplyLimit is what the rich representations add to a run reply:
// their HTML and SVG as base64 (their PNGs are within the image cap), and
// each item's and each dropped entry's fields.
const richReplyLimit = protocol.MaxRichTotalBytes*4/3 + protocol.MaxRich*256 + protocol.MaxRichDropped*2048

// readReplyLimit caps a read answer: the file as base64.
func (c *Config) readReplyLimit() int64 {
	return c.FileLimits().ReadChunk*4/3 + replySlack
}

// clipText keeps at most max bytes of s: its head and tail around a
// marker, cut at rune boundaries. It reports whether it cut.
func clipText(s string, max int64) (string, bool) {
	if int64(len(s)) <= max+truncationSlack {
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
		names[i], _ = clipText(names[i], 256-truncationSlack)
	}
	return names
}

// capResult re-applies the output, state, image, file and error caps to a
// run reply, in place: what is over a cap is cut (text) or dropped (images,
// files, dropped-state entries); a state over its cap (which the runner
// trims, so only a misbehaving sandbox sends one) is left out whole, each
// of its globals named in StateTooLarge, and the status stays the run's.
//
// Streams are kept up to the retained cap (outputs.max_stream_bytes): the
// run's result cuts them for display and keeps the rest as a resource. A
// final expression's repr is shown whole, so it is cut at the output cap.
func (c *Config) capResult(r *runnerResponse, transient bool) {
	stream := c.retainCap()
	var cut bool
	if r.Stdout, cut = clipText(r.Stdout, stream); cut {
		r.StdoutTruncated = true
	}
	if r.Stderr, cut = clipText(r.Stderr, stream); cut {
		r.StderrTruncated = true
	}
	if r.Result != nil {
		s, _ := clipText(*r.Result, c.outputCap())
		r.Result = &s
	}
	if r.Error != nil {
		r.Error.Type, _ = clipText(r.Error.Type, 256-truncationSlack)
		r.Error.Message, _ = clipText(r.Error.Message, maxErrorText)
		r.Error.Traceback, _ = clipText(r.Error.Traceback, maxErrorText)
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
		case int64(len(st)) > c.stateCap()+truncationSlack:
			r.State = nil
			if json.Unmarshal(st, &members) == nil {
				var all []StateSize
				for k, v := range members {
					all = append(all, StateSize{Name: k, Bytes: int64(len(v))})
				}
				sort.Slice(all, func(i, j int) bool { return all[i].Bytes > all[j].Bytes })
				r.StateTooLarge = append(all, r.StateTooLarge...)
			}
		}
	}
	if len(r.DroppedState) > maxDropped {
		r.DroppedState = r.DroppedState[:maxDropped]
	}
	if len(r.StateTooLarge) > maxDropped {
		r.StateTooLarge = r.StateTooLarge[:maxDropped]
	}
	for i := range r.StateTooLarge {
		r.StateTooLarge[i].Name, _ = clipText(r.StateTooLarge[i].Name, 256-truncationSlack)
		if r.StateTooLarge[i].Bytes < 0 {
			r.StateTooLarge[i].Bytes = 0
		}
	}
	r.MissingState = clipNames(r.MissingState, maxDropped)
	r.Unreturned = clipNames(r.Unreturned, maxUnreturned)
	for i := range r.DroppedState {
		r.DroppedState[i].Name, _ = clipText(r.DroppedState[i].Name, 256-truncationSlack)
		r.DroppedState[i].Type, _ = clipText(r.DroppedState[i].Type, 256-truncationSlack)
	}
	pngs, total := c.capRich(r)
	var kept []Image
	for _, im := range r.Images {
		if pngs+len(kept) >= maxImages || total+int64(len(im.PNG)) > c.imageCap() {
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
		if len(files) >= maxFiles || size > maxFilesBytes {
			break
		}
		files = append(files, f)
	}
	r.Files = files
}

// capRich re-applies the bounds of rich representations (see
// protocol.Rich) to r, in place: an item of an unknown type or with text
// that is not UTF-8 is left out; one over a bound moves to RichDropped,
// named with the bound. It returns the count and bytes of the PNG items
// kept, which the figures share.
func (c *Config) capRich(r *runnerResponse) (pngs int, pngBytes int64) {
	if len(r.RichDropped) > protocol.MaxRichDropped {
		r.RichDropped = r.RichDropped[:protocol.MaxRichDropped]
	}
	for i := range r.RichDropped {
		d := &r.RichDropped[i]
		d.MIME, _ = clipText(d.MIME, 64)
		d.From, _ = clipText(d.From, 16)
		d.Why, _ = clipText(d.Why, 32)
		d.Error, _ = clipText(d.Error, 512)
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
			if pngs >= maxImages {
				drop(it, protocol.RichOverImageCount, maxImages)
				continue
			}
			if pngBytes+size > c.imageCap() {
				drop(it, protocol.RichOverImageBytes, c.imageCap())
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
