package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScanHead(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		line string
		want head
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"text":"` + big + `"}}`, head{id: "7", response: true}},
		{`{"jsonrpc":"2.0","result":{},"id":"a"}`, head{id: `"a"`, response: true}},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`, head{id: "3", response: true}},
		{`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"code":"` + big + `"}}`, head{id: "1", method: "tools/call"}},
		{`{"params":{"requestId":7},"method":"notifications/cancelled","jsonrpc":"2.0"}`, head{method: "notifications/cancelled", requestID: "7"}},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r-1","reason":"x"}}`, head{method: "notifications/cancelled", requestID: `"r-1"`}},
		{`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{}}`, head{id: "9", method: "sampling/createMessage"}},
		{`not json`, head{}},
		{`[1,2]`, head{}},
	} {
		if diff := cmp.Diff(c.want, scanHead([]byte(c.line)), cmp.AllowUnexported(head{})); diff != "" {
			t.Errorf("scanHead(%.80s) (-want +got):\n%s", c.line, diff)
		}
	}
}

// TestCancelFilter drops the reply of a request cancelled while in flight,
// only that one, also when the transport splits a line across writes.
func TestCancelFilter(t *testing.T) {
	var out bytes.Buffer
	f := newCancelFilter(&out)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
	}, "\n") + "\n"
	if _, err := io.ReadAll(f.Reader(strings.NewReader(in))); err != nil {
		t.Fatal(err)
	}
	// The server asks the client something with id 1 too: not a reply.
	f.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}` + "\n"))
	f.Write([]byte(`{"jsonrpc":"2.0","id":1,"res`))
	f.Write([]byte(`ult":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"))
	f.Write([]byte(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n"))
	want := `{"jsonrpc":"2.0","id":1,"method":"roots/list"}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":99,"result":{}}` + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if f.cancelled != 1 || len(f.inflight) != 0 {
		t.Errorf("dropped %d, %d still tracked; want 1 and 0", f.cancelled, len(f.inflight))
	}
}
