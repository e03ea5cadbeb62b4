package analyze

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchBlock is 40 lines of typical modern Python.
const benchBlock = `import os, sys
from collections import defaultdict as dd
from .models import User, Order


@dataclass(frozen=True)
class Point[T: (int, float)]:
    x: T = 0
    y: T = 0

    def norm(self, /, scale: float = 1.0) -> float:
        return (self.x ** 2 + self.y ** 2) ** 0.5 * scale


async def fetch(session, url: str, *, retries: int = 3) -> dict[str, object]:
    for attempt in range(retries):
        try:
            async with session.get(url, timeout=10) as resp:
                if (data := await resp.json()) is not None:
                    return {**data, "attempt": attempt}
        except* (TimeoutError, OSError) as eg:
            print(f"retry {attempt + 1}/{retries}: {eg!r:>{width}}", file=sys.stderr)
    return {}


def summarise(rows: list[dict], key="total") -> str:
    totals = dd(int)
    for row in rows:
        match row:
            case {"kind": "order", "amount": amount, **rest} if amount > 0:
                totals[row["user"]] += amount
            case Point(x=0, y=y) | [_, y, *_]:
                totals["points"] += y
            case _:
                pass
    lines = [f"{user:<20}{total:>10,.2f}" for user, total in sorted(totals.items())]
    return "\n".join(lines) + os.linesep
`

func benchSource(lines int) []byte {
	var b strings.Builder
	block := strings.Count(benchBlock, "\n")
	for i := 0; i < lines/block; i++ {
		b.WriteString(benchBlock)
	}
	for i := 0; i < lines%block; i++ {
		fmt.Fprintf(&b, "v%d = w%d(%d)\n", i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkSource measures Source on 200, 1,000 and 10,000 lines:
//
//	go test -run '^$' -bench BenchmarkSource -benchmem ./policy/analyze/
func BenchmarkSource(b *testing.B) {
	for _, n := range []int{200, 1000, 10000} {
		src := benchSource(n)
		if _, err := Source(src, Options{}); err != nil {
			b.Fatalf("%d lines: %v", n, err)
		}
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := Source(src, Options{}); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkSourceRefusedChain measures the refusal of 1 MiB operator
// chains, which stop at the expression limit while tokenizing:
//
//	go test -run '^$' -bench BenchmarkSourceRefusedChain -benchmem ./policy/analyze/
func BenchmarkSourceRefusedChain(b *testing.B) {
	for _, c := range []struct{ name, src string }{
		{"power", "x = x" + strings.Repeat("**x", (1<<20-6)/3) + "\n"},
		{"unary", "x = " + strings.Repeat("- ", (1<<20-6)/2) + "1\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Source([]byte(c.src), Options{}); err == nil {
					b.Fatal("a 1 MiB chain was not refused")
				}
			}
		})
	}
}
