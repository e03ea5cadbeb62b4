package analyze

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeString returns the value of a str literal's source text (prefix
// and quotes included). ok is false for bytes and for escapes we do not
// resolve (\N{...}): such a literal is treated as not constant.
func decodeString(raw string) (string, bool) {
	q := strings.IndexAny(raw, `'"`)
	if q < 0 {
		return "", false
	}
	prefix := strings.ToLower(raw[:q])
	if strings.ContainsAny(prefix, "bf") {
		return "", false
	}
	body := raw[q:]
	n := 1
	if len(body) >= 6 && (strings.HasPrefix(body, `"""`) || strings.HasPrefix(body, `'''`)) {
		n = 3
	}
	if len(body) < 2*n {
		return "", false
	}
	body = body[n : len(body)-n]
	body = strings.ReplaceAll(body, "\r\n", "\n")
	if strings.IndexByte(prefix, 'r') >= 0 || strings.IndexByte(body, '\\') < 0 {
		return body, true
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := body[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(body) && j < i+3 && body[j] >= '0' && body[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(body[i:j], 8, 32)
			b.WriteRune(rune(v))
			i = j - 1
		case 'x', 'u', 'U':
			w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+w > len(body) {
				return "", false
			}
			v, err := strconv.ParseUint(body[i+1:i+1+w], 16, 32)
			if err != nil || v > utf8.MaxRune {
				return "", false
			}
			b.WriteRune(rune(v))
			i += w
		case 'N':
			return "", false
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), true
}
