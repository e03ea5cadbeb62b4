package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestLogTo: a klog line from client-go arrives as a structured record of
// the server's logger, not as klog's text on stderr; the end of a stream
// this process closed arrives at debug level, other errors as errors.
func TestLogTo(t *testing.T) {
	var buf bytes.Buffer
	LogTo(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { klog.ClearLogger() })
	klog.InfoS("watch closed", "pod", "sandbox-1")
	klog.ErrorS(errors.New("next reader: read tcp 127.0.0.1:1->127.0.0.1:6443: use of closed network connection"), "Copying stdout failed")
	klog.ErrorS(errors.New("connection refused"), "Watch failed")
	klog.Flush()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("klog output line %q is not a JSON record: %v", line, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %s", len(recs), buf.String())
	}
	if r := recs[0]; r["msg"] != "watch closed" || r["pod"] != "sandbox-1" || r["component"] != "client-go" {
		t.Errorf("record %v, want msg, pod and component=client-go", r)
	}
	if r := recs[1]; r["msg"] != "Copying stdout failed" || r["level"] != "DEBUG" {
		t.Errorf("closed-stream record %v, want level DEBUG", r)
	}
	if r := recs[2]; r["msg"] != "Watch failed" || r["level"] != "ERROR" {
		t.Errorf("other error %v, want level ERROR", r)
	}

	// At info level the closed-stream record is not written at all.
	buf.Reset()
	LogTo(slog.New(slog.NewJSONHandler(&buf, nil)))
	klog.ErrorS(errors.New("use of closed network connection"), "Copying stderr failed")
	klog.ErrorS(errors.New("websocket: close sent"), "Copying stdin failed")
	klog.Flush()
	if buf.Len() != 0 {
		t.Errorf("closed-stream record at info level: %s", buf.String())
	}
}
