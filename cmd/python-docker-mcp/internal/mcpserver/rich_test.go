package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// TestRichOutputBecomesContent: a run's rich representations reach the
// client after its figures, in order, HTML and SVG as embedded resources
// (readable again with resources/read), PNG as image content; what was
// left out is said in the text and the structured content, with its limit.
func TestRichOutputBecomesContent(t *testing.T) {
	h := start(t, config.Default(), "")
	table := "<table><tr><td>1</td></tr></table>"
	h.exec.result = executor.Result{Status: "ok",
		Images: []executor.Image{{PNG: []byte("\x89PNG figure")}},
		Rich: []executor.Rich{
			{MIME: protocol.MIMEHTML, Data: []byte(table), From: protocol.RichFromDisplay, N: 1},
			{MIME: protocol.MIMESVG, Data: []byte("<svg/>"), From: protocol.RichFromDisplay, N: 2},
			{MIME: protocol.MIMEPNG, Data: []byte("\x89PNG rich"), From: protocol.RichFromResult, Width: 2, Height: 1},
		},
		RichDropped: []executor.RichDropped{
			{MIME: protocol.MIMEHTML, From: protocol.RichFromDisplay, N: 3, Bytes: 300000, Why: protocol.RichTooLarge, Limit: protocol.MaxRichBytes},
			{MIME: protocol.MIMEPNG, From: protocol.RichFromDisplay, N: 4, Why: protocol.RichFailed, Error: "ValueError: returned data that is not a PNG file"},
			{MIME: protocol.MIMEPNG, From: protocol.RichFromDisplay, N: 5, Bytes: 5000, Why: protocol.RichOverImageBytes, Limit: 4 << 20},
		},
	}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "display(df)"})
	if res.IsError {
		t.Fatalf("error: %s", textOf(res))
	}
	var got []string
	var uris []string
	for _, c := range res.Content[1:] {
		switch c := c.(type) {
		case *sdk.ImageContent:
			got = append(got, "image "+c.MIMEType+" "+string(c.Data))
		case *sdk.EmbeddedResource:
			got = append(got, "resource "+c.Resource.MIMEType+" "+c.Resource.Text)
			uris = append(uris, c.Resource.URI)
		default:
			got = append(got, "other")
		}
	}
	want := []string{"image image/png \x89PNG figure", "resource text/html " + table, "resource image/svg+xml <svg/>", "image image/png \x89PNG rich"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("content after the text (-want +got):\n%s", diff)
	}
	if len(uris) != 2 || !strings.HasPrefix(uris[0], "sandbox-output://") || !strings.HasSuffix(uris[0], "/display/display-1.html") ||
		!strings.HasSuffix(uris[1], "/display/display-2.svg") {
		t.Fatalf("embedded URIs = %v", uris)
	}
	rr, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uris[0]})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != table || rr.Contents[0].MIMEType != protocol.MIMEHTML {
		t.Fatalf("resources/read %s: %v %+v", uris[0], err, rr)
	}
	txt := textOf(res)
	for _, want := range []string{
		"rich output attached: HTML of display() #1 (34 bytes), SVG of display() #2 (6 bytes), PNG of the result (9 bytes)",
		"rich output not attached: HTML of display() #3: 300000 bytes, over the limit of 256 KiB per HTML or SVG item",
		"rich output not attached: PNG of display() #4: making it failed: ValueError: returned data that is not a PNG file",
		"rich output not attached: PNG of display() #5: 5000 bytes, over the limit of 4 MiB of images per call",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	sc := structuredOf(t, res)
	rich, _ := sc["rich"].([]any)
	dropped, _ := sc["rich_dropped"].([]any)
	if len(rich) != 3 || len(dropped) != 3 {
		t.Fatalf("structured rich = %v, rich_dropped = %v", sc["rich"], sc["rich_dropped"])
	}
	if r := rich[2].(map[string]any); r["mime"] != protocol.MIMEPNG || r["from"] != "result" || r["width"] != float64(2) || r["uri"] != nil {
		t.Errorf("structured rich PNG = %v", r)
	}
	if d := dropped[0].(map[string]any); d["why"] != protocol.RichTooLarge || d["limit"] != float64(protocol.MaxRichBytes) || d["n"] != float64(3) {
		t.Errorf("structured rich_dropped = %v", d)
	}
}

// TestDescriptionsStateRichBounds: the execute tools say what rich output
// is and its bounds, with the configured image cap.
func TestDescriptionsStateRichBounds(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxImageBytes = 2 << 20
	for _, name := range []string{ToolExecuteTransient, ToolExecutePersistent} {
		var d string
		for _, td := range toolDefs {
			if td.name == name {
				d = td.description(cfg)
			}
		}
		for _, want := range []string{"_repr_html_", "_repr_png_", "_repr_svg_", "image/svg+xml", "at most 256 KiB", "1 MiB per call",
			"at most 16 rich items", "at most 16 and 2 MiB", "60 rows and 20 columns", "the result says so"} {
			if !strings.Contains(d, want) {
				t.Errorf("%s: description lacks %q:\n%s", name, want, d)
			}
		}
	}
}

// TestRichOutputNotKeptIsStillEmbedded: HTML the output store cannot keep
// still reaches the client, and the text says it cannot be read again.
func TestRichOutputNotKeptIsStillEmbedded(t *testing.T) {
	cfg := config.Default()
	cfg.Outputs.MaxTotalBytes = 8
	h := start(t, cfg, "")
	h.exec.result = executor.Result{Status: "ok",
		Rich: []executor.Rich{{MIME: protocol.MIMEHTML, Data: []byte("<p>too big for the store</p>"), From: protocol.RichFromResult}}}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "x"})
	html := 0
	for _, c := range res.Content {
		if er, ok := c.(*sdk.EmbeddedResource); ok && er.Resource.Text == "<p>too big for the store</p>" && strings.HasSuffix(er.Resource.URI, "/display/result.html") {
			html++
		}
	}
	if res.IsError || html != 1 {
		t.Fatalf("want the HTML embedded once, got %d\n%s", html, textOf(res))
	}
	if want := "HTML of the result (embedded in this result, but not readable with resources/read) not kept: "; !strings.Contains(textOf(res), want) {
		t.Errorf("text lacks %q:\n%s", want, textOf(res))
	}
}
