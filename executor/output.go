package executor

import (
	"context"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

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
