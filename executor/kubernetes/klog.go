package kubernetes

import (
	"context"
	"log/slog"
	"strings"

	"k8s.io/klog/v2"
)

// LogTo sends what client-go logs (through klog: retries, watch errors,
// the WebSocket-to-SPDY fallback) to log, tagged component=client-go,
// instead of klog's own unstructured lines on stderr. It is process-wide,
// as klog is.
//
// Closing a sandbox ends its attach stream under client-go's copiers,
// which report each such end as an error ("Copying stdout failed: … use of
// closed network connection"); those records arrive at debug level, as
// the expected end of a stream they are.
func LogTo(log *slog.Logger) {
	klog.SetSlogLogger(slog.New(closedStreams{log.With("component", "client-go").Handler()}))
}

// closedStreams lowers the records about a connection this process closed
// to debug level.
type closedStreams struct{ slog.Handler }

func (h closedStreams) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l) || h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h closedStreams) Handle(ctx context.Context, r slog.Record) error {
	closed := false
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.String()
		closed = strings.Contains(v, "use of closed network connection") || strings.Contains(v, "websocket: close sent")
		return !closed
	})
	if closed && r.Level > slog.LevelDebug {
		d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
		r = d
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h closedStreams) WithAttrs(as []slog.Attr) slog.Handler {
	return closedStreams{h.Handler.WithAttrs(as)}
}

func (h closedStreams) WithGroup(name string) slog.Handler {
	return closedStreams{h.Handler.WithGroup(name)}
}
