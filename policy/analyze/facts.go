// Package analyze is the static step of the gate: it reads Python source as
// CPython 3.13 would, and extracts the facts the policy judges (imports,
// dynamic-import tricks, risky calls), each with CPython's line and column.
package analyze

// Facts is what the policy sees of a piece of code. It is also the "facts"
// object of the policy input document and is sent to the sandbox runner,
// which derives the imports again with CPython's ast and refuses to run when
// they differ. Lists are never nil, so they encode as [] in JSON.
type Facts struct {
	Imports []Import  `json:"imports"`
	Dynamic []Dynamic `json:"dynamic"`
	Calls   []Call    `json:"calls"`
	// References are names bound by an import (or attribute chains rooted
	// at one) used as values rather than called, resolved like Calls:
	// `f = os.system`, `map(o.system, xs)`, `from os import system;
	// g(system)` all give "os.system"; `getattr(os, "system")` does too.
	// A policy that blocks a call should block its references as well.
	References []Call `json:"references"`
}

// Import is one imported module: `import a, b` gives two, `from x import y, z`
// gives one with two Names.
type Import struct {
	// Module is the dotted module name as written ("" for `from . import x`).
	Module string `json:"module"`
	// Level is the number of leading dots of a relative import (0 = absolute).
	Level int `json:"level"`
	// From is true for `from M import ...`.
	From bool `json:"from"`
	// Names are the imported names of a from-import ("*" for a star import).
	Names []Alias `json:"names,omitempty"`
	// Alias is the `as` name of a plain `import a.b as c`.
	Alias string `json:"alias,omitempty"`
	// Line is 1-based, Col 0-based (CPython's lineno and col_offset, in
	// UTF-8 bytes), of the import statement.
	Line int `json:"line"`
	Col  int `json:"col"`
	// Conditional is true inside try, if, loops, with, match, or a
	// function/class body: the import may not run.
	Conditional bool `json:"conditional"`
}

// Alias is one name of a from-import.
type Alias struct {
	Name   string `json:"name"`
	AsName string `json:"asname,omitempty"`
}

// Dynamic is one use of a feature that can import, run or reach code the
// static import list cannot see.
type Dynamic struct {
	// Kind is one of: "__import__", "importlib.import_module",
	// "importlib.__import__", "exec", "eval", "compile", "getattr",
	// "setattr", "delattr", "dunder" (attribute access to a dunder name),
	// "sys.modules", "pickle.loads" (and .load / marshal.loads ...: Kind is
	// the resolved dotted name).
	//
	// Besides calls, a reference to one of these callables that is not
	// called where it appears (`f = eval`, `map(getattr, ...)`) is
	// reported with Constant false, and so is `getattr(builtins, "exec")`.
	// Kind "dunder" also covers the names __builtins__, __loader__ and
	// __spec__ used outside an attribute.
	Kind string `json:"kind"`
	// Name is the dunder attribute for Kind "dunder" or a getattr-family
	// constant name; otherwise the resolved callee name.
	Name string `json:"name,omitempty"`
	// Arg is the first argument when it is a constant string (the module
	// of a dynamic import, the attribute of getattr); nil otherwise.
	Arg *string `json:"arg,omitempty"`
	// Constant is true when the argument that matters is a constant string.
	Constant bool `json:"constant"`
	Line     int  `json:"line"`
	Col      int  `json:"col"`
}

// Call is one call whose callee is a name or an attribute chain rooted at a
// name, resolved through import aliases: `import os as o; o.system()` and
// `from os import system as s; s()` both give "os.system"; `print()` gives
// "print". Alias resolution ignores control flow: a name bound by several
// imports gives one Call per binding, at the same position. Relative
// imports resolve with their dots: `from . import m; m.f()` gives ".m.f".
// Class patterns of match statements are not calls.
type Call struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}
