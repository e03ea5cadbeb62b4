package mcpserver

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// progress sends one request's notifications/progress: each carries the
// request's token and a progress count larger than the last one's. Safe
// for concurrent use.
type progress struct {
	s     *Server
	ctx   context.Context
	token mcp.ProgressToken
	mu    sync.Mutex
	n     int
}

// progressOf is the request's progress, nil when the client asked for none.
func (s *Server) progressOf(ctx context.Context, req mcp.CallToolRequest) *progress {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	return &progress{s: s, ctx: ctx, token: req.Params.Meta.ProgressToken}
}

// say sends msg; a notification that cannot be sent is logged.
func (p *progress) say(msg string) {
	if err := p.send(msg, nil); err != nil {
		p.s.d.Logger.Debug("progress notification not sent", "err", err)
	}
}

// send sends one notification with msg and, when meta is set, that _meta.
// It never blocks: when the transport's queue of notifications is full,
// it returns the error and nothing is sent.
func (p *progress) send(msg string, meta map[string]any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session := server.ClientSessionFromContext(p.ctx)
	if session == nil || !session.Initialized() {
		return server.ErrNotificationNotInitialized
	}
	if h, ok := session.(server.SessionWithStreamableHTTPConfig); ok {
		h.UpgradeToSSEWhenReceiveNotification()
	}
	p.n++
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: "notifications/progress",
		Params: mcp.NotificationParams{Meta: meta, AdditionalFields: map[string]any{"progressToken": p.token, "progress": p.n, "message": msg}},
	}}
	select {
	case session.NotificationChannel() <- n:
		return nil
	default:
		return server.ErrNotificationChannelBlocked
	}
}

// drained waits up to max for the transport to take the notifications
// queued so far (stdio writes them on a goroutine of its own, so a result
// could otherwise overtake the last ones; HTTP writes them before the
// result anyway).
func (p *progress) drained(max time.Duration) {
	session := server.ClientSessionFromContext(p.ctx)
	if session == nil {
		return
	}
	ch := session.NotificationChannel()
	for deadline := time.Now().Add(max); len(ch) > 0 && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
}

// Live output: the chunks of a run's streams (executor.Output) go to the
// client as notifications/progress whose message is the chunk's text and
// whose _meta[liveMetaKey] says where it goes: {"stream": "stdout" or
// "stderr", "offset": its first byte's offset in the stream, "bytes": its
// length in the stream}. See the README's "Live output" for how a client
// puts them together.
const (
	liveMetaKey = "python-docker-mcp/output"
	// A notification goes once liveChunk bytes wait, or once liveEvery
	// passed since the last one; each carries at most liveChunk bytes.
	liveEvery = 250 * time.Millisecond
	liveChunk = 4 << 10
	// livePending caps what waits for the client, per call: a chunk that
	// does not fit is not sent live (the result has it).
	livePending = 64 << 10
)

// live turns one run's output chunks into rate-limited notifications.
// Output never blocks: it queues, and a goroutine sends.
type live struct {
	p       *progress
	mu      sync.Mutex
	queue   []executor.Output // chunks to send, in order; at most livePending bytes
	queued  int64
	sent    map[string]int64 // bytes of each stream the notifications carried
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// liveOf starts live output for a call, nil when the client asked for no
// progress.
func liveOf(p *progress) *live {
	if p == nil {
		return nil
	}
	l := &live{p: p, sent: map[string]int64{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.loop()
	return l
}

// Output queues a chunk (executor.Request.Output).
func (l *live) Output(o executor.Output) {
	l.mu.Lock()
	if l.queued+o.Bytes > livePending {
		l.mu.Unlock()
		return // skipped: the next chunk's offset shows the gap
	}
	l.queue = append(l.queue, o)
	l.queued += o.Bytes
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *live) loop() {
	defer close(l.stopped)
	last := time.Time{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		queued := l.queued
		l.mu.Unlock()
		since := time.Since(last)
		if queued >= liveChunk || (queued > 0 && since >= liveEvery) {
			l.sendOne()
			last = time.Now()
			continue
		}
		if queued > 0 {
			timer.Reset(liveEvery - since)
		}
		select {
		case <-l.wake:
		case <-timer.C:
		case <-l.stop:
			return
		}
	}
}

// sendOne sends the queue's next notification: the first chunk, joined
// with the chunks of its stream that follow it without a gap, up to
// liveChunk bytes (a longer chunk is split at a character boundary).
func (l *live) sendOne() {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.mu.Unlock()
		return
	}
	o := l.queue[0]
	l.queue = l.queue[1:]
	l.queued -= o.Bytes
	if o.Bytes > liveChunk && int64(len(o.Data)) == o.Bytes {
		cut := liveChunk
		for cut > 0 && !utf8.RuneStart(o.Data[cut]) {
			cut--
		}
		rest := executor.Output{Stream: o.Stream, Offset: o.Offset + int64(cut), Bytes: o.Bytes - int64(cut), Data: o.Data[cut:]}
		o.Data, o.Bytes = o.Data[:cut], int64(cut)
		l.queue = append([]executor.Output{rest}, l.queue...)
		l.queued += rest.Bytes
	}
	for i := 0; i < len(l.queue); i++ {
		n := l.queue[i]
		if n.Stream != o.Stream {
			continue
		}
		if n.Offset != o.Offset+o.Bytes || o.Bytes+n.Bytes > liveChunk {
			break
		}
		o.Data += n.Data
		o.Bytes += n.Bytes
		l.queued -= n.Bytes
		l.queue = append(l.queue[:i], l.queue[i+1:]...)
		i--
	}
	l.mu.Unlock()
	err := l.p.send(o.Data, map[string]any{liveMetaKey: map[string]any{"stream": o.Stream, "offset": o.Offset, "bytes": o.Bytes}})
	if err != nil {
		l.p.s.d.Logger.Debug("live output not sent", "stream", o.Stream, "bytes", o.Bytes, "err", err)
		return
	}
	l.mu.Lock()
	l.sent[o.Stream] += o.Bytes
	l.mu.Unlock()
}

// finish sends what is queued (before the result: the rate limit no
// longer applies) and says how many bytes of each stream the
// notifications carried.
func (l *live) finish() *liveOut {
	close(l.stop)
	<-l.stopped
	for {
		l.mu.Lock()
		n := len(l.queue)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		l.sendOne()
	}
	l.p.drained(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	return &liveOut{StdoutSent: l.sent["stdout"], StderrSent: l.sent["stderr"]}
}

// liveOut is the result's account of live output.
type liveOut struct {
	StdoutSent int64 `json:"stdout_sent" jsonschema:"Bytes of stdout the progress notifications carried while the code ran (live output: asked for with a progress token). Equal to stdout_bytes: they carried all of it."`
	StderrSent int64 `json:"stderr_sent" jsonschema:"Bytes of stderr the progress notifications carried."`
}
