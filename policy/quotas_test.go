package policy

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Every decision carries the principal's quotas: the configured ones, with
// the config key of each; an operator rule lowers them per principal, in
// a tool call's decision and in Engine.Quotas alike, and cannot raise them.
func TestQuotasPerPrincipal(t *testing.T) {
	cfg := config.Default()
	cfg.Quotas.Sandboxes = 6
	cfg.Sessions.MaxPerOwner = 3
	e := load(t, cfg, fstest.MapFS{"q.rego": {Data: []byte(`package pydocker.rules.q

quota_max[name] := 1 if {
	input.principal.sub == "guest"
	some name in ["sandboxes", "transport_sessions"]
}

quota_max.sessions := 100 # more than configured: ignored
`)}})
	want := Quotas{
		QuotaSandboxes:         {Max: 6, Key: "quotas.sandboxes"},
		QuotaSessions:          {Max: 3, Key: "sessions.max_per_owner"},
		QuotaTransportSessions: {Max: 64, Key: "quotas.transport_sessions"},
		QuotaOutputBytes:       {Max: 16 << 20, Key: "quotas.output_bytes"},
		QuotaInflightBytes:     {Max: 8 << 20, Key: "quotas.inflight_bytes"},
		QuotaAnalyses:          {Max: 16, Key: "quotas.analyses"},
	}
	guest := Quotas{}
	for k, v := range want {
		guest[k] = v
	}
	guest[QuotaSandboxes] = Quota{Max: 1, Key: "quotas.sandboxes"}
	guest[QuotaTransportSessions] = Quota{Max: 1, Key: "quotas.transport_sessions"}

	for sub, w := range map[string]Quotas{"alice": want, "guest": guest} {
		d, err := e.Decide(context.Background(), Input{Tool: ToolListSessions, Principal: Principal{Sub: sub, Scopes: []string{}}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, d.Quotas); diff != "" {
			t.Errorf("decision quotas of %s (-want +got):\n%s", sub, diff)
		}
		for range 2 { // the second from the cache
			q, err := e.Quotas(context.Background(), Principal{Sub: sub})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, q); diff != "" {
				t.Errorf("Quotas(%s) (-want +got):\n%s", sub, diff)
			}
		}
	}
	if diff := cmp.Diff(want, e.ConfiguredQuotas()); diff != "" {
		t.Errorf("ConfiguredQuotas (-want +got):\n%s", diff)
	}
}
