package mcpserver

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// richContent is a run's rich representations as content items, in
// order; uris are the URIs of the HTML and SVG ones:
//
//   - HTML is an embedded resource of type text/html: clients that render
//     HTML show the table, and to a model it is text it can read.
//   - PNG is image content, as figures are.
//   - SVG is an embedded resource of type image/svg+xml, not image
//     content: model APIs take raster images only (PNG, JPEG, GIF, WebP),
//     so a client passing image content on to its model would fail or
//     drop an SVG one, while SVG as text is readable by the model and
//     rendered by clients that render resources.
func richContent(items []executor.Rich, uris []string) []mcp.Content {
	content := make([]mcp.Content, 0, len(items))
	for i, it := range items {
		if it.MIME == protocol.MIMEPNG {
			content = append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(it.Data), it.MIME))
			continue
		}
		content = append(content, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uris[i], MIMEType: it.MIME, Text: string(it.Data)}))
	}
	return content
}

// richName is the name an HTML or SVG item is kept under among its call's
// outputs (sandbox-output://CALL_ID/display/NAME): display-N.html,
// result.svg, ...; "" for a PNG, which is image content only.
func richName(it executor.Rich) string {
	name := "result"
	if it.From == protocol.RichFromDisplay {
		name = fmt.Sprintf("display-%d", it.N)
	}
	switch it.MIME {
	case protocol.MIMEHTML:
		return name + ".html"
	case protocol.MIMESVG:
		return name + ".svg"
	}
	return ""
}

// richMIME is the type of a kept item by its name's extension.
func richMIME(name string) string {
	if strings.HasSuffix(name, ".svg") {
		return protocol.MIMESVG
	}
	return protocol.MIMEHTML
}

// richKind names a rich representation's type in the text content.
func richKind(mime string) string {
	switch mime {
	case protocol.MIMEHTML:
		return "HTML"
	case protocol.MIMEPNG:
		return "PNG"
	case protocol.MIMESVG:
		return "SVG"
	}
	return mime
}

// richSource names what a rich representation is of.
func richSource(from string, n int) string {
	if from == protocol.RichFromDisplay {
		return fmt.Sprintf("display() #%d", n)
	}
	return "the result"
}

// richDroppedNote says which rich representation was left out and why,
// with the limit it breaks.
func richDroppedNote(d richDropped) string {
	what := richKind(d.MIME) + " of " + richSource(d.From, d.N)
	switch d.Why {
	case protocol.RichTooLarge:
		return fmt.Sprintf("%s: %d bytes, over the limit of %s per HTML or SVG item (show less, e.g. df.head(), or write it to a file)", what, d.Bytes, sizeText(d.Limit))
	case protocol.RichOverTotal:
		return fmt.Sprintf("%s: %d bytes, over the limit of %s of HTML and SVG per call", what, d.Bytes, sizeText(d.Limit))
	case protocol.RichOverCount:
		return fmt.Sprintf("%s: over the limit of %d rich items per call", what, d.Limit)
	case protocol.RichOverImageBytes:
		return fmt.Sprintf("%s: %d bytes, over the limit of %s of images per call (limits.max_image_bytes; figures count too)", what, d.Bytes, sizeText(d.Limit))
	case protocol.RichOverImageCount:
		return fmt.Sprintf("%s: over the limit of %d images per call (figures count too)", what, d.Limit)
	case protocol.RichFailed:
		return fmt.Sprintf("%s: making it failed: %s", what, strings.TrimSpace(d.Error))
	}
	return fmt.Sprintf("%s: %s (limit %d)", what, d.Why, d.Limit)
}

// richNote is the execute tools' description of rich output and its
// bounds.
func richNote(cfg config.Config) string {
	maxImageBytes := int64(cfg.Limits.MaxImageBytes)
	if maxImageBytes <= 0 {
		maxImageBytes = 4 << 20
	}
	return fmt.Sprintf("display(obj) prints obj's repr and, like the final expression, attaches its rich representations after the figures: "+
		"HTML (_repr_html_; a pandas DataFrame or Series as an HTML table of at most %d rows and %d columns) as an embedded text/html resource, "+
		"_repr_png_ as PNG image content, _repr_svg_ as an embedded image/svg+xml resource (HTML and SVG are also kept for a while as sandbox-output:// resources). "+
		"Each HTML or SVG item is at most %s and all of them at most %s per call, at most %d rich items per call; "+
		"PNG images, figures included, at most %d and %s in all per call. What does not fit is not attached and the result says so, with the limit. ",
		protocol.RichHTMLRows, protocol.RichHTMLCols, sizeText(protocol.MaxRichBytes), sizeText(protocol.MaxRichTotalBytes), protocol.MaxRich,
		executor.MaxImages, sizeText(maxImageBytes))
}
