package executor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/clip"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
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
	e.config().caps().Reply(r, true)
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
	if d := r.RichDropped[0]; len(d.MIME) > 64+clip.Slack || len(d.Error) > 512+clip.Slack || d.N != 0 || d.Bytes != 0 {
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
	e.config().caps().Reply(r, true)
	if len(r.Rich) != protocol.MaxRich || len(r.RichDropped) != 3 || r.RichDropped[0].Why != protocol.RichOverCount || r.RichDropped[0].Limit != protocol.MaxRich {
		t.Errorf("%d items, dropped %+v; want %d kept and 3 named over_count", len(r.Rich), r.RichDropped, protocol.MaxRich)
	}
}

// TestRichOutputInASession runs in a real sandbox: a session's objects give
// their rich representations in later calls, each call returns only its
// own, and rich PNGs take the image count before the figures, which are
// then said to be left out.
func TestRichOutputInASession(t *testing.T) {
	e, _ := newExec(t, nil)
	define := "import base64\nclass Dot:\n    def _repr_png_(self):\n        return base64.b64decode(" +
		"'iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAAAAADRSSBWAAAAC0lEQVR4nGNg+A8AAQIBAEK+vGgAAAAASUVORK5CYII=')\n" +
		"class Page:\n    def _repr_html_(self):\n        return '<p>page</p>'\n"
	res, id := persistent(t, e, "", Request{Owner: "o", Code: define, Imports: []analyze.Import{{Module: "base64", Line: 1}}})
	wantStatus(t, res, "ok")
	res, _ = persistent(t, e, id, Request{Owner: "o", Code: "display(Page())\nDot()"})
	wantStatus(t, res, "ok")
	var got []string
	for _, it := range res.Rich {
		got = append(got, it.MIME+" "+it.From)
	}
	if diff := cmp.Diff([]string{"text/html display", "image/png result"}, got); diff != "" {
		t.Errorf("rich items (-want +got):\n%s", diff)
	}
	code := "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nfor i in range(17):\n    display(Dot())\n"
	res, _ = persistent(t, e, id, Request{Owner: "o", Code: code, Imports: []analyze.Import{{Module: "matplotlib.pyplot", Alias: "plt", Line: 1}}})
	wantStatus(t, res, "ok")
	if len(res.Rich) != MaxImages || len(res.Images) != 0 || !strings.Contains(res.Stderr, "figure(s) not returned") {
		t.Errorf("%d rich PNGs, %d figures, stderr %q; want %d PNGs, no figure and a note about it", len(res.Rich), len(res.Images), res.Stderr, MaxImages)
	}
	// The 17th is over both counts (16 rich items, 16 images): the first is named.
	if len(res.RichDropped) != 1 || res.RichDropped[0].Why != protocol.RichOverCount || res.RichDropped[0].N != 17 || res.RichDropped[0].Limit != protocol.MaxRich {
		t.Errorf("rich dropped = %+v, want display() #17 over the count", res.RichDropped)
	}
	res, _ = persistent(t, e, id, Request{Owner: "o", Code: "x = 1"})
	if len(res.Rich) != 0 || len(res.RichDropped) != 0 {
		t.Errorf("a call that shows nothing returned %d rich items and %d dropped", len(res.Rich), len(res.RichDropped))
	}
}
