package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// MCP tasks (tools/call with params.task, tasks/get, tasks/result,
// tasks/cancel, tasks/list). mcp-go keeps its tasks per transport session
// and runs them under the request's context, which over HTTP ends with
// the POST that created them; these tasks belong to the principal
// instead, run on their own until they end, are cancelled only by
// tasks/cancel, and are kept for tasks.ttl after they ended. The
// transports hand these requests to HandleTask before mcp-go sees them.

// taskTools are the tools that may run as tasks.
var taskTools = []string{ToolExecuteTransient, ToolExecutePersistent, ToolInstallPackage}

// Task statuses this server uses (the protocol's).
const (
	taskWorking   = mcp.TaskStatusWorking
	taskCompleted = mcp.TaskStatusCompleted
	taskFailed    = mcp.TaskStatusFailed
	taskCancelled = mcp.TaskStatusCancelled
)

// taskPollMS is the poll interval tasks suggest, in milliseconds.
const taskPollMS = 1000

// taskOutputTail is how much of a task's latest output its status message
// shows, in bytes.
const taskOutputTail = 2 << 10

// task is one task. Its fields are guarded by tasks.mu.
type task struct {
	id, owner, tool string
	created         time.Time
	updated         time.Time
	ended           time.Time
	ttl             time.Duration // kept this long after it ended
	status          mcp.TaskStatus
	progress        string // the call's latest progress message
	output          []byte // the tail of its live output
	result          json.RawMessage
	rpcErr          *taskRPCError
	cancel          context.CancelFunc
	done            chan struct{}
}

type taskRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// tasks is the server's tasks, by id. Safe for concurrent use.
type tasks struct {
	mu  sync.Mutex
	all map[string]*task
}

// running counts owner's tasks that have not ended.
func (ts *tasks) running(owner string) int {
	n := 0
	for _, t := range ts.all {
		if t.owner == owner && t.status == taskWorking {
			n++
		}
	}
	return n
}

// expire drops the tasks whose ttl after their end has passed.
func (ts *tasks) expire(now time.Time) {
	for id, t := range ts.all {
		if t.status != taskWorking && now.Sub(t.ended) > t.ttl {
			delete(ts.all, id)
		}
	}
}

// find returns owner's task id; another principal's is not found.
func (ts *tasks) find(owner, id string) *task {
	ts.expire(time.Now())
	t := ts.all[id]
	if t == nil || t.owner != owner {
		return nil
	}
	return t
}

// wire is t as the protocol's Task.
func (t *task) wire() mcp.Task {
	ttl := t.ttl.Milliseconds()
	poll := int64(taskPollMS)
	w := mcp.Task{TaskId: t.id, Status: t.status, CreatedAt: t.created.UTC().Format(time.RFC3339),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339), TTL: &ttl}
	if t.status == taskWorking {
		w.PollInterval = &poll
	}
	switch {
	case t.status == taskWorking:
		w.StatusMessage = t.progress
		if w.StatusMessage == "" {
			w.StatusMessage = "running"
		}
		if len(t.output) > 0 {
			w.StatusMessage += "; output so far (its last " + fmt.Sprint(taskOutputTail) + " bytes at most):\n" + strings.ToValidUTF8(string(t.output), "\uFFFD")
		}
	case t.status == taskCancelled:
		w.StatusMessage = "cancelled by tasks/cancel"
	case t.rpcErr != nil:
		w.StatusMessage = t.rpcErr.Message
	}
	return w
}

// taskRun marks a call's context as a task's: the handlers let its time
// limit go up to tasks.max_duration (the policy judges it with
// input.task).
type taskRun struct {
	others int // the principal's other tasks running when it was created
}

type taskCtxKey struct{}

func taskFrom(ctx context.Context) *taskRun {
	t, _ := ctx.Value(taskCtxKey{}).(*taskRun)
	return t
}

// taskRequest is what HandleTask reads of a JSON-RPC request.
type taskRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// IsTaskRequest says whether HandleTask answers message: a task method or
// a tools/call with params.task. It reads no more than it needs to.
func IsTaskRequest(message []byte) bool {
	if !strings.Contains(string(message), `"task`) {
		return false
	}
	var r taskRequest
	if json.Unmarshal(message, &r) != nil || len(r.ID) == 0 {
		return false
	}
	switch r.Method {
	case string(mcp.MethodTasksGet), string(mcp.MethodTasksResult), string(mcp.MethodTasksCancel), string(mcp.MethodTasksList):
		return true
	case string(mcp.MethodToolsCall):
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return json.Unmarshal(r.Params, &p) == nil && len(p.Task) > 0 && string(p.Task) != "null"
	}
	return false
}

