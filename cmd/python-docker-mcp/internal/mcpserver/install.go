package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Installer installs packages into package volumes; *executor.Executor is
// one.
type Installer interface {
	// Install runs the installer for one judged package.
	Install(ctx context.Context, req executor.InstallRequest) (*executor.InstallResult, error)
	// Installed is how many packages owner installed into the session
	// (or, with sessionID "", for their transient calls) so far.
	Installed(owner, sessionID string) (int, error)
}

// installArgs are install-package's arguments (its input schema).
type installArgs struct {
	PackageName string `json:"package_name" jsonschema:"Package name as on PyPI, e.g. \"tabulate\". No URLs, paths or options."`
	Version     string `json:"version,omitempty" jsonschema:"Optional version specifier, e.g. \"==0.9.0\" or \">=1.2,<2\"; a bare version such as \"0.9.0\" means ==0.9.0."`
	SessionID   string `json:"session_id,omitempty" jsonschema:"Optional persistent session to install into."`
}

// installOut is the structured content of install-package (its output
// schema).
type installOut struct {
	Package   string `json:"package" jsonschema:"The package name."`
	Version   string `json:"version" jsonschema:"Installed version."`
	SessionID string `json:"session_id" jsonschema:"The session installed into; empty for transient runs."`
	Output    string `json:"output" jsonschema:"Installer output (capped)."`
	Status    string `json:"status" jsonschema:"ok, denied (see violations), invalid (bad name or version), not_found (not in the wheelhouse or index), error, timeout, unavailable."`
	Message   string `json:"message" jsonschema:"What happened, in one sentence."`
	// RestartNeeded says the session had already imported the package, so
	// the installed version is not the one its interpreter uses.
	RestartNeeded bool               `json:"restart_needed" jsonschema:"The session had already imported this package, so its running interpreter keeps the old version: start a new session to use the installed one."`
	Violations    []policy.Violation `json:"violations"`
	// Packages is the resolved set: installed (ok) or refused (denied).
	Packages []executor.Resolved `json:"packages" jsonschema:"Every package installed (status ok) or that would have been (denied after resolving): the requested one and its dependencies, each with its exact version and required_by (the packages of this install that need it; empty for the requested one). Empty when nothing was installed."`
}

// moduleCandidates are the top-level module names a distribution is likely
// to provide: its normalized name, and that name without a "python_" or
// "py" prefix (python-dateutil -> dateutil, pyyaml -> yaml). Erring on the
// side of more names means a restart may be asked for needlessly, never
// that a stale module goes unmentioned for these common layouts.
func moduleCandidates(name string) []string {
	n := strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(name))
	out := []string{n}
	for _, prefix := range []string{"python_", "py"} {
		if rest, ok := strings.CutPrefix(n, prefix); ok && rest != "" {
			out = append(out, rest)
			break
		}
	}
	return out
}

// maxPackageArg bounds package_name and version before anything else looks
// at them.
const maxPackageArg = 128

// parsePackage reads package_name and version into a requirement, or says
// what is wrong with them. version may be a specifier (">=1,<2") or a bare
// version ("1.2.3" means "==1.2.3"); package_name may carry the specifier
// itself ("tabulate==0.9.0") when version is empty.
func parsePackage(name, version string) (policy.Package, error) {
	name, version = strings.TrimSpace(name), strings.TrimSpace(version)
	switch {
	case name == "":
		return policy.Package{}, errors.New("package_name is empty: give a package name such as \"tabulate\"")
	case len(name) > maxPackageArg:
		return policy.Package{}, fmt.Errorf("package_name is %d characters; the maximum is %d", len(name), maxPackageArg)
	case len(version) > maxPackageArg:
		return policy.Package{}, fmt.Errorf("version is %d characters; the maximum is %d", len(version), maxPackageArg)
	case strings.HasPrefix(name, "-"):
		return policy.Package{}, fmt.Errorf("package_name %q looks like an installer option: options, URLs, paths and editable installs are not accepted, only a package name", name)
	case strings.ContainsAny(name, "/\\:@;") || strings.Contains(name, ".."):
		return policy.Package{}, fmt.Errorf("package_name %q is not a package name: URLs, paths, direct references and markers are not accepted, only a name such as \"tabulate\"", name)
	}
	if version != "" && version[0] >= '0' && version[0] <= '9' {
		version = "==" + version
	}
	pkg, err := policy.ParseRequirement(name + version)
	if err != nil {
		return policy.Package{}, err
	}
	if version != "" && pkg.Name != name {
		return policy.Package{}, fmt.Errorf("package_name %q carries a version and version %q gives another: use one of them", name, version)
	}
	return pkg, nil
}

