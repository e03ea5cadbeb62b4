package main

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestDataFrameShowsAsATable drives the built server over stdio: a
// DataFrame as a cell's last expression comes back as its text table and
// its HTML table as an embedded text/html resource (readable again with
// resources/read), a display() call prints one on stdout, and input()
// fails saying why.
func TestDataFrameShowsAsATable(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	const code = "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})\ndisplay(df.temp)\ndf"
	res := c.call(t, "execute-transient", map[string]any{"code": code})
	sc := structured(t, res)
	result, _ := sc["result"].(string)
	if res.IsError || sc["status"] != "ok" || !strings.Contains(result, "city  temp") || !strings.Contains(result, "1  Lima    19") {
		t.Fatalf("a DataFrame as the last expression: status %v, result %q; want ok and its table\n%s", sc["status"], result, text(res))
	}
	if out := text(res); !strings.Contains(out, "--- stdout ---\n0     3\n1    19\nName: temp, dtype: int64") {
		t.Errorf("display(series): want the Series' table on stdout\n%s", out)
	}
	html := embedded(res, "text/html")
	if len(html) != 2 || !strings.Contains(html[0].Text, "<th>temp</th>") || !strings.Contains(html[1].Text, "<td>Lima</td>") ||
		!strings.Contains(html[1].Text, "<table") {
		t.Fatalf("want the Series' and the DataFrame's HTML tables as embedded text/html resources, got %d\n%s", len(html), text(res))
	}
	if !strings.Contains(text(res), "rich output attached: HTML of display() #1") {
		t.Errorf("the text does not say what is attached\n%s", text(res))
	}
	rr, err := c.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: html[1].URI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != html[1].Text || rr.Contents[0].MIMEType != "text/html" {
		t.Errorf("resources/read %s: %v; want the DataFrame's HTML again", html[1].URI, err)
	}
	res = c.call(t, "execute-transient", map[string]any{"code": "name = input('name? ')"})
	if !strings.Contains(text(res), "input() is not available") {
		t.Errorf("input(): want the error saying it is not available\n%s", text(res))
	}
}

// embedded returns a result's embedded resources of type mime, in order.
func embedded(r *sdk.CallToolResult, mime string) []*sdk.ResourceContents {
	var out []*sdk.ResourceContents
	for _, c := range r.Content {
		if er, ok := c.(*sdk.EmbeddedResource); ok && er.Resource != nil && er.Resource.MIMEType == mime {
			out = append(out, er.Resource)
		}
	}
	return out
}

// richFakes are objects with IPython's rich representation methods, as
// libraries define them.
const richFakes = `import base64
class Dot:
    def __repr__(self): return "Dot()"
    def _repr_png_(self):
        return base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAAAAADRSSBWAAAAC0lEQVR4nGNg+A8AAQIBAEK+vGgAAAAASUVORK5CYII=")
class Circle:
    def __repr__(self): return "Circle()"
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle cx="5" cy="5" r="4"/></svg>'
class Page:
    def __init__(self, n): self.n = n
    def __repr__(self): return "Page(%d)" % self.n
    def _repr_html_(self): return "<p>" + "x" * self.n + "</p>"
`

// TestRichRepresentations drives the built server over stdio: objects
// with _repr_png_ and _repr_svg_ come back as PNG image content and an
// embedded image/svg+xml resource, and HTML over its bound is not
// attached, said in the text and in rich_dropped with the limit.
func TestRichRepresentations(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	code := richFakes + "display(Dot(), Circle(), Page(300 * 1024))\nPage(10)"
	res := c.call(t, "execute-transient", map[string]any{"code": code})
	sc := structured(t, res)
	if res.IsError || sc["status"] != "ok" {
		t.Fatalf("status %v\n%s", sc["status"], text(res))
	}
	var pngs [][]byte
	for _, ct := range res.Content {
		if ic, ok := ct.(*sdk.ImageContent); ok && ic.MIMEType == "image/png" {
			pngs = append(pngs, ic.Data)
		}
	}
	if len(pngs) != 1 || !strings.HasPrefix(string(pngs[0]), "\x89PNG\r\n\x1a\n") {
		t.Errorf("_repr_png_: want one PNG image content, got %d", len(pngs))
	}
	if svg := embedded(res, "image/svg+xml"); len(svg) != 1 || !strings.Contains(svg[0].Text, "<circle") {
		t.Errorf("_repr_svg_: want one embedded image/svg+xml resource with the SVG, got %d", len(svg))
	}
	if html := embedded(res, "text/html"); len(html) != 1 || html[0].Text != "<p>xxxxxxxxxx</p>" {
		t.Errorf("want only the result's HTML embedded, got %d items", len(html))
	}
	out := text(res)
	if !strings.Contains(out, "stdout ---\nDot()\nCircle()\nPage(307200)") || !strings.Contains(out, "result: Page(10)") {
		t.Errorf("display() prints each repr and the result is its repr\n%s", out)
	}
	const note = "rich output not attached: HTML of display() #3: 307207 bytes, over the limit of 256 KiB per HTML or SVG item"
	if !strings.Contains(out, note) {
		t.Errorf("oversize HTML: want the note %q\n%s", note, out)
	}
	dropped, _ := sc["rich_dropped"].([]any)
	if len(dropped) != 1 {
		t.Fatalf("rich_dropped = %v, want the oversize HTML", sc["rich_dropped"])
	}
	if d := dropped[0].(map[string]any); d["why"] != "too_large" || d["limit"] != float64(256<<10) || d["bytes"] != float64(307207) {
		t.Errorf("rich_dropped[0] = %v", d)
	}
	rich, _ := sc["rich"].([]any)
	if len(rich) != 3 {
		t.Fatalf("rich = %v, want the PNG, the SVG and the result's HTML", sc["rich"])
	}
	if r := rich[0].(map[string]any); r["mime"] != "image/png" || r["width"] != float64(2) || r["height"] != float64(1) || r["n"] != float64(1) {
		t.Errorf("rich[0] = %v, want the 2x1 PNG of display() #1", r)
	}
}
