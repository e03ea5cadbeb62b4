package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes. In YAML, env and flags it is written as a plain
// number of bytes or with a unit: "256m", "1g", "1.5GiB", "64KiB", "512MB".
// Units are binary (k = KiB = 1024), as Docker reads memory limits.
type Size int64

// Duration is a time span. In YAML, env and flags it is written as a Go
// duration ("30s", "1m30s") or a plain number of seconds (30, 2.5).
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the Go duration form, so `config show` round-trips.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (s Size) String() string { return FormatSize(int64(s)) }

// MarshalText writes the size with the largest exact binary unit.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// sizeHint is the "what is allowed" part of a size error.
const sizeHint = `a number of bytes or a number with a unit: "256m", "1g", "1.5GiB", "64KiB"`

// durationHint is the "what is allowed" part of a duration error.
const durationHint = `a positive duration such as "30s", "2m", "1h30m", or a number of seconds`

// ParseSize reads a byte size. Negative sizes are errors.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("%q is not a size: want %s", s, sizeHint)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size: want %s", s, sizeHint)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative: want %s", s, sizeHint)
	}
	v := f * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return Size(int64(v)), nil
}

// FormatSize writes n with the largest binary unit that divides it exactly.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		v      int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration reads a duration: a Go duration string or a number of
// seconds. Zero and negative durations are errors.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	var d time.Duration
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("%q is not a duration: want %s", s, durationHint)
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(t); err != nil {
		return 0, fmt.Errorf("%q is not a duration: want %s", s, durationHint)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive: want %s", s, durationHint)
	}
	return Duration(d), nil
}
