package analyze

import (
	"strings"
	"testing"
	"time"
)

func TestDeepTiming(t *testing.T) {
	for _, src := range []string{
		"x = " + strings.Repeat("1 + ", 200000) + "1",
		"x = " + strings.Repeat("-", 100000) + "1",
		"x = a" + strings.Repeat(".b", 100000),
		"x = f" + strings.Repeat("()", 100000),
		"x = " + strings.Repeat("'ab' ", 200000),
	} {
		st := time.Now()
		_, err := Source([]byte(src), Options{})
		t.Logf("%.20q %v %v", src, time.Since(st), err)
	}
}
