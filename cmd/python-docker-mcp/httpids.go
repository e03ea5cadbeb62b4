package main

import (
	"bytes"
	"io"
	"net/http"
)

// exactHTTPIDs does for Streamable HTTP what stdinFilter and stdoutFilter do
// for stdio: mcp-go reads request ids as float64, so a POSTed message whose
// numeric id would not survive that (an integer beyond 2^53, 1e3) reaches
// mcp-go with the id marked as a string (exactIDs), and the reply, JSON or
// event stream, carries the id exactly as the client wrote it. Messages
// without such an id pass through untouched.
func exactHTTPIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// A body over server.max_body_bytes: mcp-go gets the same
			// error from the reader as without this filter.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		marked := exactIDs(body)
		r.Body = io.NopCloser(bytes.NewReader(marked))
		r.ContentLength = int64(len(marked))
		if bytes.Equal(marked, body) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&idWriter{ResponseWriter: w}, r)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// idWriter restores marked ids in what mcp-go writes. mcp-go writes each
// JSON reply, and each event of a stream, with one Write. The reply gets
// shorter, so a Content-Length mcp-go set is dropped.
type idWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *idWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.Header().Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *idWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return writeRestored(w.ResponseWriter, p)
}

// Flush keeps event streams flowing through the wrapper.
func (w *idWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
