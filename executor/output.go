package executor

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// retainCap is what the runner is asked to keep of each output stream
// (outputs.max_stream_bytes, at least limits.max_output_bytes): the
// executor cuts it to limits.max_output_bytes for display and hands the
// rest to the caller as Result.StdoutFull / StderrFull.
func (c *Config) retainCap() int64 {
	return max(int64(c.Outputs.MaxStreamBytes), c.outputCap())
}

// runnerDropped matches the marker the runner puts where it dropped the
// middle of a stream.
var runnerDropped = regexp.MustCompile(`\n\.\.\. \[(\d+) bytes dropped\] \.\.\.\n`)

// displayStream cuts a stream the runner returned (at most retainCap,
// possibly already cut by the runner) to shown bytes: its head and tail
// with a marker saying how many bytes were dropped in between, cut on
// UTF-8 boundaries. It returns the text to show, whether it was cut
// (here or by the runner), and the full text kept ("" when nothing was cut
// here: the shown text is all there is). total is the stream's length as
// written by the code.
func displayStream(s string, runnerCut bool, shown int64) (text string, cut bool, full string, total int64) {
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

// A transient run's small files are read back before its sandbox goes: at
// most maxKeptFiles, each at most maxKeptFileBytes, all within
// limits.max_output_bytes.
const (
	maxKeptFiles     = 8
	maxKeptFileBytes = 64 << 10
)

// WorkspaceFile is a file a transient run left in its working directory,
// read before the sandbox was removed.
type WorkspaceFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// keepSmallFiles reads the small files a transient run wrote into
// res.FileData, in res.Files order, skipping those that are too large.
func (e *Executor) keepSmallFiles(ctx context.Context, sb *sandbox, res *Result) {
	budget := min(e.config().outputCap(), int64(maxKeptFileBytes)*maxKeptFiles)
	for _, f := range res.Files {
		if len(res.FileData) >= maxKeptFiles || budget <= 0 || sb.dead.Load() || ctx.Err() != nil {
			return
		}
		want := min(budget, maxKeptFileBytes)
		resp, fail, err := e.roundTrip(ctx, sb, &protocol.Read{Path: f, MaxBytes: want}, 5*time.Second, false, want*4/3+replySlack)
		if err != nil || fail != nil {
			return
		}
		if errorOf(resp) != nil {
			continue // too large, not a regular file, or gone
		}
		res.FileData = append(res.FileData, WorkspaceFile{Path: f, Data: resp.Data})
		budget -= int64(len(resp.Data))
	}
}
