package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// FileInfo is one entry of ListFiles; Path is relative to the working dir.
type FileInfo struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Dir     bool      `json:"dir"`
	ModTime time.Time `json:"mod_time"`
}

// FileLimits are the sizes that bound moving a session file in and out.
type FileLimits struct {
	// ReadChunk is the most one ReadFileAt returns, and the largest file
	// ReadFile returns whole: outputs.max_stream_bytes (at least
	// limits.max_output_bytes).
	ReadChunk int64
	// WriteChunk is the most one WriteFile or AppendFile takes:
	// limits.max_code_bytes, at least 1 MiB.
	WriteChunk int64
	// File is the largest file ReadFileAt reads and WriteFile or
	// AppendFile make: limits.max_file_bytes (64 MiB when unset).
	File int64
	// Workspace is the working directory's tmpfs size
	// (docker.workspace_size); every file in it counts.
	Workspace int64
}

// FileLimits are the limits of file operations under c.
func (c Config) FileLimits() FileLimits {
	out := int64(c.Limits.MaxOutputBytes)
	if out <= 0 {
		out = 1 << 20
	}
	file := int64(c.Limits.MaxFileBytes)
	if file <= 0 {
		file = 64 << 20
	}
	return FileLimits{
		ReadChunk:  max(int64(c.Outputs.MaxStreamBytes), out),
		WriteChunk: max(int64(c.Limits.MaxCodeBytes), 1<<20),
		File:       file,
		Workspace:  int64(c.Docker.WorkspaceSize),
	}
}

// FileLimits reports the limits of file operations. Safe for concurrent use.
func (e *Executor) FileLimits() FileLimits { return e.config().FileLimits() }

// Which limit a FileLimitError names.
const (
	LimitReadChunk  = "outputs.max_stream_bytes" // a whole-file read (ReadFile)
	LimitWriteChunk = "limits.max_code_bytes"    // the data of one write
	LimitFile       = "limits.max_file_bytes"    // the file's total size
	LimitWorkspace  = "docker.workspace_size"    // the working directory's tmpfs
)

// FileLimitError is a file operation refused (nothing of it done) because
// it would pass a limit. It wraps ErrLimitExceeded.
type FileLimitError struct {
	Op    string // "read" or "write"
	Path  string
	Limit string // LimitReadChunk, LimitWriteChunk, LimitFile or LimitWorkspace
	Max   int64  // the limit in bytes
	// Size is what would pass it: the file's size (reads, LimitFile), the
	// data of the call (LimitWriteChunk, LimitWorkspace) or the file's size
	// with it (appends, LimitFile).
	Size int64
	// FileSize is the file's size as the operation left it, -1 when
	// unknown.
	FileSize int64
	// Detail is the sandbox's own account, if any (free space, say).
	Detail string
}

func (e *FileLimitError) Error() string {
	var what string
	switch e.Limit {
	case LimitWriteChunk:
		what = fmt.Sprintf("%d bytes in one call; one call takes at most %d bytes (%s, at least 1 MiB)", e.Size, e.Max, e.Limit)
	case LimitWorkspace:
		what = fmt.Sprintf("the session's workspace is full (%s): %s", e.Limit, e.Detail)
		if e.Max > 0 {
			what = fmt.Sprintf("the session's workspace is full: %s of the %d bytes its tmpfs holds for all files (%s)", e.Detail, e.Max, e.Limit)
		}
	case LimitFile:
		if e.Op == "write" {
			what = fmt.Sprintf("the file would be %d bytes; the largest file is %d bytes (%s)", e.Size, e.Max, e.Limit)
		} else {
			what = fmt.Sprintf("the file is %d bytes; the largest file is %d bytes (%s)", e.Size, e.Max, e.Limit)
		}
	default:
		what = fmt.Sprintf("the file is %d bytes; a whole-file read returns at most %d bytes (%s)", e.Size, e.Max, e.Limit)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Op, e.Path, ErrLimitExceeded, what)
}

func (e *FileLimitError) Unwrap() error { return ErrLimitExceeded }

// ReadFile returns a whole file of a session's working directory. path is
// relative to it (or absolute inside it); "..", paths outside and symlinks
// leading out fail with ErrInvalidPath; a missing file with fs.ErrNotExist.
// Files larger than outputs.max_stream_bytes (at least
// limits.max_output_bytes) are refused with a FileLimitError; ReadFileAt
// reads them in parts.
func (e *Executor) ReadFile(ctx context.Context, owner, sessionID, path string) ([]byte, error) {
	return e.sessions.readFile(ctx, owner, sessionID, path)
}

// FileChunk is a part of a session file.
type FileChunk struct {
	Data     []byte
	Offset   int64 // where Data starts in the file
	FileSize int64 // the file's size when it was read
}

// More says whether the file goes on after this part.
func (c FileChunk) More() bool { return c.Offset+int64(len(c.Data)) < c.FileSize }

