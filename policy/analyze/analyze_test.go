package analyze

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// summary is a compact form of Facts for table tests:
// imports "module:level@line:col" (+" cond"), dynamic
// "kind:name:arg@line:col" (arg empty when not constant), calls
// "name@line:col".
type summary struct {
	Imports, Dynamic, Calls []string
}

func summarize(f Facts) summary {
	var s summary
	for _, i := range f.Imports {
		v := fmt.Sprintf("%s:%d@%d:%d", i.Module, i.Level, i.Line, i.Col)
		if i.Conditional {
			v += " cond"
		}
		s.Imports = append(s.Imports, v)
	}
	for _, d := range f.Dynamic {
		arg := ""
		if d.Arg != nil {
			arg = *d.Arg
		}
		s.Dynamic = append(s.Dynamic, fmt.Sprintf("%s:%s:%s@%d:%d", d.Kind, d.Name, arg, d.Line, d.Col))
	}
	for _, c := range f.Calls {
		s.Calls = append(s.Calls, fmt.Sprintf("%s@%d:%d", c.Name, c.Line, c.Col))
	}
	return s
}

// sourceTests are one case per construct the lowering handles; every
// source is also checked against CPython 3.13 by TestSourceAgreesWithCPython.
var sourceTests = []struct {
	name string
	src  string
	// nil fields are not checked; use []string{} for "none".
	imports, dynamic, calls []string
}{
	{
		name:    "f-string field hides __import__",
		src:     `print(f"{__import__('os').getcwd()}")`,
		dynamic: []string{"__import__:__import__:os@1:9"},
		calls:   []string{"print@1:0", "__import__@1:9"},
	},
	{
		name:    "import list",
		src:     "import json, os",
		imports: []string{"json:0@1:0", "os:0@1:0"},
	},
	{
		name:    "simple statements after if",
		src:     "if True: import a; import b",
		imports: []string{"a:0@1:9 cond", "b:0@1:19 cond"},
	},
	{
		name:    "relative import",
		src:     "from . import x",
		imports: []string{":1@1:0"},
	},
	{
		name:    "relative import with package and alias",
		src:     "from ..pkg import y as z\nz()",
		imports: []string{"pkg:2@1:0"},
		calls:   []string{"..pkg.y@2:0"},
	},
	{
		name:    "import inside match/case",
		src:     "match cmd:\n    case ['go', where] if where:\n        import a\n    case Point(x=0, y=os.sep):\n        pass\n    case {'k': v, **rest} | [*_] as c:\n        pass\n    case _:\n        import c\n",
		imports: []string{"a:0@3:8 cond", "c:0@9:8 cond"},
		dynamic: []string{},
		calls:   []string{},
	},
	{
		name:    "match guard and class pattern names",
		src:     "match x:\n    case os.Environ() if eval('1'):\n        pass\n",
		dynamic: []string{"eval:eval:1@2:25"},
		calls:   []string{"eval@2:25"},
	},
	{
		name:    "import inside async def",
		src:     "async def main():\n    import asyncio\n    await asyncio.sleep(1)\n    async with lock as l:\n        async for x in aiter():\n            pass\n    return [y async for y in gen() if await y]\n",
		imports: []string{"asyncio:0@2:4 cond"},
		calls:   []string{"asyncio.sleep@3:10", "aiter@5:23", "gen@7:29"},
	},
	{
		name:    "fullwidth identifiers are NFKC-normalised",
		src:     "import ｓｕｂｐｒｏｃｅｓｓ\nｅｘｅｃ('x')\nｓｕｂｐｒｏｃｅｓｓ.run()",
		imports: []string{"subprocess:0@1:0"},
		dynamic: []string{"exec:exec:x@2:0"},
		calls:   []string{"exec@2:0", "subprocess.run@3:0"},
	},
	{
		name:    "annotated assignment keeps annotation and value",
		src:     "x: eval('t') = __import__('a')\ny: compile\nself.z: int = 1",
		dynamic: []string{"eval:eval:t@1:3", "__import__:__import__:a@1:15", "compile:compile:@2:3"},
	},
	{
		name:    "walrus",
		src:     "if (m := __import__('re')):\n    pass\n[y for x in z if (y := exec(x))]",
		dynamic: []string{"__import__:__import__:re@1:9", "exec:exec:@3:23"},
	},
	{
		name:    "positional-only parameters and defaults",
		src:     "def f(a, /, b=exec('x'), *, c): pass\nlam = lambda a, /, b: eval(b)",
		dynamic: []string{"exec:exec:x@1:14", "eval:eval:@2:22"},
	},
	{
		name:  "trailing commas",
		src:   "def f(*args, **kw,): pass\nf(*a, **k,)\nclass C(A, metaclass=M,): pass",
		calls: []string{"f@2:0"},
	},
	{
		name:    "PEP 448 unpacking in displays and calls",
		src:     "print(*[1], *[2], **{'a': 1}, **{'b': eval('2')})\nx = [*a, *b]\ny = {**d, 'k': getattr(o, n)}\nz = *a, *b",
		dynamic: []string{"eval:eval:2@1:38", "getattr:getattr:@3:15"},
	},
	{
		name:  "matrix multiplication",
		src:   "m = np.dot(a) @ b\nm @= inv(c)",
		calls: []string{"np.dot@1:4", "inv@2:5"},
	},
	{
		name:    "decorators of any expression",
		src:     "@buttons[0].connect(eval('x'))\n@(lambda f: f)\n@property\ndef f(): pass",
		dynamic: []string{"eval:eval:x@1:20"},
		calls:   []string{"eval@1:20", "property@3:1"},
	},
	{
		name:    "parenthesised context managers",
		src:     "with (open('a') as f, open('b') as g,):\n    import zlib\nwith (yield_ctx()):\n    pass",
		imports: []string{"zlib:0@2:4 cond"},
		calls:   []string{"open@1:6", "open@1:22", "yield_ctx@3:6"},
	},
	{
		name:    "except star",
		src:     "try:\n    pass\nexcept* ValueError as eg:\n    import traceback\n",
		imports: []string{"traceback:0@4:4 cond"},
	},
	{
		name:    "type alias statement",
		src:     "type X = dict[str, eval('int')]\ntype Y[T: __import__('a')] = list[T]",
		dynamic: []string{"eval:eval:int@1:19", "__import__:__import__:a@2:10"},
	},
	{
		name:    "PEP 695 type parameters",
		src:     "def f[T: __import__('os'), *Ts, **P](x: T) -> T: pass\nclass C[T = eval('x')](Base): pass\nclass D[T: exec('b')]: pass",
		dynamic: []string{"__import__:__import__:os@1:9", "eval:eval:x@2:12", "exec:exec:b@3:11"},
	},
	{
		name:    "starred subscripts",
		src:     "x = a[*idx, exec('1')]\ndef g(*args: *Ts): pass",
		dynamic: []string{"exec:exec:1@1:12"},
	},
	{
		name:  "soft keywords as names",
		src:   "match = 1\ncase = 2\ntype = 3\n_ = match + case\nprint(type(_))\nmatch(x)\nmatch.group(1)\ntype.mro()\n",
		calls: []string{"print@5:0", "type@5:6", "match@6:0", "match.group@7:0", "type.mro@8:0"},
	},
	{
		name:    "numeric underscores",
		src:     "x = 1_000_000 + 0x_FF + 1_0.5e1_0j + 0b_1 + 0o7_7\nimport numbers",
		imports: []string{"numbers:0@2:0"},
	},
	{
		name:    "nested f-strings and format specs",
		src:     `s = f"{x!r:>{width}} {f'{eval("1")}'} {y:{'>' if z else '<'}{compile('a', 'b', 'exec')}}"`,
		dynamic: []string{"eval:eval:1@1:25", "compile:compile:a@1:61"},
	},
	{
		name:    "PEP 701 quote reuse and debug fields",
		src:     "s = f\"{d[\"key\"]} {__import__(\"os\")=} {x:=5}\"\nt = f'''\n{exec(\n  'a')}'''",
		dynamic: []string{"__import__:__import__:os@1:18", "exec:exec:a@3:1"},
	},
	{
		name:    "implicit concatenation",
		src:     "__import__('o' 's')\n__import__('o' f's')\n__import__(r'\\x' '\\x41')",
		dynamic: []string{"__import__:__import__:os@1:0", "__import__:__import__:@2:0", "__import__:__import__:\\xA@3:0"},
	},
	{
		name:    "aliases",
		src:     "import os as o\no.system('ls')\nfrom os import system as s\ns('ls')\nimport os.path\nos.path.join('a')\nimport xml.etree.ElementTree as ET\nET.parse(f)",
		imports: []string{"os:0@1:0", "os:0@3:0", "os.path:0@5:0", "xml.etree.ElementTree:0@7:0"},
		calls:   []string{"os.system@2:0", "os.system@4:0", "os.path.join@6:0", "xml.etree.ElementTree.parse@8:0"},
	},
	{
		name:  "assignment aliases",
		src:   "import os\no = os\no.system('ls')\ns = os.system\ns('ls')\na = o\nb = a\nb.popen('x')\np, q = os.path, s\nq()\n",
		calls: []string{"o.system@3:0", "os.system@3:0", "s@5:0", "os.system@5:0", "b.popen@8:0", "os.popen@8:0", "q@10:0", "os.system@10:0"},
	},
	{
		name:  "assignment aliases through getattr, vars and __dict__",
		src:   "import os\nf = getattr(os, 'system')\nf('ls')\ng = vars(os)['popen']\ng('x')\nh = os.__dict__['execv']\nh()\n",
		calls: []string{"getattr@2:4", "f@3:0", "os.system@3:0", "vars@4:4", "g@5:0", "os.popen@5:0", "h@7:0", "os.execv@7:0"},
	},
	{
		name:  "annotated assignment aliases",
		src:   "import os\no: object = os\no.system('ls')\nif 1: p: int = o.popen; p()\n",
		calls: []string{"o.system@3:0", "os.system@3:0", "p@4:24", "os.popen@4:24"},
	},
	{
		name:  "parameter defaults and loop targets",
		src:   "import os, sys\ndef f(a, o=os, *, p=os.popen):\n    o.system('ls')\n    p()\nfor m in (os, sys):\n    m.system()\ng = lambda q=os.execv: q()\n",
		calls: []string{"o.system@3:4", "os.system@3:4", "p@4:4", "os.popen@4:4", "m.system@6:4", "os.system@6:4", "sys.system@6:4", "q@7:23", "os.execv@7:23"},
	},
	{
		name:  "walrus aliases",
		src:   "import os\n(o := os).system('ls')\nif (s := os.popen):\n    s('x')\nf = (g := o.execv)\nf()\ng()\n(h := lambda: 0)()\nprint(y := os.getcwd(), k := 1)\n",
		calls: []string{"os.system@2:6", "s@4:4", "os.popen@4:4", "f@6:0", "os.execv@6:0", "g@7:0", "os.execv@7:0", "print@9:0", "os.getcwd@9:11"},
	},
	{
		name:    "assignment aliases of builtins",
		src:     "e = eval\ne('1')\nx = 1\nx.real\n",
		dynamic: []string{"eval:eval:@1:4", "eval:eval:1@2:0"},
		calls:   []string{"e@2:0", "eval@2:0"},
	},
	{
		name:  "assignment cycles terminate",
		src:   "import os\na = b\nb = a\na = os\nb.system()\n",
		calls: []string{"b.system@5:0", "os.system@5:0"},
	},
	{
		name:    "frame attributes",
		src:     "try:\n    1/0\nexcept Exception as e:\n    g = e.__traceback__.tb_frame.f_back.f_globals\nx = gen.gi_frame.f_locals\ngetattr(f, 'f_builtins')\nc.cr_frame.f_code\n",
		dynamic: []string{"frame:f_globals:@4:8", "frame:f_back:@4:8", "frame:tb_frame:@4:8", "dunder:__traceback__:@4:8", "frame:f_locals:@5:4", "frame:gi_frame:@5:4", "frame:f_builtins:f_builtins@6:0", "frame:f_code:@7:0", "frame:cr_frame:@7:0"},
	},
	{
		name:    "frames, namespaces, gc and attrgetter",
		src:     "import sys, inspect, gc, operator\nsys._getframe(1)\ninspect.currentframe()\nvars(sys)\nvars()\ngc.get_objects()\nf = operator.attrgetter('system')\nfrom operator import methodcaller\nmethodcaller('x')\nm = vars\n",
		dynamic: []string{"frame:sys._getframe:@2:0", "frame:inspect.currentframe:@3:0", "namespace:vars:@4:0", "gc:gc.get_objects:@6:0", "attrgetter:operator.attrgetter:system@7:4", "attrgetter:operator.methodcaller:x@9:0", "namespace:vars:@10:4"},
	},
	{
		name:  "decorators are calls",
		src:   "import os\ns = os.system\n@os.system\ndef f(): pass\n@s\nclass C: pass\n",
		calls: []string{"os.system@3:1", "s@5:1", "os.system@5:1"},
	},
	{
		name:  "match keyword captures read the subject's attributes",
		src:   "import os\nmatch os:\n    case object(system=f) | object(popen=f):\n        f('ls')\n    case object(path=P(join=j)):\n        j('a')\n",
		calls: []string{"f@4:8", "os.popen@4:8", "os.system@4:8", "j@6:8"},
	},
	{
		name:  "match keyword captures among other keyword patterns",
		src:   "import os\nmatch os:\n    case object(sep='/', system=f, name=n, path=P(x=1)):\n        f('ls')\n    case object(name=n, popen=g,):\n        g()\n",
		calls: []string{"f@4:8", "os.system@4:8", "g@6:8", "os.popen@6:8"},
	},
	{
		name:  "match on an expression binds nothing",
		src:   "import os\nmatch os.getenv('X'):\n    case str(upper=u):\n        u()\n",
		calls: []string{"os.getenv@2:6", "u@4:8"},
	},
	{
		name:  "the lowering's names cannot be spelt",
		src:   "import os\npdmU_deco(os.system)\npdmU_bind(f, os.system)\nf()\n",
		calls: []string{"pdmU_deco@2:0", "pdmU_bind@3:0", "f@4:0"},
	},
	{
		name:    "getattr family",
		src:     "getattr(o, '__globals__')\ngetattr(o, 'name')\ngetattr(o, n)\nsetattr(o, '__dict__', 1)\ndelattr(o, 'x')",
		dynamic: []string{"getattr:__globals__:__globals__@1:0", "getattr:getattr:@3:0", "setattr:__dict__:__dict__@4:0"},
	},
	{
		name:    "dunder attributes",
		src:     "().__class__.__bases__[0].__subclasses__()",
		dynamic: []string{"dunder:__subclasses__:@1:0", "dunder:__bases__:@1:0", "dunder:__class__:@1:0"},
	},
	{
		name:    "sys.modules, pickle, marshal, importlib",
		src:     "import sys, pickle as p, marshal\nsys.modules['os']\np.loads(b)\nmarshal.loads(b)\nfrom importlib import import_module\nimport_module('os')\nfrom sys import modules",
		dynamic: []string{"sys.modules:sys.modules:@2:0", "pickle.loads:pickle.loads:@3:0", "marshal.loads:marshal.loads:@4:0", "importlib.import_module:importlib.import_module:os@6:0"},
	},
	{
		name:    "builtins namespace and references to dynamic callables",
		src:     "f = eval\nimport builtins\nbuiltins.exec('x')\n__builtins__['eval']",
		dynamic: []string{"eval:eval:@1:4", "exec:builtins.exec:x@3:0", "dunder:__builtins__:@4:0"},
	},
	{
		name:    "conditional imports",
		src:     "import top\ntry:\n    import a\nexcept ImportError:\n    a = None\nclass C:\n    import b\nfor x in y:\n    import c\nwith z:\n    import d\nwhile 1:\n    import e\ndef f():\n    import g\n",
		imports: []string{"top:0@1:0", "a:0@3:4 cond", "b:0@7:4 cond", "c:0@9:4 cond", "d:0@11:4 cond", "e:0@13:4 cond", "g:0@15:4 cond"},
	},
	{
		name:    "line numbers survive multi-line tokens",
		src:     "x = '''a\nb'''\ny = (1 +\n  2)\nz = 1 + \\\n  2\nimport os; eval(\n'x')",
		imports: []string{"os:0@7:0"},
		dynamic: []string{"eval:eval:x@7:11"},
	},
	{
		name:    "keyword arguments and lambdas in calls",
		src:     "f(lambda x=1: x, key=eval('k'))\nsorted(a, key=lambda v: v[0], reverse=True)",
		dynamic: []string{"eval:eval:k@1:21"},
		calls:   []string{"f@1:0", "eval@1:21", "sorted@2:0"},
	},
	{
		name:    "BOM is stripped",
		src:     "\ufeffimport os",
		imports: []string{"os:0@1:0"},
	},
	{
		name:    "utf-8 coding declaration",
		src:     "# -*- coding: utf-8 -*-\nimport os",
		imports: []string{"os:0@2:0"},
	},
	{
		name:    "return and yield with unparenthesised stars",
		src:     "def g():\n    return *a, eval('x')\ndef h():\n    yield *a, b\nfor x in *a, *b:\n    pass",
		dynamic: []string{"eval:eval:x@2:15"},
	},
	{
		name: "global, nonlocal, del, assert, raise from",
		src:  "def f():\n    global g\n    def h():\n        nonlocal x\n    del a[0], b\n    assert x, msg\n    raise E from exc\n",
	},
}

