package executor

import (
	"context"
	"fmt"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/clip"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// SyntaxError is CPython's verdict on code that does not parse (see Parse).
type SyntaxError = protocol.SyntaxError

// parseReplyLimit caps a parse answer: a few capped text fields as JSON.
const parseReplyLimit = clip.JSONGrowth*4*clip.MaxErrorText + replySlack

// Parse asks CPython whether code parses, without running any of it: the
// runner of a sandbox that serves this request only compiles the code to
// an AST itself (ast.PyCF_ONLY_AST, dont_inherit); no worker is involved
// and the sandbox is removed afterwards, like a transient run's. It
// returns nil when the code parses. req's Code, Owner and Limits are used
// (the timeout bounds the sandbox's start, plus StartAllowance, and the
// answer).
func (e *Executor) Parse(ctx context.Context, req Request) (*SyntaxError, error) {
	lim, err := e.prepare(Request{Code: req.Code, Limits: req.Limits}, true)
	if err != nil {
		return nil, err
	}
	pl := e.pool() // one pool for the call, whatever a reload does meanwhile
	class := limitsClass(lim)
	sb, _ := pl.Take(class, nil, req.Owner)
	if sb == nil {
		if pl.Fits(class) {
			sb, err = pl.ColdStart(ctx, nil, req.Owner, func(sctx context.Context) (*sandbox, error) {
				return e.startWithin(sctx, sandboxMeta{Kind: backend.KindTransient}, lim, lim.Timeout)
			})
		} else {
			sb, err = e.startWithin(ctx, sandboxMeta{Kind: backend.KindTransient, Owner: req.Owner}, lim, lim.Timeout)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("start sandbox: %w", ctx.Err())
			}
			return nil, err
		}
	}
	defer e.finish(sb)
	resp, f, err := e.roundTrip(ctx, sb, &protocol.Parse{Code: req.Code}, lim.Timeout+interruptGrace, false, parseReplyLimit)
	if err != nil {
		return nil, err
	}
	if f != nil {
		return nil, fmt.Errorf("parse: %s", f.reason)
	}
	if err := errorOf(resp); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	se := resp.Syntax
	if se == nil {
		return nil, nil
	}
	// The sandbox is untrusted: its answer is capped again.
	for _, s := range []*string{&se.Type, &se.Message, &se.Text, &se.Detail} {
		*s, _ = clip.Text(*s, clip.MaxErrorText)
	}
	if se.Type == "" {
		se.Type = "SyntaxError"
	}
	return se, nil
}