// ReadFileAt returns up to length bytes of a session file from offset
// (length <= 0, or more than FileLimits().ReadChunk, means ReadChunk),
// with the path rules of ReadFile; an offset past the end is
// ErrInvalidRequest. A file larger than limits.max_file_bytes is refused
// with a FileLimitError. Loop with Offset+len(Data) while More.
func (e *Executor) ReadFileAt(ctx context.Context, owner, sessionID, path string, offset, length int64) (FileChunk, error) {
	return e.sessions.readFileAt(ctx, owner, sessionID, path, offset, length)
}

// WriteFile creates or replaces a file (and its parent directories) in a
// session's working directory, with the path rules of ReadFile. data is at
// most limits.max_code_bytes (at least 1 MiB) and limits.max_file_bytes;
// the workspace tmpfs size (docker.workspace_size) caps all files
// together. Passing a limit is a FileLimitError; a file that did not fit
// the workspace is left empty.
func (e *Executor) WriteFile(ctx context.Context, owner, sessionID, path string, data []byte) error {
	_, err := e.sessions.write(ctx, owner, sessionID, path, data, false)
	return err
}

// AppendFile adds data at the end of a session file (creating it and its
// parent directories when missing) and returns the file's new size, with
// the limits of WriteFile; the file grows to at most limits.max_file_bytes.
// A refused or failed append leaves the file as it was.
func (e *Executor) AppendFile(ctx context.Context, owner, sessionID, path string, data []byte) (int64, error) {
	return e.sessions.write(ctx, owner, sessionID, path, data, true)
}

// ListFiles lists a directory of a session's working directory recursively
// ("" or "." is the working directory itself), sorted by path, at most
// 10000 entries. Symlinks are listed, not followed.
func (e *Executor) ListFiles(ctx context.Context, owner, sessionID, path string) ([]FileInfo, error) {
	return e.sessions.listFiles(ctx, owner, sessionID, path)
}

// WorkspaceFiles lists the files of owner's session like ListFiles("."),
// for listings that must not count as using the session: it does not
// extend the idle TTL, does not wait for a running call and does not start
// a sandbox that is not running; in those cases it returns no files and no
// error. Safe for concurrent use.
func (e *Executor) WorkspaceFiles(ctx context.Context, owner, sessionID string) ([]FileInfo, error) {
	return e.sessions.workspaceFiles(ctx, owner, sessionID)
}

// fileOpTimeout bounds one file operation in a session's sandbox.
const fileOpTimeout = 30 * time.Second

