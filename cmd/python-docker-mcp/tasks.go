package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/mcpserver"
)

// MCP task requests (tools/call with params.task, tasks/*) are answered by
// the tool layer's own task store (mcpserver.HandleTask), which keeps
// tasks per principal and beyond the request and transport session that
// created them; the transports hand them over before mcp-go sees them.

// taskRequests answers the task requests of Streamable HTTP; every other
// request goes to next. It runs after authentication and the session
// checks: r's context carries the principal.
func taskRequests(srv *mcpserver.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if !mcpserver.IsTaskRequest(body) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		reply := srv.HandleTask(r.Context(), body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	})
}

// stdioTasks answers the task requests among the lines of in, writing each
// reply as one line to out (tasks/result waits, so each is answered on a
// goroutine of its own), and passes every other line on. ctx carries the
// principal and ends with the server.
func stdioTasks(ctx context.Context, srv *mcpserver.Server, in io.Reader, out io.Writer) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if mcpserver.IsTaskRequest(line) {
					go func(line []byte) {
						out.Write(append(srv.HandleTask(ctx, line), '\n'))
					}(line)
				} else if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}