func TestSource(t *testing.T) {
	for _, tt := range sourceTests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Source([]byte(tt.src), Options{})
			if err != nil {
				t.Fatalf("Source(%q): %v", tt.src, err)
			}
			if f.Imports == nil || f.Dynamic == nil || f.Calls == nil {
				t.Errorf("Source(%q) has a nil list: %#v", tt.src, f)
			}
			got := summarize(f)
			want := summary{Imports: tt.imports, Dynamic: tt.dynamic, Calls: tt.calls}
			if tt.imports == nil {
				got.Imports = nil
			}
			if tt.dynamic == nil {
				got.Dynamic = nil
			}
			if tt.calls == nil {
				got.Calls = nil
			}
			if diff := cmp.Diff(want, got, cmp.Transformer("nilEmpty", func(s []string) []string {
				if s == nil {
					return []string{}
				}
				return s
			})); diff != "" {
				t.Errorf("Source(%q) mismatch (-want +got):\n%s", tt.src, diff)
			}
		})
	}
}

func TestSourceImportNames(t *testing.T) {
	f, err := Source([]byte("from ..pkg import y as z, w\nimport a.b as c\nfrom m import *"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Import{
		{Module: "pkg", Level: 2, From: true, Names: []Alias{{Name: "y", AsName: "z"}, {Name: "w"}}, Line: 1},
		{Module: "a.b", Alias: "c", Line: 2},
		{Module: "m", From: true, Names: []Alias{{Name: "*"}}, Line: 3},
	}
	if diff := cmp.Diff(want, f.Imports); diff != "" {
		t.Errorf("imports mismatch (-want +got):\n%s", diff)
	}
}

var deep = strings.Repeat("(", 150) + strings.Repeat(")", 150)

// errorTests are rejected inputs; those of Kind "syntax" are also checked
// against CPython 3.13 by TestSourceAgreesWithCPython.
var errorTests = []struct {
	name string
	src  string
	opts Options
	want Error // Msg is checked as a substring
}{
	{"lone CR in a comment", "import os # a\rb\n", Options{}, Error{Line: 1, Col: 13, Kind: "cr", Msg: "carriage return"}},
	{"NUL byte", "x = 1\ny = '\x00'", Options{}, Error{Line: 2, Col: 5, Kind: "nul", Msg: "NUL"}},
	{"invalid UTF-8", "x = 1\n# \xff\n", Options{}, Error{Line: 2, Col: 2, Kind: "encoding", Msg: "UTF-8"}},
	{"latin-1 coding declaration", "# -*- coding: latin-1 -*-\nx = 1", Options{}, Error{Line: 1, Col: 0, Kind: "coding", Msg: "latin-1"}},
	{"coding declaration on line 2", "#!/usr/bin/python\n# vim: set fileencoding=cp1252 :\n", Options{}, Error{Line: 2, Col: 0, Kind: "coding", Msg: "cp1252"}},
	{"too large", "x = 1\n", Options{MaxBytes: 3}, Error{Line: 1, Col: 0, Kind: "size", Msg: "limit of 3 bytes"}},
	{"too deeply nested", deep, Options{}, Error{Line: 1, Col: 100, Kind: "depth", Msg: "too many nested parentheses"}},
	{"too deeply indented", nestedIfs(120), Options{}, Error{Line: 101, Col: 0, Kind: "depth", Msg: "indentation"}},
	{"syntax error", "def f(:):\n    pass", Options{}, Error{Line: 1, Col: 6, Kind: "syntax", Msg: "invalid syntax"}},
	{"syntax error on a later line", "x = 1\nif x\n    pass", Options{}, Error{Line: 2, Col: 4, Kind: "syntax", Msg: "invalid syntax"}},
	{"unterminated string", "x = 'abc\n", Options{}, Error{Line: 1, Col: 4, Kind: "syntax", Msg: "unterminated string literal"}},
	{"unterminated f-string field", "x = f'{a'\n", Options{}, Error{Line: 1, Col: 8, Kind: "syntax", Msg: "unterminated string literal"}},
	{"empty f-string field", "x = f'{}'", Options{}, Error{Line: 1, Col: 7, Kind: "syntax", Msg: "valid expression required"}},
	{"never closed", "x = (1,\n", Options{}, Error{Line: 1, Col: 4, Kind: "syntax", Msg: "never closed"}},
	{"bad indentation", "if x:\n    a\n  b\n", Options{}, Error{Line: 3, Col: 2, Kind: "syntax", Msg: "unindent"}},
	{"mixed bytes and str", "x = b'a' 'b'", Options{}, Error{Line: 1, Col: 4, Kind: "syntax", Msg: "cannot mix bytes"}},
	{"invalid decimal literal", "x = 1abc", Options{}, Error{Line: 1, Col: 4, Kind: "syntax", Msg: "invalid decimal literal"}},
	{"leading zeros", "x = 012", Options{}, Error{Line: 1, Col: 4, Kind: "syntax", Msg: "leading zeros"}},
	{"fullwidth keyword is a name, not import", "ｉｍｐｏｒｔ os", Options{}, Error{Line: 1, Col: 19, Kind: "syntax", Msg: "invalid syntax"}},
	{"BOM with a non-utf-8 declaration", "\ufeff# coding: utf8\nx = 1", Options{}, Error{Line: 1, Col: 0, Kind: "coding", Msg: "BOM"}},
}

func TestSourceErrors(t *testing.T) {
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Source([]byte(tt.src), tt.opts)
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("Source(%q) error = %v, want *Error", tt.src, err)
			}
			if got.Line != tt.want.Line || got.Col != tt.want.Col || got.Kind != tt.want.Kind || !strings.Contains(got.Msg, tt.want.Msg) {
				t.Errorf("Source(%q) error = %+v, want %+v", tt.src, *got, tt.want)
			}
			if want := fmt.Sprintf("line %d, col %d: ", got.Line, got.Col); !strings.HasPrefix(got.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", got.Error(), want)
			}
		})
	}
}

