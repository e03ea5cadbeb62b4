package analyze

import (
	"errors"
	"strings"
	"testing"
)

// FuzzSource checks that no input makes Source panic, hang or return
// anything but Facts or an *Error at a real position. Seeds live in
// testdata/fuzz/FuzzSource; run with
//
//	go test -run '^$' -fuzz FuzzSource -fuzztime 10m ./policy/analyze/
func FuzzSource(f *testing.F) {
	for _, s := range []string{
		"import os\n",
		"print(f\"{__import__('os').getcwd()}\")",
		"match x:\n    case Point(x=0) | [1, *r] | {'k': v, **kw} as c if c:\n        pass\n",
		"async def f[T: int](a, /, *b, c=1, **d) -> T:\n    await g(x := 1)\n",
		"type X[T = int] = list[T]\nclass C[*Ts](B, metaclass=M): pass\n",
		"with (open('a') as f, open('b') as g,):\n    pass\n",
		"try:\n    pass\nexcept* E:\n    pass\n",
		"s = f'''{a!r:>{w}} {f\"{b=}\"} {c:{d}.{e}}'''\n",
		"x: int = 1_000 + 0x_f @ m\n@a[0].b(c)\ndef f(): pass\n",
		"ｅｘｅｃ('x')\n",
		"x = '\\N{BULLET}' b'a' if 1else 2\n",
		"import os\nmatch os.path:\n    case object(sep=s, join=j) | C(k=P(x=y)):\n        j(s)\n",
		"import os\na, b = os, a\nb = getattr(a, 'system')\nc: object = vars(b)['x']\n@c\ndef f(): pass\n",
		"try:\n    1/0\nexcept E as e:\n    e.__traceback__.tb_frame.f_back.f_globals\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		facts, err := Source(src, Options{MaxBytes: 1 << 16})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if strings.HasPrefix(e.Msg, "internal error") {
				t.Fatalf("Source(%q): %v", src, err)
			}
			if e.Line < 1 || e.Col < 0 || e.Kind == "" {
				t.Fatalf("Source(%q): bad error position or kind: %+v", src, *e)
			}
			return
		}
		if facts.Imports == nil || facts.Dynamic == nil || facts.Calls == nil {
			t.Fatalf("Source(%q): nil list in %#v", src, facts)
		}
		lines := strings.Count(string(src), "\n") + 1
		for _, i := range facts.Imports {
			if i.Line < 1 || i.Line > lines || i.Col < 0 {
				t.Fatalf("Source(%q): import at %d:%d outside the source", src, i.Line, i.Col)
			}
		}
	})
}
