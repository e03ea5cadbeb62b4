package executor

import (
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestParse(t *testing.T) {
	e, cli := newExec(t, nil)
	ctx := tctx(t, 2*time.Minute)
	se, err := e.Parse(ctx, Request{Code: "print('fine')\n"})
	if err != nil || se != nil {
		t.Fatalf("Parse(valid) = %+v, %v; want nil, nil", se, err)
	}
	se, err = e.Parse(ctx, Request{Code: "x = 1\nfor i in range(3)\n    print(i)\n"})
	if err != nil || se == nil {
		t.Fatalf("Parse(missing colon) = %+v, %v; want a syntax error", se, err)
	}
	if se.Type != "SyntaxError" || se.Message != "expected ':'" || se.Line != 2 || se.Col != 18 || se.Text != "for i in range(3)" {
		t.Errorf("syntax error = %+v, want CPython's \"expected ':'\" at 2:18 on \"for i in range(3)\"", se)
	}
	if want := "    for i in range(3)\n                     ^\nSyntaxError: expected ':'"; !strings.Contains(se.Detail, want) {
		t.Errorf("detail = %q, want the line with a caret: %q", se.Detail, want)
	}
	se, err = e.Parse(ctx, Request{Code: "if True:\nprint(1)\n"})
	if err != nil || se == nil || se.Type != "IndentationError" || se.Line != 2 {
		t.Errorf("Parse(unindented block) = %+v, %v; want an IndentationError on line 2", se, err)
	}
	if n := dockertest.Settled(t, cli, backend.LabelKind+"="+backend.KindTransient); n != 0 {
		t.Errorf("%d transient containers after the parses, want 0", n)
	}
}
