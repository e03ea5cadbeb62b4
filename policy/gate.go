package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Gate is what the server decides with: it holds the current Engine,
// swaps in a new one on Reload, and writes the decision log
// (policy.decision_log). All methods are safe for concurrent use.
type Gate struct {
	engine atomic.Pointer[Engine]
	reload sync.Mutex // serialises Reload

	mu   sync.Mutex // guards the log file
	log  *os.File
	path string
	now  func() time.Time
}

// NewGate returns a Gate deciding with e. The decision log, if e's
// configuration names one, is opened on the first decision.
func NewGate(e *Engine) *Gate {
	g := &Gate{now: time.Now}
	g.engine.Store(e)
	return g
}

// Engine returns the current engine.
func (g *Gate) Engine() *Engine { return g.engine.Load() }

// Decide decides in with the current engine and logs the decision. An
// error (no decision, or a configured decision log that cannot be
// written) must be treated as a denial.
func (g *Gate) Decide(ctx context.Context, in Input) (Decision, error) {
	e := g.engine.Load()
	d, err := e.Decide(ctx, in)
	if err != nil {
		return Decision{}, err
	}
	if e.policy.DecisionLog != "" {
		if err := g.write(ctx, e.policy, in, d); err != nil {
			return Decision{}, err
		}
	}
	return d, nil
}

// Reload builds an engine from cfg and swaps it in. On error the current
// engine stays in place and the error says why (a *CompileError lists
// file:line: message for each Rego problem).
func (g *Gate) Reload(ctx context.Context, cfg config.Config) error {
	g.reload.Lock()
	defer g.reload.Unlock()
	e, err := Load(ctx, cfg)
	if err != nil {
		return err
	}
	g.engine.Store(e)
	return nil
}

// Close closes the decision log.
func (g *Gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.log == nil {
		return nil
	}
	err := g.log.Close()
	g.log, g.path = nil, ""
	return err
}

// LogEntry is one line of the decision log.
type LogEntry struct {
	Time time.Time `json:"time"`
	Tool string    `json:"tool"`
	// Language is set when an execute call's code is not Python ("bash").
	Language   string      `json:"language,omitempty"`
	Principal  Principal   `json:"principal"`
	Allow      bool        `json:"allow"`
	Violations []Violation `json:"violations"`
	// Package is the requested package of install-package.
	Package *Package `json:"package,omitempty"`
	// Runtime is the decision's runtime when it is not the daemon's or
	// cluster's default (""), e.g. "runsc".
	Runtime string `json:"runtime,omitempty"`
	// CodeSHA256 is the hex SHA-256 of the code (Input.Code.Source).
	CodeSHA256 string `json:"code_sha256,omitempty"`
	// Code is the code itself, only with policy.decision_log_code.
	Code *string `json:"code,omitempty"`
	// CallID and MCPSession identify the tool call (see Call); its outcome
	// line carries the same CallID. SessionID is the sandbox session.
	CallID     string `json:"call_id,omitempty"`
	MCPSession string `json:"mcp_session,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
}

func (g *Gate) write(ctx context.Context, p config.Policy, in Input, d Decision) error {
	entry := LogEntry{
		Time:       g.now().UTC(),
		Tool:       in.Tool,
		Principal:  in.Principal,
		Allow:      d.Allow,
		Violations: d.Violations,
		Package:    in.Package,
		Runtime:    d.Runtime,
	}
	if in.Language != "" && in.Language != "python" {
		entry.Language = in.Language
	}
	if c, ok := CallFrom(ctx); ok {
		entry.CallID, entry.MCPSession = c.ID, c.MCPSession
	}
	if in.Session != nil {
		entry.SessionID = in.Session.ID
	}
	if in.Code != nil && in.Code.Source != nil {
		sum := sha256.Sum256(in.Code.Source)
		entry.CodeSHA256 = hex.EncodeToString(sum[:])
		if p.DecisionLogCode {
			s := string(in.Code.Source)
			entry.Code = &s
		}
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	return g.append(p.DecisionLog, append(line, '\n'))
}

// append writes one line to the decision log at path, (re)opening it when
// the configured path changed.
func (g *Gate) append(path string, line []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.path != path {
		if g.log != nil {
			g.log.Close()
			g.log, g.path = nil, ""
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("decision log (policy.decision_log): %w", err)
		}
		g.log, g.path = f, path
	}
	if _, err := g.log.Write(line); err != nil {
		return fmt.Errorf("decision log %s: %w", g.path, err)
	}
	return nil
}
