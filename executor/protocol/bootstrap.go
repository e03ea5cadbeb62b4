package protocol

import "sync/atomic"

// Bootstrap reads the runner from stdin, where the executor writes a
// preamble (WritePreamble) before the first frame: the runner's
// source and, once the executor has it, the code an earlier sandbox
// compiled from it (Codes). It runs the code when its own Python's
// magic number is the one the code was marshalled with, and compiles the
// source otherwise (about 25 ms of CPU per sandbox), under the runner's
// own file name either way, so tracebacks and the import guard can tell
// its frames from user code's "<string>". _pdm_runner tells the runner's
// ready frame which it was; _pdm_code is what the runner marshals when the
// executor asks it for its code. The source is not an argument: Docker
// and containerd copy a container's command line into every state file
// they write, and 84 KiB of it cost the machine 20-50 ms of CPU per
// container.
const Bootstrap = `import os, sys
del sys.argv[1]
def _r(n):
    b = bytearray()
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit("runner: stdin ended inside the runner's preamble")
        b += c
    return b
_h = _r(12)
_ns, _nc = int.from_bytes(_h[0:4], "big"), int.from_bytes(_h[4:8], "big")
_b = _r(_ns + _nc)
_pdm_code = None
if _nc and bytes(_h[8:12]) == getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", None):
    import marshal
    try:
        _pdm_code = marshal.loads(_b[_ns:])
    except Exception:
        _pdm_code = None
_pdm_runner = "compiled" if _pdm_code is None else "loaded"
if _pdm_code is None:
    _pdm_code = compile(bytes(_b[:_ns]), "<pdm-runner>", "exec")
del _r, _h, _ns, _nc, _b
exec(_pdm_code)
`

// Command is every sandbox's command line; its stdin starts with the
// runner's preamble. The last argument, RunnerTag, says so to whoever
// reads the command (a test's fake backend).
func Command() []string {
	return []string{"python3", "-I", "-B", "-c", Bootstrap, RunnerTag}
}

// runnerCode is the runner compiled by a sandbox's Python: what the
// executor puts in every later sandbox's preamble, so that its bootstrap loads the
// code (under a millisecond) instead of compiling the source (about 25 ms
// of CPU, in every sandbox).
type runnerCode struct {
	magic [4]byte // importlib's MAGIC_NUMBER of the Python that compiled it
	code  []byte  // marshal.dumps of the code object
}

// maxRunnerCodeAsks caps how often an executor asks a sandbox for the
// runner's code before it leaves every sandbox to compile the source
// (an image whose runner cannot answer, a fake backend). The transient
// pool asks in its sandboxes' first preload; without a pool, start asks
// in a preload of nothing.
const maxRunnerCodeAsks = 3

// Codes is what an executor knows of the runner's code: the code
// once a sandbox gave it, how often it was asked for, and how many
// sandboxes loaded it or compiled the source themselves (Stats).
type Codes struct {
	code             atomic.Pointer[runnerCode]
	asks             atomic.Int32
	loaded, compiled atomic.Int64
}

// Ask reports whether the next fresh sandbox's first request should ask
// for the runner's code: not while the executor has it, nor after
// maxRunnerCodeAsks asks. The sandbox must be fresh: its bootstrap
// compiled the code and nothing else has run in it yet, so the code can
// be handed to the sandboxes of every other call.
func (r *Codes) Ask() bool {
	return r.code.Load() == nil && r.asks.Add(1) <= maxRunnerCodeAsks
}

// Keep stores the answer to an ask (the runner's reply field RunnerCode):
// the 4-byte magic number, then the marshalled code. It reports whether
// the answer was usable.
func (r *Codes) Keep(b []byte) bool {
	if len(b) <= 4 {
		return false
	}
	c := &runnerCode{code: b[4:]}
	copy(c.magic[:], b[:4])
	r.code.CompareAndSwap(nil, c)
	return true
}

// Count records what a sandbox's ready frame said of its runner:
// "loaded" (the preamble's code) or "compiled" (its own compile).
func (r *Codes) Count(how string) {
	switch how {
	case "loaded":
		r.loaded.Add(1)
	case "compiled":
		r.compiled.Add(1)
	}
}

// Code is the runner's code once a sandbox gave it, and the magic number
// of the Python that compiled it; ok false before.
func (r *Codes) Code() (code []byte, magic [4]byte, ok bool) {
	c := r.code.Load()
	if c == nil {
		return nil, magic, false
	}
	return c.code, c.magic, true
}

// Asks counts the asks for the code; Loaded and Compiled the sandboxes
// whose runner ran the code or compiled the source.
func (r *Codes) Asks() int32     { return r.asks.Load() }
func (r *Codes) Loaded() int64   { return r.loaded.Load() }
func (r *Codes) Compiled() int64 { return r.compiled.Load() }
