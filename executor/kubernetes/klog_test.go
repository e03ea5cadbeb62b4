package kubernetes

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"k8s.io/klog/v2"
)

// TestLogTo: a klog line from client-go arrives as a structured record of
// the server's logger, not as klog's text on stderr.
func TestLogTo(t *testing.T) {
	var buf bytes.Buffer
	LogTo(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { klog.ClearLogger() })
	klog.InfoS("watch closed", "pod", "sandbox-1")
	klog.Flush()
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("klog output %q is not one JSON record: %v", buf.String(), err)
	}
	if rec["msg"] != "watch closed" || rec["pod"] != "sandbox-1" || rec["component"] != "client-go" {
		t.Fatalf("record %v, want msg, pod and component=client-go", rec)
	}
}