func (s *Server) installPackage(ctx context.Context, req mcp.CallToolRequest, args installArgs) (*mcp.CallToolResult, error) {
	name, version, sessionID := args.PackageName, args.Version, args.SessionID
	if s.d.Installer == nil {
		return toolError("install-package is not available in this server: it was started without a package installer. "+
			"Use what the sandbox image provides: "+imagePackages(s.d.Config())+".",
			installOut{Package: name, SessionID: sessionID, Status: "unavailable", Violations: []policy.Violation{}, Packages: []executor.Resolved{}}), nil
	}
	if cfg := s.d.Config(); cfg.Backend == "kubernetes" {
		return toolError(kubernetesInstall(cfg),
			installOut{Package: name, SessionID: sessionID, Status: "unavailable", Violations: []policy.Violation{}, Packages: []executor.Resolved{}}), nil
	}
	out := installOut{Package: name, SessionID: sessionID, Violations: []policy.Violation{}, Packages: []executor.Resolved{}}
	pkg, err := parsePackage(name, version)
	if err != nil {
		out.Status = "invalid"
		out.Message = err.Error()
		out.Violations = []policy.Violation{{Rule: "packages.input", Msg: err.Error()}}
		return toolError("invalid package request, nothing was installed: "+err.Error(), out), nil
	}
	out.Package = pkg.Name
	p := s.principal(ctx)
	count, err := s.d.Installer.Installed(p.Sub, sessionID)
	if err != nil {
		return s.installFailure(out, err), nil
	}
	in := policy.Input{Tool: ToolInstallPackage, Package: &pkg, Principal: policyPrincipal(p)}
	if sessionID != "" {
		in.Session = s.sessionInput(p.Sub, sessionID)
	} else {
		// Installs for transient calls count against the owner's transient
		// package volume, which the policy sees as a session without id.
		in.Session = &policy.Session{Owner: p.Sub, Exists: true, OwnerCount: len(s.d.Exec.Sessions(p.Sub))}
	}
	in.Session.Packages = count
	dec, err := s.d.Gate.Decide(ctx, in)
	if err != nil {
		out.Status = "denied"
		out.Violations = []policy.Violation{{Rule: "policy.error", Msg: err.Error()}}
		return toolError("the policy could not be evaluated (the server's Rego failed; tell the operator): "+err.Error(), out), nil
	}
	if !dec.Allow {
		var b strings.Builder
		fmt.Fprintf(&b, "denied: %s%s was not installed (%d violation(s)):\n", pkg.Name, pkg.Specifier, len(dec.Violations))
		for _, v := range dec.Violations {
			fmt.Fprintf(&b, "  %s: %s\n", v.Rule, v.Msg)
		}
		s.logClient(ctx, mcp.LoggingLevelWarning, "install denied", map[string]any{"tool": ToolInstallPackage, "package": pkg.Name, "violations": len(dec.Violations)})
		out.Status = "denied"
		out.Violations = dec.Violations
		return toolError(strings.TrimRight(b.String(), "\n"), out), nil
	}
	progress := s.progressFunc(ctx, req)
	if err := s.waitImage(ctx, progress); err != nil {
		return s.installFailure(out, fmt.Errorf("the sandbox image is not available: %w", err)), nil
	}
	res, err := s.d.Installer.Install(ctx, executor.InstallRequest{
		Owner: p.Sub, SessionID: sessionID, Name: pkg.Name, Specifier: pkg.Specifier, Progress: progress,
		Approve: s.approveSet(in),
	})
	var denied *setDenied
	if errors.As(err, &denied) {
		o, msg := s.setDeniedResult(ctx, out, pkg, denied)
		return toolError(msg, *o), nil
	}
	if err != nil {
		return s.installFailure(out, err), nil
	}
	out.Version, out.Output, out.Status, out.Message = res.Version, res.Output, res.Status, res.Message
	if res.Packages != nil {
		out.Packages = res.Packages
	}
	s.logClient(ctx, mcp.LoggingLevelInfo, "install finished", map[string]any{"tool": ToolInstallPackage, "package": pkg.Name, "status": res.Status, "duration_ms": res.DurationMS})
	var b strings.Builder
	b.WriteString(res.Message + "\n")
	if len(res.Packages) > 0 {
		b.WriteString("packages: " + describePlan(res.Packages) + "\n")
	}
	if res.Status == "ok" && len(res.Packages) > 0 {
		var candidates []string
		for _, r := range res.Packages {
			candidates = append(candidates, moduleCandidates(r.Name)...)
		}
		if sessionID != "" {
			if loaded := s.d.Exec.Imported(p.Sub, sessionID, candidates); len(loaded) > 0 {
				out.RestartNeeded = true
				out.Message = fmt.Sprintf("%s; session %s already imported %s, so its running interpreter keeps the version it loaded: "+
					"start a new session (execute-persistent without session_id, then install again) to use %s %s", res.Message, sessionID, strings.Join(loaded, ", "), pkg.Name, res.Version)
				fmt.Fprintf(&b, "restart needed: session %s already imported %s and keeps the old version loaded; "+
					"start a new session (execute-persistent without session_id) and install %s there to use %s\n", sessionID, strings.Join(loaded, ", "), pkg.Name, res.Version)
			} else {
				fmt.Fprintf(&b, "importable in the next call of session %s (no restart needed)\n", sessionID)
			}
		} else {
			b.WriteString("importable in your next execute-transient calls (they start a fresh sandbox that has your packages)\n")
		}
	}
	if res.Output != "" {
		b.WriteString("--- installer output ---\n" + res.Output)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(strings.TrimRight(b.String(), "\n"))},
		StructuredContent: out,
		IsError:           res.Status != "ok",
	}, nil
}

