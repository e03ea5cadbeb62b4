package kubernetes

import (
	"log/slog"

	"k8s.io/klog/v2"
)

// LogTo sends what client-go logs (through klog: retries, watch errors,
// the WebSocket-to-SPDY fallback) to log, tagged component=client-go,
// instead of klog's own unstructured lines on stderr. It is process-wide,
// as klog is.
func LogTo(log *slog.Logger) {
	klog.SetSlogLogger(log.With("component", "client-go"))
}
