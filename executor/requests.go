package executor

import (
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The executor's types as the runner protocol carries them (package
// protocol has its own, so that it depends on nothing of the executor).

func wireCapabilities(c *Capabilities) *protocol.Capabilities {
	if c == nil {
		return nil
	}
	return &protocol.Capabilities{Processes: c.Processes, Sockets: c.Sockets, PTY: c.PTY, NativeCode: c.NativeCode}
}

func wireModules(m ModuleRules) protocol.ModuleRules {
	w := protocol.ModuleRules{Allowed: m.Allowed, Blocked: m.Blocked}
	for _, g := range m.Calls {
		w.Calls = append(w.Calls, protocol.CallGuard{Name: g.Name, Entry: g.Entry, Event: g.Event, Direct: g.Direct})
	}
	return w
}

// wireImports never returns nil: the runner compares the list with its
// own parse, and an empty list is a fact too.
func wireImports(imports []analyze.Import) []protocol.Import {
	w := make([]protocol.Import, 0, len(imports))
	for _, im := range imports {
		p := protocol.Import{Module: im.Module, Level: im.Level, From: im.From, Alias: im.Alias, Line: im.Line}
		for _, a := range im.Names {
			p.Names = append(p.Names, protocol.Alias{Name: a.Name, AsName: a.AsName})
		}
		w = append(w, p)
	}
	return w
}
