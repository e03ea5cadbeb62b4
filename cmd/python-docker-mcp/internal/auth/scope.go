package auth

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// ScopeFor returns the scopes a JSON-RPC request needs beyond a valid token:
//
//   - tools/call of execute-transient, execute-persistent: s.Execute;
//   - tools/call of install-package: s.Install;
//   - tools/call of cleanup-session, list-sessions, read-file, write-file,
//     list-files: s.Sessions;
//   - tools/call of any other tool: every scope (fail closed: a tool added
//     without a scope here is usable only by a token holding them all);
//   - resources/read, resources/subscribe (session files): s.Sessions;
//   - anything else (initialize, tools/list, ping, notifications, …): none.
func ScopeFor(s config.Scopes, method, tool string) []string {
	switch method {
	case "tools/call":
		switch tool {
		case policy.ToolExecuteTransient, policy.ToolExecutePersistent:
			return []string{s.Execute}
		case policy.ToolInstallPackage:
			return []string{s.Install}
		case policy.ToolCleanupSession, policy.ToolListSessions, policy.ToolReadFile, policy.ToolWriteFile, policy.ToolListFiles:
			return []string{s.Sessions}
		default:
			return allScopes(s)
		}
	case "resources/read", "resources/subscribe":
		return []string{s.Sessions}
	}
	return nil
}

// call is what the middleware needs to know of a JSON-RPC message.
type call struct {
	method string
	name   string // params.name of a tools/call
}

// peekCall decodes the method and tool name of a JSON-RPC message. It decodes
// with encoding/json into structs, as mcp-go does, so both read the same
// method and name (case-insensitive keys, the last duplicate wins). When the
// params do not decode but the method does, the name is left empty, which
// ScopeFor treats as an unknown tool (fail closed). ok is false when not even
// the method decodes (not one JSON object, e.g. a batch): mcp-go answers that
// with a parse error without running anything.
func peekCall(body []byte) (call, bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &m); err == nil {
		return call{method: m.Method, name: m.Params.Name}, true
	}
	var only struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(body, &only); err != nil {
		return call{}, false
	}
	return call{method: only.Method}, true
}

func missingScopes(p Principal, need []string) []string {
	var missing []string
	for _, s := range need {
		if !p.Has(s) {
			missing = append(missing, s)
		}
	}
	return missing
}

func allScopes(s config.Scopes) []string {
	return []string{s.Execute, s.Install, s.Sessions}
}

func checkScopes(s config.Scopes) error {
	for _, kv := range [][2]string{{"execute", s.Execute}, {"install", s.Install}, {"sessions", s.Sessions}} {
		if kv[1] == "" {
			return fmt.Errorf("auth.scopes.%s is empty: every tool group needs a scope name", kv[0])
		}
		if slices.ContainsFunc([]byte(kv[1]), func(c byte) bool { return c <= 0x20 || c == '"' || c == '\\' || c >= 0x7f }) {
			return fmt.Errorf("auth.scopes.%s %q: a scope is one token without spaces, quotes or backslashes (RFC 6749 §3.3)", kv[0], kv[1])
		}
	}
	return nil
}