// installFailure renders an installer error as an isError result.
func (s *Server) installFailure(out installOut, err error) *mcp.CallToolResult {
	out.Status = "error"
	msg := err.Error()
	switch {
	case errors.Is(err, executor.ErrUnknownSession):
		msg = fmt.Sprintf("unknown session %q: it does not exist (or is not yours). Call %s without session_id to create one, or omit session_id to install for your transient runs.", out.SessionID, ToolExecutePersistent)
	case errors.Is(err, executor.ErrExpiredSession):
		msg = fmt.Sprintf("session %q has expired; its packages are gone. Start a new session with %s.", out.SessionID, ToolExecutePersistent)
	case errors.Is(err, executor.ErrInvalidRequest):
		out.Status = "invalid"
	case errors.Is(err, context.Canceled):
		out.Status, msg = "killed", "the request was cancelled; the installer was stopped and removed"
	}
	out.Message = msg
	return toolError(msg, out)
}

// kubernetesInstall says why install-package refuses on the Kubernetes
// backend and what is there instead.
func kubernetesInstall(cfg config.Config) string {
	return "install-package is not available on this server: its sandboxes are Kubernetes Pods, which get no package volume the server could fill at run time " +
		"(backend: kubernetes), so nothing was installed. Use what the sandbox image " + cfg.Docker.Image + " provides: " + imagePackages(cfg) +
		". More packages come with a sandbox image that has them, which the operator builds and makes available to the nodes " +
		"(see executor/kubernetes/README.md, Packages)."
}
