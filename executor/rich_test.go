package executor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// TestCapRich: the server re-applies the bounds of rich representations
// whatever the runner sent: what breaks one is named in RichDropped with
// the bound, what is malformed is left out, and rich PNGs share the
// figures' image limits.
func TestCapRich(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxImageBytes = 1000
	e := executorWith(ConfigFrom(cfg))
	html := func(n int, size int) Rich {
		return Rich{MIME: protocol.MIMEHTML, Data: []byte(strings.Repeat("h", size)), From: protocol.RichFromDisplay, N: n}
	}
	pngOf := func(n, size int) Rich {
		return Rich{MIME: protocol.MIMEPNG, Data: make([]byte, size), From: protocol.RichFromDisplay, N: n, Width: 1, Height: 1}
	}
	r := &runnerResponse{
		Status: "ok",
		Rich: []Rich{
			html(1, protocol.MaxRichBytes+1), // too large
			html(2, 250<<10), html(3, 250<<10), html(4, 250<<10), html(5, 250<<10),
			html(6, 250<<10), // over the total
			{MIME: protocol.MIMESVG, Data: []byte("\xff\xfe"), From: protocol.RichFromDisplay, N: 7}, // not UTF-8
			{MIME: "text/plain", Data: []byte("x"), From: protocol.RichFromDisplay, N: 8},            // not a rich type
			{MIME: protocol.MIMEHTML, Data: []byte("<p>"), From: "elsewhere", N: 9},                  // unknown origin
			pngOf(10, 600), pngOf(11, 600), // the second is over max_image_bytes
			{MIME: protocol.MIMESVG, Data: []byte("<svg/>"), From: protocol.RichFromResult},
		},
		RichDropped: []RichDropped{{MIME: strings.Repeat("m", 100), From: protocol.RichFromDisplay, N: -1, Bytes: -5,
			Why: protocol.RichFailed, Error: strings.Repeat("e", 5000)}},
		Images: []Image{{PNG: make([]byte, 300)}, {PNG: make([]byte, 500)}}, // 600+300 fit, 500 more do not
	}
	e.capResult(r, true)
	var kept []int
	for _, it := range r.Rich {
		kept = append(kept, it.N)
	}
	if diff := cmp.Diff([]int{2, 3, 4, 5, 10, 0}, kept); diff != "" {
		t.Errorf("rich items kept (-want +got):\n%s", diff)
	}
	type why struct {
		N     int
		Why   string
		Limit int64
	}
	var got []why
	for _, d := range r.RichDropped[1:] {
		got = append(got, why{d.N, d.Why, d.Limit})
	}
	want := []why{{1, protocol.RichTooLarge, protocol.MaxRichBytes}, {6, protocol.RichOverTotal, protocol.MaxRichTotalBytes}, {11, protocol.RichOverImageBytes, 1000}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rich items dropped (-want +got):\n%s", diff)
	}
	if d := r.RichDropped[0]; len(d.MIME) > 64+truncationSlack || len(d.Error) > 512+truncationSlack || d.N != 0 || d.Bytes != 0 {
		t.Errorf("the runner's dropped entry is not clipped: %d-byte MIME, %d-byte error, n %d, bytes %d", len(d.MIME), len(d.Error), d.N, d.Bytes)
	}
	if len(r.Images) != 1 || len(r.Images[0].PNG) != 300 {
		t.Errorf("figures after the rich PNG: %d kept, want the 300-byte one (the image cap is shared)", len(r.Images))
	}

	var many []Rich
	for i := range protocol.MaxRich + 3 {
		many = append(many, html(i+1, 10))
	}
	r = &runnerResponse{Status: "ok", Rich: many}
	e.capResult(r, true)
	if len(r.Rich) != protocol.MaxRich || len(r.RichDropped) != 3 || r.RichDropped[0].Why != protocol.RichOverCount || r.RichDropped[0].Limit != protocol.MaxRich {
		t.Errorf("%d items, dropped %+v; want %d kept and 3 named over_count", len(r.Rich), r.RichDropped, protocol.MaxRich)
	}
}
