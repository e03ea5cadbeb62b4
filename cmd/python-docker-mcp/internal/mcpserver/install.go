package mcpserver

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
)

func (s *Server) installPackage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return toolError("install-package is not available in this version of the server: packages cannot be installed yet. "+
		"Use what the sandbox image provides (numpy, pandas, scipy, matplotlib, scikit-learn, sympy and the standard library).",
		map[string]any{"status": "unavailable"}), nil
}