func nestedIfs(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("if x:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "pass\n")
	return b.String()
}

func TestSourceDeepExpressionsDoNotOverflow(t *testing.T) {
	for _, src := range []string{
		"x = " + strings.Repeat("1 + ", 200000) + "1",
		"x = " + strings.Repeat("-", 100000) + "1",
		"x = a" + strings.Repeat(".b", 100000),
		"x = f" + strings.Repeat("()", 100000),
		"x = " + strings.Repeat("'ab' ", 200000),
	} {
		// past the expression limit, which exists for memory, not depth
		if _, err := Source([]byte(src), Options{MaxExpressionTokens: 1 << 30}); err != nil {
			t.Errorf("Source(%.30q...): %v", src, err)
		}
	}
}

func TestSourceConcurrent(t *testing.T) {
	src := []byte("import os\nprint(f\"{__import__('a')}\")\n")
	want, err := Source(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				got, err := Source(src, Options{})
				if err != nil {
					t.Error(err)
					return
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("concurrent Source mismatch (-want +got):\n%s", diff)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestSourceReferences(t *testing.T) {
	src := "import os as o\nfrom subprocess import run\nf = o.system\nmap(run, xs)\ng = getattr(o, 'popen')\nimport builtins\nh = getattr(builtins, 'eval')\no.path.join('a')\nx = y.z\n"
	f, err := Source([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, r := range f.References {
		refs = append(refs, fmt.Sprintf("%s@%d:%d", r.Name, r.Line, r.Col))
	}
	want := []string{"os.system@3:4", "subprocess.run@4:4", "os.popen@5:4", "builtins.eval@7:4"}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("references mismatch (-want +got):\n%s", diff)
	}
	if got := summarize(f).Dynamic; !cmp.Equal(got, []string{"eval:builtins.eval:@7:4"}) {
		t.Errorf("dynamic = %v, want getattr(builtins, 'eval') reported as eval", got)
	}
}
