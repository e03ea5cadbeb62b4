package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// sessionArg is the session a session or file tool works on.
type sessionArg struct {
	SessionID string `json:"session_id" jsonschema:"The id of a persistent session, as returned by execute-persistent."`
}

// sessionArgs are cleanup-session's arguments.
type sessionArgs struct {
	sessionArg
}

// noArgs are the arguments of a tool that takes none (list-sessions).
type noArgs struct{}

// fileArgs are read-file's arguments.
type fileArgs struct {
	sessionArg
	Path   string `json:"path" jsonschema:"Path relative to /workspace (or absolute under /workspace)."`
	Offset int64  `json:"offset,omitempty" jsonschema:"Byte offset to read from; default 0. Pass the previous result's next_offset while more is true."`
	Length int64  `json:"length,omitempty" jsonschema:"Most bytes to return; default (and at most) the per-call limit in the tool description."`
}

// writeFileArgs are write-file's arguments.
type writeFileArgs struct {
	sessionArg
	Path     string `json:"path" jsonschema:"Path relative to /workspace (or absolute under /workspace)."`
	Content  string `json:"content" jsonschema:"File content, as text or base64 (see encoding)."`
	Encoding string `json:"encoding,omitempty" jsonschema:"How content is encoded."`
	Append   bool   `json:"append,omitempty" jsonschema:"Add content at the end of the file (creating it if missing) instead of replacing it: send a large file in parts, the first without append."`
}

// listFilesArgs are list-files' arguments.
type listFilesArgs struct {
	sessionArg
	Path string `json:"path,omitempty" jsonschema:"Directory relative to /workspace; default the top."`
}

// cleanupOut is cleanup-session's result.
type cleanupOut struct {
	SessionID string `json:"session_id"`
	Removed   bool   `json:"removed"`
}

// sessionsOut is list-sessions' result.
type sessionsOut struct {
	Sessions []sessionOut `json:"sessions"`
}

type sessionOut struct {
	SessionID        string  `json:"session_id"`
	Created          string  `json:"created" jsonschema:"RFC 3339 time."`
	LastUsed         string  `json:"last_used" jsonschema:"RFC 3339 time."`
	AgeSeconds       float64 `json:"age_seconds"`
	IdleSeconds      float64 `json:"idle_seconds"`
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
	Busy             bool    `json:"busy"`
}

// readFileOut is read-file's result.
type readFileOut struct {
	Path       string `json:"path"`
	Size       int    `json:"size" jsonschema:"Bytes of the file in content."`
	Encoding   string `json:"encoding"`
	Content    string `json:"content"`
	URI        string `json:"uri,omitempty"`
	Offset     int64  `json:"offset" jsonschema:"Where content starts in the file."`
	TotalSize  int64  `json:"total_size" jsonschema:"The file's size in bytes."`
	More       bool   `json:"more" jsonschema:"The file goes on after content: call again with offset next_offset."`
	NextOffset int64  `json:"next_offset" jsonschema:"offset plus size: where the next part starts."`
}

// writeFileOut is write-file's result.
type writeFileOut struct {
	Path      string `json:"path"`
	Size      int    `json:"size" jsonschema:"Bytes written by this call."`
	TotalSize int64  `json:"total_size" jsonschema:"The file's size in bytes after this call."`
	URI       string `json:"uri,omitempty"`
}

// listFilesOut is list-files' result.
type listFilesOut struct {
	Path  string    `json:"path"`
	Files []fileOut `json:"files"`
}

