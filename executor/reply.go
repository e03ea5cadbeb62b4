package executor

import "github.com/python-docker-mcp/python-docker-mcp/executor/internal/clip"

// Caps of one reply from the sandbox (package internal/clip applies them).
const (
	preloadReplyLimit = clip.PreloadReplyLimit
	listReplyLimit    = clip.ListReplyLimit
	replySlack        = clip.ReplySlack
)

// caps are the reply caps of the configuration: what is shown and kept
// of a run's streams, its state and its images.
func (c *Config) caps() clip.Caps {
	return clip.Caps{Output: c.outputCap(), Retain: c.retainCap(), State: c.stateCap(), Image: c.imageCap(), Images: maxImages}
}

func (c *Config) outputCap() int64 {
	if v := int64(c.Limits.MaxOutputBytes); v > 0 {
		return v
	}
	return 1 << 20
}

// retainCap is what the runner is asked to keep of each output stream
// (outputs.max_stream_bytes, at least limits.max_output_bytes): the
// executor cuts it to limits.max_output_bytes for display and hands the
// rest to the caller as Result.StdoutFull / StderrFull.
func (c *Config) retainCap() int64 {
	return max(int64(c.Outputs.MaxStreamBytes), c.outputCap())
}

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

// runReplyLimit is the largest run reply the server reads (clip.Caps.RunReply).
func (c *Config) runReplyLimit() int64 { return c.caps().RunReply() }

// readReplyLimit caps a read answer: the file as base64.
func (c *Config) readReplyLimit() int64 {
	return c.FileLimits().ReadChunk*4/3 + replySlack
}
