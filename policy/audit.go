package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Call identifies one tool call in the decision log: its decision line and
// its outcome line carry the same ID. The tool layer puts it in the
// context it passes to Gate.Decide.
type Call struct {
	// ID is unique per tool call (the server makes it random).
	ID string
	// MCPSession is the MCP session the call came in on ("" over stdio).
	MCPSession string
}

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the Call WithCall put in ctx.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

// Outcome is how a tool call ended, written to the decision log after the
// run as a line with "event":"outcome".
type Outcome struct {
	Tool      string
	Principal Principal
	// SessionID is the sandbox session of the call (execute-persistent,
	// install-package, file tools), "" for none.
	SessionID string
	// Status is the tool result's status: ok, error, timeout, oom, killed,
	// refused, denied, invalid, not_found… or cancelled when the client
	// cancelled the call.
	Status   string
	Duration time.Duration
}

// outcomeEntry is the JSON form of an Outcome line.
type outcomeEntry struct {
	Time       time.Time `json:"time"`
	Event      string    `json:"event"`
	CallID     string    `json:"call_id,omitempty"`
	MCPSession string    `json:"mcp_session,omitempty"`
	Tool       string    `json:"tool"`
	Principal  Principal `json:"principal"`
	SessionID  string    `json:"session_id,omitempty"`
	Outcome    string    `json:"outcome"`
	Cancelled  bool      `json:"cancelled"`
	DurationMS float64   `json:"duration_ms"`
}

// LogOutcome appends the outcome of a call to the decision log (a no-op
// without policy.decision_log). The call's identity comes from ctx
// (WithCall). Safe for concurrent use.
func (g *Gate) LogOutcome(ctx context.Context, o Outcome) error {
	p := g.engine.Load().policy
	if p.DecisionLog == "" {
		return nil
	}
	c, _ := CallFrom(ctx)
	line, err := json.Marshal(outcomeEntry{
		Time:       g.now().UTC(),
		Event:      "outcome",
		CallID:     c.ID,
		MCPSession: c.MCPSession,
		Tool:       o.Tool,
		Principal:  o.Principal,
		SessionID:  o.SessionID,
		Outcome:    o.Status,
		Cancelled:  o.Status == "cancelled",
		DurationMS: float64(o.Duration.Microseconds()) / 1000,
	})
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	return g.append(p.DecisionLog, append(line, '\n'))
}
