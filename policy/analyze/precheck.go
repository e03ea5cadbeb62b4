package analyze

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"
)

var codingRE = regexp.MustCompile(`^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`)

// precheck fails closed on input CPython would decode differently from
// us, or that we refuse on principle. It returns src without a leading
// UTF-8 BOM.
func precheck(src []byte, maxBytes int) ([]byte, error) {
	if len(src) > maxBytes {
		return nil, errAt(1, 0, "size", "source is %d bytes, over the limit of %d bytes; send less code", len(src), maxBytes)
	}
	bom := bytes.HasPrefix(src, []byte("\xef\xbb\xbf"))
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	line, lineStart := 1, 0
	ascii := true
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			switch c {
			case 0:
				return nil, errAt(line, i-lineStart, "nul", "source contains a NUL byte")
			case '\r':
				if i+1 >= len(src) || src[i+1] != '\n' {
					return nil, errAt(line, i-lineStart, "cr", "carriage return not followed by a line feed; use \\n or \\r\\n line endings")
				}
			case '\n':
				line++
				lineStart = i + 1
			}
			i++
			continue
		}
		ascii = false
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n <= 1 {
			return nil, errAt(line, i-lineStart, "encoding", "invalid UTF-8 byte 0x%02x; source must be UTF-8", c)
		}
		i += n
	}
	// A coding declaration counts on line 1, or on line 2 when line 1 is
	// blank or a comment (PEP 263).
	rest := src
	for n := 1; n <= 2 && len(rest) > 0; n++ {
		l := rest
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			l, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		if m := codingRE.FindSubmatch(l); m != nil {
			enc := normalEncoding(string(m[1]))
			if bom && enc != "utf-8" {
				return nil, errAt(n, 0, "coding", "encoding problem: %s with BOM", m[1])
			}
			switch enc {
			case "utf8":
			case "utf-8":
			case "ascii", "us-ascii":
				if !ascii {
					return nil, errAt(n, 0, "coding", "coding declaration says ascii but the source is not ASCII")
				}
			default:
				return nil, errAt(n, 0, "coding", "coding declaration %q is not supported; only utf-8 is", m[1])
			}
			break
		}
		t := bytes.TrimLeft(l, " \t\f\r")
		if len(t) > 0 && t[0] != '#' {
			break
		}
	}
	return src, nil
}

// normalEncoding mirrors CPython's get_normal_name for the names we allow.
func normalEncoding(s string) string {
	s = strings.ToLower(strings.ReplaceAll(s, "_", "-"))
	switch {
	case s == "utf-8" || strings.HasPrefix(s, "utf-8-"):
		return "utf-8"
	}
	return s
}