type fileOut struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Dir      bool   `json:"dir"`
	Modified string `json:"modified,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// fileURI is the resource URI of a session file; p is relative to the
// working directory or absolute inside it (/workspace/x and x are the same
// file, and get the same URI).
func (s *Server) fileURI(sessionID, p string) string {
	return "sandbox://" + sessionID + "/" + relPath(s.d.Config().Docker.WorkingDir, p)
}

// relPath makes p relative to the working directory wd when it is absolute
// inside it; other paths are cleaned and left for the executor to judge.
func relPath(wd, p string) string {
	if strings.HasPrefix(p, "/") {
		wd = path.Clean(wd)
		cp := path.Clean(p)
		if cp == wd {
			return "."
		}
		if rest, ok := strings.CutPrefix(cp, wd+"/"); ok {
			return rest
		}
		return strings.TrimPrefix(cp, "/")
	}
	return path.Clean(p)
}

// parseFileURI splits sandbox://SESSION/PATH.
func parseFileURI(uri string) (sessionID, p string, err error) {
	rest, ok := strings.CutPrefix(uri, "sandbox://")
	if !ok {
		return "", "", fmt.Errorf("resource %q: want sandbox://SESSION_ID/PATH", uri)
	}
	sessionID, p, _ = strings.Cut(rest, "/")
	if sessionID == "" || p == "" {
		return "", "", fmt.Errorf("resource %q: want sandbox://SESSION_ID/PATH", uri)
	}
	return sessionID, p, nil
}

func mimeFor(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// sessionGate asks the policy about a session or file tool.
func (s *Server) sessionGate(ctx context.Context, tool, sessionID string) (string, *mcp.CallToolResult) {
	p := s.principal(ctx)
	in := policy.Input{Tool: tool, Principal: policyPrincipal(p), Session: s.sessionInput(p.Sub, sessionID)}
	dec, err := s.d.Gate.Decide(ctx, in)
	if err != nil {
		return "", toolError("the policy could not be evaluated (tell the operator): "+err.Error(), nil)
	}
	if !dec.Allow {
		var b strings.Builder
		b.WriteString("denied:")
		for _, v := range dec.Violations {
			fmt.Fprintf(&b, " %s: %s;", v.Rule, v.Msg)
		}
		return "", toolError(strings.TrimSuffix(b.String(), ";"), nil)
	}
	return p.Sub, nil
}

// sessionError says what to do about a failed session or file operation.
func sessionError(sessionID string, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, executor.ErrUnknownSession):
		return toolError(fmt.Sprintf("unknown session %q: it does not exist (or is not yours); list-sessions shows yours", sessionID), nil)
	case errors.Is(err, executor.ErrExpiredSession):
		return toolError(fmt.Sprintf("session %q has expired; its files are gone", sessionID), nil)
	case errors.Is(err, executor.ErrInvalidPath):
		return toolError(err.Error()+" (paths must stay inside /workspace)", nil)
	}
	var lerr *executor.FileLimitError
	if errors.As(err, &lerr) {
		return toolError(err.Error()+"; "+fileLimitAdvice(lerr), nil)
	}
	return toolError(err.Error(), nil)
}

// fileLimitAdvice says what to do about a file operation refused at a
// limit.
func fileLimitAdvice(e *executor.FileLimitError) string {
	switch e.Limit {
	case executor.LimitWriteChunk:
		return fmt.Sprintf("nothing was written. Send the file in parts of at most %d bytes: the first with write-file as usual, each next one with append: true", e.Max)
	case executor.LimitFile:
		if e.Op == "write" {
			return "nothing was written. Keep the file smaller (compress it, or split it into several files) or ask the operator to raise limits.max_file_bytes"
		}
		return "nothing was read. Make it smaller in the session first (compress it, or split it into files of at most that size with execute-persistent) or ask the operator to raise limits.max_file_bytes"
	case executor.LimitWorkspace:
		return "nothing of this call was kept. Delete files the session no longer needs (execute-persistent) or ask the operator to raise docker.workspace_size"
	case executor.LimitReadChunk:
		return "read-file reads it in parts (offset and length)"
	}
	return ""
}

func (s *Server) cleanupSession(ctx context.Context, _ mcp.CallToolRequest, args sessionArgs) (*mcp.CallToolResult, error) {
	id := args.SessionID
	owner, refusal := s.sessionGate(ctx, ToolCleanupSession, id)
	if refusal != nil {
		return refusal, nil
	}
	if err := s.d.Exec.Cleanup(ctx, owner, id); err != nil {
		return sessionError(id, err), nil
	}
	return mcp.NewToolResultStructured(cleanupOut{SessionID: id, Removed: true}, "session "+id+" removed"), nil
}

func (s *Server) listSessions(ctx context.Context, _ mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, error) {
	owner, refusal := s.sessionGate(ctx, ToolListSessions, "")
	if refusal != nil {
		return refusal, nil
	}
	now := time.Now()
	out := sessionsOut{Sessions: []sessionOut{}}
	var b strings.Builder
	for _, si := range s.d.Exec.Sessions(owner) {
		out.Sessions = append(out.Sessions, sessionOut{
			SessionID:        si.ID,
			Created:          si.Created.UTC().Format(time.RFC3339),
			LastUsed:         si.LastUsed.UTC().Format(time.RFC3339),
			AgeSeconds:       now.Sub(si.Created).Seconds(),
			IdleSeconds:      now.Sub(si.LastUsed).Seconds(),
			ExpiresInSeconds: si.Expires.Sub(now).Seconds(),
			Busy:             si.Busy,
		})
		fmt.Fprintf(&b, "%s  age %s  idle %s  expires in %s\n", si.ID, now.Sub(si.Created).Round(time.Second), now.Sub(si.LastUsed).Round(time.Second), si.Expires.Sub(now).Round(time.Second))
	}
	if len(out.Sessions) == 0 {
		b.WriteString("no sessions")
	}
	return mcp.NewToolResultStructured(out, strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) readFile(ctx context.Context, req mcp.CallToolRequest, args fileArgs) (*mcp.CallToolResult, error) {
	id, p := args.SessionID, args.Path
	owner, refusal := s.sessionGate(ctx, ToolReadFile, id)
	if refusal != nil {
		return refusal, nil
	}
	c, err := s.d.Exec.ReadFileAt(ctx, owner, id, p, args.Offset, args.Length)
	if err != nil {
		return sessionError(id, err), nil
	}
	if c.More() {
		c.Data = runeCut(c.Data)
	}
	data := c.Data
	out := readFileOut{Path: p, Size: len(data), URI: s.fileURI(id, p), Offset: c.Offset, TotalSize: c.FileSize,
		More: c.More(), NextOffset: c.Offset + int64(len(data))}
	s.byteProgress(ctx, req)(out.NextOffset, c.FileSize, fmt.Sprintf("read %s: %d of %d bytes", p, out.NextOffset, c.FileSize))
	part := ""
	if out.Offset > 0 || out.More {
		part = fmt.Sprintf("bytes %d-%d of %d", out.Offset, out.NextOffset, out.TotalSize)
		if out.More {
			part += fmt.Sprintf("; more remains: call read-file again with offset %d", out.NextOffset)
		}
	}
	if utf8.Valid(data) {
		out.Encoding, out.Content = "text", string(data)
		if part != "" {
			return mcp.NewToolResultStructured(out, string(data)+"\n--- "+p+": "+part+" ---"), nil
		}
		return mcp.NewToolResultStructured(out, string(data)), nil
	}
	out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(data)
	if part != "" {
		return mcp.NewToolResultStructured(out, fmt.Sprintf("%s: %s of binary data (base64 in structured content)", p, part)), nil
	}
	return mcp.NewToolResultStructured(out, fmt.Sprintf("%s: %d bytes of binary data (base64 in structured content)", p, len(data))), nil
}

// runeCut drops an incomplete UTF-8 character at the end of a part of a
// text file, so that it stays text; the next part starts with it. Data that
// is not UTF-8 in any case is returned as it is.
func runeCut(data []byte) []byte {
	for n := 1; n < utf8.UTFMax && n < len(data); n++ {
		if utf8.RuneStart(data[len(data)-n]) {
			if !utf8.FullRune(data[len(data)-n:]) && utf8.Valid(data[:len(data)-n]) {
				return data[:len(data)-n]
			}
			break
		}
	}
	return data
}

func (s *Server) writeFile(ctx context.Context, req mcp.CallToolRequest, args writeFileArgs) (*mcp.CallToolResult, error) {
	id, p := args.SessionID, args.Path
	owner, refusal := s.sessionGate(ctx, ToolWriteFile, id)
	if refusal != nil {
		return refusal, nil
	}
	data := []byte(args.Content)
	if args.Encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(args.Content); err != nil {
			return toolError("content is not valid base64: "+err.Error(), nil), nil
		}
	}
	size := int64(len(data))
	var err error
	if args.Append {
		size, err = s.d.Exec.AppendFile(ctx, owner, id, p, data)
	} else {
		err = s.d.Exec.WriteFile(ctx, owner, id, p, data)
	}
	if err != nil {
		return sessionError(id, err), nil
	}
	s.byteProgress(ctx, req)(size, 0, fmt.Sprintf("write %s: the file is %d bytes", p, size))
	msg := fmt.Sprintf("wrote %d bytes to %s", len(data), p)
	if args.Append {
		msg = fmt.Sprintf("appended %d bytes to %s (now %d bytes)", len(data), p, size)
	}
	return mcp.NewToolResultStructured(writeFileOut{Path: p, Size: len(data), TotalSize: size, URI: s.fileURI(id, p)}, msg), nil
}

func (s *Server) listFiles(ctx context.Context, _ mcp.CallToolRequest, args listFilesArgs) (*mcp.CallToolResult, error) {
	id, p := args.SessionID, args.Path
	owner, refusal := s.sessionGate(ctx, ToolListFiles, id)
	if refusal != nil {
		return refusal, nil
	}
	files, err := s.d.Exec.ListFiles(ctx, owner, id, p)
	if err != nil {
		return sessionError(id, err), nil
	}
	out := listFilesOut{Files: []fileOut{}}
	var b strings.Builder
	for _, f := range files {
		out.Files = append(out.Files, fileOut{Path: f.Path, Size: f.Size, Dir: f.Dir, Modified: f.ModTime.UTC().Format(time.RFC3339), URI: s.fileURI(id, f.Path)})
		kind := ""
		if f.Dir {
			kind = "/"
		}
		fmt.Fprintf(&b, "%s%s  %d\n", f.Path, kind, f.Size)
	}
	if len(out.Files) == 0 {
		b.WriteString("(empty)")
	}
	if p == "" {
		p = "."
	}
	out.Path = p
	return mcp.NewToolResultStructured(out, strings.TrimRight(b.String(), "\n")), nil
}

// readResource serves sandbox://SESSION/PATH for the caller's sessions.
func (s *Server) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	s.analyses.Release(ctx) // it waits on a sandbox, not on the server's cores (Deps.Analyses)
	id, p, err := parseFileURI(req.Params.URI)
	if err != nil {
		return nil, err
	}
	owner := s.principal(ctx).Sub
	data, err := s.d.Exec.ReadFile(ctx, owner, id, p)
	if err != nil {
		if errors.Is(err, executor.ErrUnknownSession) || errors.Is(err, executor.ErrExpiredSession) {
			return nil, fmt.Errorf("resource %s: unknown session %q", req.Params.URI, id)
		}
		var lerr *executor.FileLimitError
		if errors.As(err, &lerr) {
			return nil, fmt.Errorf("resource %s: %w; %s", req.Params.URI, err, fileLimitAdvice(lerr))
		}
		return nil, fmt.Errorf("resource %s: %w", req.Params.URI, err)
	}
	return []mcp.ResourceContents{resourceContents(req.Params.URI, p, data)}, nil
}

// readOutput serves sandbox-output://CALL/STREAM to the caller that made
// the call.
func (s *Server) readOutput(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	if _, _, ok := parseOutputURI(req.Params.URI); !ok {
		return nil, fmt.Errorf("resource %q: want sandbox-output://CALL_ID/stdout, /stderr, /files/PATH or /display/NAME", req.Params.URI)
	}
	out, err := s.outputs.get(s.principal(ctx).Sub, req.Params.URI)
	if err != nil {
		return nil, err
	}
	if name, ok := strings.CutPrefix(out.stream, "files/"); ok {
		return []mcp.ResourceContents{resourceContents(out.uri, name, []byte(out.text))}, nil
	}
	if name, ok := strings.CutPrefix(out.stream, "display/"); ok {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: out.uri, MIMEType: richMIME(name), Text: out.text}}, nil
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: out.uri, MIMEType: "text/plain", Text: out.text}}, nil
}

// resourceContents is a file's content: text when it is UTF-8, else a blob.
func resourceContents(uri, name string, data []byte) mcp.ResourceContents {
	if utf8.Valid(data) {
		return mcp.TextResourceContents{URI: uri, MIMEType: mimeFor(name), Text: string(data)}
	}
	return mcp.BlobResourceContents{URI: uri, MIMEType: mimeFor(name), Blob: base64.StdEncoding.EncodeToString(data)}
}

// maxListed bounds the session files resources/list returns.
const maxListed = 1000

// listResources fills resources/list with the caller's kept outputs (newest
// first) and the files of their sessions. Listing does not count as using a
// session (its idle TTL is not extended); a session whose call is running,
// or whose sandbox is not running, is left out rather than waited for or
// started; list-files lists it.
func (s *Server) listResources(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
	if res == nil || req.Params.Cursor != "" {
		return
	}
	owner := s.principal(ctx).Sub
	for _, o := range s.outputs.list(owner) {
		size := int64(len(o.text))
		r := mcp.Resource{
			URI: o.uri, Name: "call " + o.call + " " + o.stream, MIMEType: "text/plain", Size: &size,
			Description: fmt.Sprintf("full %s of a call at %s (%d bytes written; kept until %s)", o.stream, o.created.UTC().Format(time.RFC3339), o.total, o.expires.UTC().Format(time.RFC3339)),
		}
		if name, ok := strings.CutPrefix(o.stream, "files/"); ok {
			r.MIMEType = mimeFor(name)
			r.Description = fmt.Sprintf("file %s written by an execute-transient call at %s (its sandbox is gone; kept until %s)", name, o.created.UTC().Format(time.RFC3339), o.expires.UTC().Format(time.RFC3339))
		}
		if name, ok := strings.CutPrefix(o.stream, "display/"); ok {
			r.MIMEType = richMIME(name)
			r.Description = fmt.Sprintf("%s shown by a call at %s (kept until %s)", name, o.created.UTC().Format(time.RFC3339), o.expires.UTC().Format(time.RFC3339))
		}
		res.Resources = append(res.Resources, r)
	}
	n := 0
	for _, si := range s.d.Exec.Sessions(owner) {
		if si.Busy || n >= maxListed {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		files, err := s.d.Exec.WorkspaceFiles(lctx, owner, si.ID)
		cancel()
		if err != nil {
			s.d.Logger.Debug("resources/list: session files not listed", "session", si.ID, "err", err)
			continue
		}
		for _, f := range files {
			if f.Dir || n >= maxListed {
				continue
			}
			size := f.Size
			res.Resources = append(res.Resources, mcp.Resource{
				URI: s.fileURI(si.ID, f.Path), Name: f.Path, MIMEType: mimeFor(f.Path), Size: &size,
				Description: "file in /workspace of session " + si.ID,
			})
			n++
		}
	}
}