// fileOp runs one file operation in owner's session, starting its sandbox
// again if it was killed.
func (m *sessions) fileOp(ctx context.Context, owner, sessionID string, frame protocol.Request) (*runnerResponse, error) {
	s, err := m.acquire(ctx, owner, sessionID, nil)
	if err != nil {
		return nil, err
	}
	defer m.release(s, true)
	sb, err := m.sessionSandbox(ctx, s, nil, fileOpTimeout)
	if err != nil {
		return nil, err
	}
	limit := int64(idleFrameLimit)
	switch frame.Head().Op {
	case protocol.OpRead:
		limit = m.core.config().readReplyLimit()
	case protocol.OpList:
		limit = listReplyLimit
	}
	resp, fail, err := m.core.roundTrip(ctx, sb, frame, fileOpTimeout, false, limit)
	if sb.dead.Load() {
		m.mu.Lock()
		s.sandboxDied(sb)
		m.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if fail != nil {
		if sb.dead.Load() {
			return nil, fmt.Errorf("session %s: its sandbox had stopped (%s), so its variables and files are gone; try again: a fresh sandbox starts, and the next execute-persistent result says state_lost", sessionID, fail.reason)
		}
		return nil, fmt.Errorf("session %s: %s", sessionID, fail.reason)
	}
	return resp, errorOf(resp)
}

// fileLimitOf turns the runner's FileTooLarge and NoSpace answers into a
// FileLimitError (limit names which cap a FileTooLarge passed, max its
// size); other answers are left to errorOf. fl are the limits the
// operation ran under.
func fileLimitOf(resp *runnerResponse, fl FileLimits, op, path, limit string, max, data int64) error {
	if resp.Status != "error" || resp.Error == nil {
		return nil
	}
	switch resp.Error.Type {
	case "FileTooLarge":
		size := resp.FileSize // a read's file; a write's file before the call
		if op == "write" {
			size += data
		}
		return &FileLimitError{Op: op, Path: path, Limit: limit, Max: max, Size: size, FileSize: resp.FileSize, Detail: resp.Error.Message}
	case "NoSpace":
		return &FileLimitError{Op: op, Path: path, Limit: LimitWorkspace, Max: fl.Workspace, Size: data, FileSize: resp.FileSize, Detail: resp.Error.Message}
	case "BadOffset":
		return fmt.Errorf("%s %s: %w: %s", op, path, ErrInvalidRequest, resp.Error.Message)
	}
	return nil
}

// fileLimitErr says whether a file operation's reply is one fileLimitOf
// explains.
func fileLimitErr(resp *runnerResponse) bool {
	if resp == nil || resp.Error == nil {
		return false
	}
	switch resp.Error.Type {
	case "FileTooLarge", "NoSpace", "BadOffset":
		return true
	}
	return false
}

// readFile is Executor.ReadFile.
func (m *sessions) readFile(ctx context.Context, owner, sessionID, path string) ([]byte, error) {
	fl := m.core.config().FileLimits()
	resp, err := m.fileOp(ctx, owner, sessionID, &protocol.Read{Path: path, MaxBytes: fl.ReadChunk})
	if err != nil {
		if fileLimitErr(resp) {
			return nil, fileLimitOf(resp, fl, "read", path, LimitReadChunk, fl.ReadChunk, 0)
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return resp.Data, nil
}

// readFileAt is Executor.ReadFileAt.
func (m *sessions) readFileAt(ctx context.Context, owner, sessionID, path string, offset, length int64) (FileChunk, error) {
	if offset < 0 {
		return FileChunk{}, fmt.Errorf("read %s: %w: offset %d is negative", path, ErrInvalidRequest, offset)
	}
	fl := m.core.config().FileLimits()
	if length <= 0 || length > fl.ReadChunk {
		length = fl.ReadChunk
	}
	resp, err := m.fileOp(ctx, owner, sessionID, &protocol.Read{Path: path, Offset: offset, Length: &length,
		MaxBytes: fl.ReadChunk, MaxFileBytes: fl.File})
	if err != nil {
		if fileLimitErr(resp) {
			return FileChunk{}, fileLimitOf(resp, fl, "read", path, LimitFile, fl.File, 0)
		}
		return FileChunk{}, fmt.Errorf("read %s: %w", path, err)
	}
	return FileChunk{Data: resp.Data, Offset: offset, FileSize: resp.FileSize}, nil
}

// write is Executor.WriteFile, or AppendFile with appendTo.
func (m *sessions) write(ctx context.Context, owner, sessionID, path string, data []byte, appendTo bool) (int64, error) {
	fl := m.core.config().FileLimits()
	if int64(len(data)) > fl.WriteChunk {
		return 0, &FileLimitError{Op: "write", Path: path, Limit: LimitWriteChunk, Max: fl.WriteChunk, Size: int64(len(data)), FileSize: -1}
	}
	if int64(len(data)) > fl.File {
		return 0, &FileLimitError{Op: "write", Path: path, Limit: LimitFile, Max: fl.File, Size: int64(len(data)), FileSize: -1}
	}
	resp, err := m.fileOp(ctx, owner, sessionID, &protocol.Write{Path: path, Data: data,
		Append: appendTo, MaxFileBytes: fl.File})
	if err != nil {
		if fileLimitErr(resp) {
			return 0, fileLimitOf(resp, fl, "write", path, LimitFile, fl.File, int64(len(data)))
		}
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return resp.FileSize, nil
}

// listFiles is Executor.ListFiles.
func (m *sessions) listFiles(ctx context.Context, owner, sessionID, path string) ([]FileInfo, error) {
	if path == "" {
		path = "."
	}
	resp, err := m.fileOp(ctx, owner, sessionID, &protocol.List{Path: path})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	return fileInfos(resp.Entries), nil
}

func fileInfos(entries []protocol.Entry) []FileInfo {
	out := make([]FileInfo, 0, len(entries))
	for _, en := range entries {
		out = append(out, FileInfo{Path: en.Path, Size: en.Size, Dir: en.Dir, ModTime: time.Unix(0, en.MTimeNS)})
	}
	return out
}

// workspaceFiles is Executor.WorkspaceFiles.
func (m *sessions) workspaceFiles(ctx context.Context, owner, sessionID string) ([]FileInfo, error) {
	if m.shared != nil {
		// A listing would take the session's lock and count as a use
		// for every server.
		return nil, nil
	}
	m.mu.Lock()
	s, ok := m.byID[sessionID]
	if !ok || s.owner != owner || s.closed || s.sb == nil || s.calls > 0 || m.expired(s, time.Now()) {
		m.mu.Unlock()
		return nil, nil
	}
	select {
	case s.sem <- struct{}{}:
	default:
		m.mu.Unlock()
		return nil, nil
	}
	s.calls++
	s.running = true
	sb := s.sb
	m.mu.Unlock()
	resp, fail, err := m.core.roundTrip(ctx, sb, &protocol.List{Path: "."}, fileOpTimeout, false, listReplyLimit)
	m.mu.Lock()
	s.calls--
	s.running = false
	if sb.dead.Load() {
		s.sandboxDied(sb)
	}
	m.mu.Unlock()
	<-s.sem
	if err != nil {
		return nil, err
	}
	if fail != nil {
		return nil, fmt.Errorf("session %s: %s", sessionID, fail.reason)
	}
	if err := errorOf(resp); err != nil {
		return nil, err
	}
	return fileInfos(resp.Entries), nil
}
