package executor

import "sync/atomic"

// runnerCode is the runner compiled by a sandbox's Python: what sendRunner
// puts in every later sandbox's preamble, so that its bootstrap loads the
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

// runnerCodes is what the executor knows of the runner's code: the code
// once a sandbox gave it, how often it was asked for, and how many
// sandboxes loaded it or compiled the source themselves (Stats).
type runnerCodes struct {
	code             atomic.Pointer[runnerCode]
	asks             atomic.Int32
	loaded, compiled atomic.Int64
}

// ask reports whether the next fresh sandbox's first request should ask
// for the runner's code: not while the executor has it, nor after
// maxRunnerCodeAsks asks. The sandbox must be fresh: its bootstrap
// compiled the code and nothing else has run in it yet, so the code can
// be handed to the sandboxes of every other call.
func (r *runnerCodes) ask() bool {
	return r.code.Load() == nil && r.asks.Add(1) <= maxRunnerCodeAsks
}

// keep stores the answer to an ask (the runner's reply field RunnerCode):
// the 4-byte magic number, then the marshalled code. It reports whether
// the answer was usable.
func (r *runnerCodes) keep(b []byte) bool {
	if len(b) <= 4 {
		return false
	}
	c := &runnerCode{code: b[4:]}
	copy(c.magic[:], b[:4])
	r.code.CompareAndSwap(nil, c)
	return true
}

// count records what a sandbox's ready frame said of its runner:
// "loaded" (the preamble's code) or "compiled" (its own compile).
func (r *runnerCodes) count(how string) {
	switch how {
	case "loaded":
		r.loaded.Add(1)
	case "compiled":
		r.compiled.Add(1)
	}
}
