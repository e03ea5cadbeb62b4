package executor

import "github.com/python-docker-mcp/python-docker-mcp/executor/protocol"

// maxRequestFrame caps one frame the server sends.
const maxRequestFrame = protocol.MaxRequestFrame

// idleFrameLimit caps a frame from the sandbox when no request is waiting
// for one: the ready frame, or anything the sandbox has no business
// sending.
const idleFrameLimit = 64 << 10

// errFrameTooLarge: the sandbox announced a frame longer than the limit of
// the request it answers.
var errFrameTooLarge = protocol.ErrFrameTooLarge

var (
	writeFrame  = protocol.WriteFrame
	readFrame   = protocol.ReadFrame
	decodeReply = protocol.DecodeReply
)
