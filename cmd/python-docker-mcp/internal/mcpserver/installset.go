package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// setDenied is the policy's refusal of a resolved install: a dependency
// (or the requested package as resolved) that the package rules do not
// allow. The executor returns it from Install as the Approve callback gave
// it.
type setDenied struct {
	plan       []executor.Resolved
	violations []policy.Violation
	// evalErr is set when the policy could not be evaluated.
	evalErr error
}

func (d *setDenied) Error() string {
	if d.evalErr != nil {
		return "the policy could not judge the resolved dependencies: " + d.evalErr.Error()
	}
	return fmt.Sprintf("the policy refused %d of the resolved packages", len(d.violations))
}

// approveSet is the Approve callback of one install: the request is judged
// again, now with package.resolved listing every package the install would
// add (name, exact version, the packages that require it), so each
// dependency passes the same package rules as the request (allowed,
// blocked, version constraints). in is the request's input as first
// decided.
func (s *Server) approveSet(in policy.Input) func(context.Context, []executor.Resolved) error {
	return func(ctx context.Context, plan []executor.Resolved) error {
		pkg := *in.Package
		pkg.Resolved = make([]policy.ResolvedPackage, len(plan))
		for i, r := range plan {
			pkg.Resolved[i] = policy.ResolvedPackage{Name: r.Name, Version: r.Version, RequiredBy: r.RequiredBy}
		}
		in := in
		in.Package = &pkg
		dec, err := s.d.Gate.Decide(ctx, in)
		if err != nil {
			return &setDenied{plan: plan, evalErr: err}
		}
		if !dec.Allow {
			return &setDenied{plan: plan, violations: dec.Violations}
		}
		return nil
	}
}

// setDeniedResult renders the refusal of a resolved install as a denied
// result: the violations name each refused dependency and what needs it,
// and the text lists the whole resolved set.
func (s *Server) setDeniedResult(ctx context.Context, out installOut, pkg policy.Package, d *setDenied) (*installOut, string) {
	out.Status = "denied"
	out.Packages = d.plan
	if d.evalErr != nil {
		out.Violations = []policy.Violation{{Rule: "policy.error", Msg: d.evalErr.Error()}}
		out.Message = "the policy could not be evaluated (the server's Rego failed; tell the operator): " + d.evalErr.Error()
		return &out, out.Message
	}
	out.Violations = d.violations
	var b strings.Builder
	fmt.Fprintf(&b, "denied: %s%s was not installed: the policy refuses packages it needs (%d violation(s)):\n",
		pkg.Name, pkg.Specifier, len(d.violations))
	for _, v := range d.violations {
		fmt.Fprintf(&b, "  %s: %s\n", v.Rule, v.Msg)
	}
	b.WriteString("resolved: " + describePlan(d.plan))
	out.Message = fmt.Sprintf("denied: %s needs packages the policy refuses; nothing was installed", pkg.Name)
	s.logClient(ctx, mcp.LoggingLevelWarning, "install denied", map[string]any{"tool": ToolInstallPackage, "package": pkg.Name, "violations": len(d.violations), "resolved": len(d.plan)})
	return &out, b.String()
}

// describePlan lists resolved packages: "pdma 1.0, pdmb 1.0 (required by
// pdma)".
func describePlan(plan []executor.Resolved) string {
	parts := make([]string, len(plan))
	for i, r := range plan {
		parts[i] = r.Name + " " + r.Version
		if len(r.RequiredBy) > 0 {
			parts[i] += " (required by " + strings.Join(r.RequiredBy, ", ") + ")"
		}
	}
	return strings.Join(parts, ", ")
}