// HandleTask answers a task request (IsTaskRequest) for the principal in
// ctx: the JSON-RPC response to write. tasks/result waits until the task
// ends or ctx does. A task runs under a context of its own with ctx's
// values (its principal), not ctx's end.
func (s *Server) HandleTask(ctx context.Context, message []byte) []byte {
	// No code is analysed here, and tasks/result may wait for an hour:
	// the analysis slot the transport holds for the request goes back at
	// once, as for the tools that analyse nothing (handOff).
	s.analyses.Release(ctx)
	var r taskRequest
	if err := json.Unmarshal(message, &r); err != nil {
		return rpcError(nil, mcp.PARSE_ERROR, "the message is not JSON: "+err.Error(), nil)
	}
	owner := s.principal(ctx).Sub
	var p struct {
		TaskID string `json:"taskId"`
		Task   *struct {
			TTL *int64 `json:"ttl"`
		} `json:"task"`
		Name string `json:"name"`
	}
	if len(r.Params) > 0 {
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return rpcError(r.ID, mcp.INVALID_PARAMS, "bad params: "+err.Error(), nil)
		}
	}
	ts := &s.tasks
	if r.Method == string(mcp.MethodToolsCall) {
		if p.Task == nil {
			return rpcError(r.ID, mcp.INVALID_PARAMS, "a tools/call without params.task is no task", nil)
		}
		return s.startTask(ctx, r, p.Name, p.Task.TTL)
	}
	if r.Method == string(mcp.MethodTasksList) {
		ts.mu.Lock()
		ts.expire(time.Now())
		var list []*task
		for _, t := range ts.all {
			if t.owner == owner {
				list = append(list, t)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
		out := make([]mcp.Task, len(list))
		for i, t := range list {
			out[i] = t.wire()
		}
		ts.mu.Unlock()
		return rpcResult(r.ID, map[string]any{"tasks": out})
	}
	ts.mu.Lock()
	t := ts.find(owner, p.TaskID)
	if t == nil {
		ts.mu.Unlock()
		return rpcError(r.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task not found: %q (tasks belong to the principal that created them and are kept for tasks.ttl after they end)", p.TaskID), nil)
	}
	switch r.Method {
	case string(mcp.MethodTasksGet):
		w := t.wire()
		ts.mu.Unlock()
		return rpcResult(r.ID, w)
	case string(mcp.MethodTasksCancel):
		if t.status != taskWorking {
			st := t.status
			ts.mu.Unlock()
			return rpcError(r.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s already ended: %s", p.TaskID, st), nil)
		}
		t.status, t.updated, t.ended = taskCancelled, time.Now(), time.Now()
		t.cancel()
		w := t.wire()
		ts.mu.Unlock()
		return rpcResult(r.ID, w)
	}
	// tasks/result
	done := t.done
	ts.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return rpcError(r.ID, mcp.INTERNAL_ERROR, "the request ended before the task: "+ctx.Err().Error(), nil)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	related := map[string]any{mcp.RelatedTaskMetaKey: mcp.RelatedTaskMeta(t.id)}
	switch {
	case t.status == taskCancelled:
		return rpcError(r.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s was cancelled: it has no result", t.id), map[string]any{"_meta": related})
	case t.rpcErr != nil:
		return rpcError(r.ID, t.rpcErr.Code, t.rpcErr.Message, t.rpcErr.Data)
	}
	var res map[string]any
	if err := json.Unmarshal(t.result, &res); err != nil {
		return rpcError(r.ID, mcp.INTERNAL_ERROR, "the task's result does not decode: "+err.Error(), nil)
	}
	meta, _ := res["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[mcp.RelatedTaskMetaKey] = mcp.RelatedTaskMeta(t.id)
	res["_meta"] = meta
	return rpcResult(r.ID, res)
}

// startTask creates a task for a tools/call with params.task and starts
// the call; the answer is the CreateTaskResult.
func (s *Server) startTask(ctx context.Context, r taskRequest, tool string, ttlMS *int64) []byte {
	if !slices.Contains(taskTools, tool) {
		return rpcError(r.ID, mcp.METHOD_NOT_FOUND, fmt.Sprintf("tool %q does not run as a task; these do: %s", tool, strings.Join(taskTools, ", ")), nil)
	}
	cfg := s.d.Config()
	p := s.principal(ctx)
	ttl := cfg.Tasks.TTL.D()
	if ttlMS != nil && *ttlMS >= 0 && time.Duration(*ttlMS)*time.Millisecond < ttl {
		ttl = time.Duration(*ttlMS) * time.Millisecond
	}
	var idb [16]byte
	rand.Read(idb[:])
	now := time.Now()
	t := &task{id: hex.EncodeToString(idb[:]), owner: p.Sub, tool: tool, created: now, updated: now, ttl: ttl, status: taskWorking, done: make(chan struct{}),
		cancel: func() {}}
	// Counted and entered at once, so that tasks created at the same time
	// count each other; taken out again if the policy refuses it.
	ts := &s.tasks
	ts.mu.Lock()
	ts.expire(now)
	others := ts.running(p.Sub)
	if ts.all == nil {
		ts.all = map[string]*task{}
	}
	ts.all[t.id] = t
	ts.mu.Unlock()
	refuse := func(code int, msg string, data any) []byte {
		ts.mu.Lock()
		delete(ts.all, t.id)
		t.status, t.rpcErr = taskFailed, &taskRPCError{Code: code, Message: msg, Data: data}
		close(t.done) // for a tasks/result that found it meanwhile
		ts.mu.Unlock()
		return rpcError(r.ID, code, msg, data)
	}
	// The policy decides the bound (rules/tasks.rego); the call itself is
	// judged when it runs.
	dec, err := s.d.Gate.Decide(ctx, policy.Input{Tool: tool, Principal: policyPrincipal(p), Task: &policy.Task{OwnerCount: others}})
	if err != nil {
		return refuse(mcp.INTERNAL_ERROR, "policy: "+err.Error(), nil)
	}
	for _, v := range dec.Violations {
		if strings.HasPrefix(v.Rule, "tasks.") {
			return refuse(mcp.INVALID_REQUEST, v.Msg, map[string]any{"violations": []policy.Violation{v}})
		}
	}
	// The call: the request without params.task, with the task's id as its
	// progress token (its progress and output become the status message).
	var params map[string]any
	json.Unmarshal(r.Params, &params)
	delete(params, "task")
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["progressToken"] = t.id
	params["_meta"] = meta
	call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sess := &taskSession{id: "task-" + t.id, ch: make(chan mcp.JSONRPCNotification, 64)}
	runCtx = s.mcp.WithContext(runCtx, sess)
	runCtx = context.WithValue(runCtx, taskCtxKey{}, &taskRun{others: others})
	ts.mu.Lock()
	t.cancel = cancel
	if t.status == taskCancelled {
		cancel() // cancelled before its call began
	}
	w := t.wire()
	ts.mu.Unlock()

	stop, notes := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(notes)
		for {
			select {
			case n := <-sess.ch:
				s.taskNote(t, n)
			case <-stop:
				for {
					select {
					case n := <-sess.ch:
						s.taskNote(t, n)
					default:
						return
					}
				}
			}
		}
	}()
	go func() {
		resp := s.mcp.HandleMessage(runCtx, call)
		cancel()
		close(stop)
		<-notes
		var out struct {
			Result json.RawMessage `json:"result"`
			Error  *taskRPCError   `json:"error"`
		}
		b, _ := json.Marshal(resp)
		json.Unmarshal(b, &out)
		ts.mu.Lock()
		defer ts.mu.Unlock()
		defer close(t.done)
		if t.status == taskCancelled {
			return
		}
		t.updated, t.ended = time.Now(), time.Now()
		switch {
		case out.Error != nil:
			t.status, t.rpcErr = taskFailed, out.Error
		case out.Result == nil:
			t.status, t.rpcErr = taskFailed, &taskRPCError{Code: mcp.INTERNAL_ERROR, Message: "the call gave no result"}
		default:
			t.status, t.result = taskCompleted, out.Result
		}
	}()
	return rpcResult(r.ID, map[string]any{"task": w})
}

// taskNote takes a notification of a task's call: its progress messages
// and live output make the task's status message.
func (s *Server) taskNote(t *task, n mcp.JSONRPCNotification) {
	if n.Method != "notifications/progress" {
		return
	}
	msg, _ := n.Params.AdditionalFields["message"].(string)
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	t.updated = time.Now()
	if _, live := n.Params.Meta[liveMetaKey]; live {
		t.output = append(t.output, msg...)
		if extra := len(t.output) - taskOutputTail; extra > 0 {
			t.output = t.output[extra:]
		}
		return
	}
	t.progress = msg
}

// taskSession is the mcp-go client session a task's call runs in: its
// notifications go to the task, not to a transport.
type taskSession struct {
	id string
	ch chan mcp.JSONRPCNotification
}

func (s *taskSession) Initialize()                                         {}
func (s *taskSession) Initialized() bool                                   { return true }
func (s *taskSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (s *taskSession) SessionID() string                                   { return s.id }

func rpcResult(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

func rpcError(id json.RawMessage, code int, msg string, data any) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := taskRPCError{Code: code, Message: msg, Data: data}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	return b
}
