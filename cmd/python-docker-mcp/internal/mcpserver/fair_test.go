package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// heldGate is the policy's gate whose Check waits, once it has begun, until
// the test lets it go: it tells who is being analysed.
type heldGate struct {
	*policy.Gate
	entered chan string
	proceed chan struct{}
}

func (g heldGate) Check(ctx context.Context, in policy.Input, src []byte) (policy.Check, error) {
	g.entered <- in.Principal.Sub
	<-g.proceed
	return g.Gate.Check(ctx, in, src)
}

type gated struct {
	res  *mcp.CallToolResult
	done chan struct{}
}

// A principal whose calls fill its share of the analysis slots waits
// behind its own calls while another principal's call is analysed at
// once; past quotas.analyses its calls are refused with a quota error
// naming the key; a call whose request ends while it waits is answered
// and gives its place back.
func TestAnalysisSlotsAreShared(t *testing.T) {
	cfg := config.Default()
	cfg.Quotas.Analyses = 2
	eng, err := policy.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := heldGate{Gate: policy.NewGate(eng), entered: make(chan string, 8), proceed: make(chan struct{})}
	srv := newServer(t, cfg, Deps{Gate: g, Exec: &scriptedExec{}})
	srv.analyses = quota.NewFair(2, 1) // two cores, whatever this machine has

	start := func(ctx context.Context, sub string) *gated {
		c := &gated{done: make(chan struct{})}
		go func() {
			defer close(c.done)
			in := policy.Input{Principal: policy.Principal{Sub: sub, Scopes: []string{}}}
			_, _, c.res = srv.gate(ctx, ToolExecuteTransient, "x = 1\n", in, func(string) {})
		}()
		return c
	}
	waitQueued := func(sub string, n int) {
		for {
			if w, _ := srv.analyses.Waiting(sub); w == n {
				return
			}
		}
	}
	a1 := start(context.Background(), "attacker")
	if who := <-g.entered; who != "attacker" {
		t.Fatalf("%s was analysed, want the attacker", who)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	a2 := start(ctx2, "attacker")
	waitQueued("attacker", 1)

	// the attacker holds 2 of its 2: a third is refused
	a3 := start(context.Background(), "attacker")
	<-a3.done
	sc, _ := a3.res.StructuredContent.(runOut)
	if sc.Status != "quota_exceeded" || sc.Quota == nil || sc.Quota.Quota != policy.QuotaAnalyses || sc.Quota.Max != 2 ||
		!strings.Contains(resultText(a3.res), "quotas.analyses") {
		t.Fatalf("a third call of the attacker: status %q, quota %+v, %q; want quota_exceeded naming quotas.analyses", sc.Status, sc.Quota, resultText(a3.res))
	}

	// the other principal is analysed beside the attacker's first call
	o := start(context.Background(), "other")
	if who := <-g.entered; who != "other" {
		t.Fatalf("%s was analysed, want the other principal", who)
	}

	// the attacker's waiting call ends with its request
	cancel2()
	<-a2.done
	sc, _ = a2.res.StructuredContent.(runOut)
	if sc.Status != "killed" || !strings.Contains(resultText(a2.res), "waited to be analysed") {
		t.Fatalf("a cancelled waiting call: status %q, %q", sc.Status, resultText(a2.res))
	}
	// and gives its place back: the attacker may queue one again
	a4 := start(context.Background(), "attacker")
	waitQueued("attacker", 1)

	g.proceed <- struct{}{} // one of the two analyses ends
	g.proceed <- struct{}{}
	if who := <-g.entered; who != "attacker" {
		t.Fatalf("%s was analysed, want the attacker's queued call", who)
	}
	g.proceed <- struct{}{}
	for _, c := range []*gated{a1, o, a4} {
		<-c.done
		if c.res != nil {
			t.Errorf("an allowed call was refused: %q", resultText(c.res))
		}
	}
}

func resultText(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	tc, _ := r.Content[0].(mcp.TextContent)
	return tc.Text
}

// The slot the transport holds for a request is the one its analysis
// uses (the principal, at its share, would otherwise wait for itself),
// and it is given back when the analysis ends; a tool that analyses
// nothing gives it back as its handler starts.
func TestHeldSlotHandedOver(t *testing.T) {
	cfg := config.Default()
	eng, err := policy.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, cfg, Deps{Gate: policy.NewGate(eng), Exec: &scriptedExec{}})
	srv.analyses = quota.NewFair(2, 1)

	ctx, held, err := srv.analyses.Hold(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	in := policy.Input{Principal: policy.Principal{Sub: "a", Scopes: []string{}}}
	if _, _, res := srv.gate(ctx, ToolExecuteTransient, "x = 1\n", in, func(string) {}); res != nil {
		t.Fatalf("the analysis with a held slot: %q", resultText(res))
	}
	if _, running := srv.analyses.Waiting("a"); running != 0 {
		t.Errorf("a runs %d slots after its analysis, want 0 (the held one given back)", running)
	}

	ctx, held, _ = srv.analyses.Hold(context.Background(), "a")
	defer held.Release()
	var during int
	h := srv.handOff(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, during = srv.analyses.Waiting("a")
		return nil, nil
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "list-sessions"
	h(ctx, req)
	if during != 0 {
		t.Errorf("list-sessions ran holding %d slots, want 0", during)
	}
}
