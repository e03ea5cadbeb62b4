package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// Check is the verdict on the code of one execute call: the static step's
// facts and the decision, as the server and `policy check` both judge it.
type Check struct {
	// Facts are the static facts (empty, not nil, when the code was not
	// analysed: bash, or the static step refused it).
	Facts analyze.Facts
	// Syntax is set when the static step could not parse the code. The
	// Decision then judged the call with no facts (may this caller run
	// code at all?); CPython's own verdict needs a sandbox and is the
	// caller's to get, or Denied(Syntax) stands.
	Syntax *analyze.Error
	// Decision is the policy's. When the static step refused the code for
	// another reason (size, encoding, nesting) it is that denial and the
	// Rego was not evaluated.
	Decision Decision
}

// Check runs the static step on src (python; bash is not analysed, only
// its size is checked) and decides in with its facts; in.Code is filled
// here. The error is the policy's failure to decide, to be treated as a
// denial.
func (e *Engine) Check(ctx context.Context, in Input, src []byte) (Check, error) {
	return e.check(ctx, in, src, e.Decide)
}

// Check is Engine.Check with the current engine, logging the decision.
func (g *Gate) Check(ctx context.Context, in Input, src []byte) (Check, error) {
	return g.Engine().check(ctx, in, src, g.Decide)
}

func (e *Engine) check(ctx context.Context, in Input, src []byte, decide func(context.Context, Input) (Decision, error)) (Check, error) {
	var c Check
	var err error
	if in.Language == "bash" {
		c.Facts = noFacts()
		if e.maxCode > 0 && len(src) > e.maxCode {
			err = &analyze.Error{Line: 1, Kind: "size", Msg: fmt.Sprintf("the code is %d bytes; the maximum is %d (limits.max_code_bytes)", len(src), e.maxCode)}
		}
	} else {
		c.Facts, err = analyze.Source(src, analyze.Options{MaxBytes: e.maxCode, MaxExpressionTokens: e.maxExpr})
	}
	if err != nil {
		c.Facts = noFacts()
		if aerr := (*analyze.Error)(nil); errors.As(err, &aerr) && aerr.Kind == "syntax" {
			c.Syntax = aerr
		} else if errors.As(err, &aerr) && aerr.Kind == "expression" {
			// a limit: the rules decide it (limits.expression_size) from
			// the measured size, with no facts; never an allow
			in.Code = NewCode(c.Facts, src)
			in.Code.Expression = &Expression{Tokens: aerr.Size, Line: aerr.Line, Col: aerr.Col}
			c.Decision, err = decide(ctx, in)
			if err == nil && c.Decision.Allow {
				c.Decision = Denied(aerr)
			} else if err == nil && !slices.ContainsFunc(c.Decision.Violations, func(v Violation) bool { return v.Rule == "limits.expression_size" }) {
				c.Decision.Violations = append(c.Decision.Violations, AnalyzeViolation(aerr))
			}
			return c, err
		} else {
			c.Decision = Denied(err)
			return c, nil
		}
	}
	in.Code = NewCode(c.Facts, src)
	c.Decision, err = decide(ctx, in)
	return c, err
}

// Denied is the decision on code the static step refused with err: a
// denial with err's violation and empty lists.
func Denied(err error) Decision {
	d := Decision{Violations: []Violation{AnalyzeViolation(err)}, Warnings: []Violation{}}
	d.Modules.Allowed, d.Modules.Blocked, d.Calls.Blocked = []string{}, []string{}, []string{}
	d.Capabilities.Sockets = []string{}
	return d
}

func noFacts() analyze.Facts {
	return analyze.Facts{Imports: []analyze.Import{}, Dynamic: []analyze.Dynamic{}, Calls: []analyze.Call{}, References: []analyze.Call{}}
}
