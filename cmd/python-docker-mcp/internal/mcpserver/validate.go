package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// argValidator checks a call's arguments against its tool's input schema
// and explains every problem in a sentence that names the argument, the
// value given and what is allowed. It replaces mcp-go's own validation,
// whose messages print the validator's Go structs. Safe for concurrent use
// once built.
type argValidator struct {
	schemas map[string]*jsonschema.Schema
	props   map[string][]string // tool -> its argument names, sorted
}

func newArgValidator(tools []mcp.Tool) (*argValidator, error) {
	v := &argValidator{schemas: map[string]*jsonschema.Schema{}, props: map[string][]string{}}
	for _, t := range tools {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.RawInputSchema))
		if err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		url := "mem:///tools/" + t.Name + ".json"
		c := jsonschema.NewCompiler()
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		v.schemas[t.Name] = sch
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(t.RawInputSchema, &s)
		for p := range s.Properties {
			v.props[t.Name] = append(v.props[t.Name], p)
		}
		sort.Strings(v.props[t.Name])
	}
	return v, nil
}

// middleware refuses a call whose arguments do not fit the tool's schema
// with an isError result listing each problem; the handler never runs.
func (v *argValidator) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if problems := v.check(req.Params.Name, req.GetRawArguments()); len(problems) > 0 {
			msg := fmt.Sprintf("invalid arguments for %s, nothing was run:\n  %s", req.Params.Name, strings.Join(problems, "\n  "))
			return mcp.NewToolResultError(msg), nil
		}
		return next(ctx, req)
	}
}

// check returns one sentence per problem with args (nil when they fit).
func (v *argValidator) check(tool string, args any) []string {
	sch, ok := v.schemas[tool]
	if !ok {
		return nil
	}
	var raw []byte
	switch a := args.(type) {
	case nil:
		raw = []byte("{}")
	case json.RawMessage:
		raw = a
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			raw = []byte("{}")
		}
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return []string{"the arguments are not JSON: " + err.Error()}
		}
		raw = b
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []string{"the arguments are not valid JSON: " + err.Error()}
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []string{err.Error()}
	}
	var out []string
	seen := map[string]bool{}
	for _, leaf := range leaves(verr) {
		m := v.sentence(tool, inst, leaf)
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

var englishPrinter = message.NewPrinter(language.English)

// sentence explains one schema violation.
func (v *argValidator) sentence(tool string, inst any, e *jsonschema.ValidationError) string {
	name := argName(e.InstanceLocation)
	got := describe(valueAt(inst, e.InstanceLocation))
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		miss := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			miss[i] = "`" + m + "`"
		}
		where := ""
		if len(e.InstanceLocation) > 0 {
			where = " in " + name
		}
		if len(miss) == 1 {
			return fmt.Sprintf("the required argument %s is missing%s", miss[0], where)
		}
		return fmt.Sprintf("the required arguments %s are missing%s", strings.Join(miss, ", "), where)
	case *kind.AdditionalProperties:
		unknown := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			unknown[i] = "`" + p + "`"
		}
		allowed := "no arguments"
		if ps := v.props[tool]; len(ps) > 0 && len(e.InstanceLocation) == 0 {
			allowed = "only " + strings.Join(ps, ", ")
		}
		return fmt.Sprintf("unknown argument %s: %s takes %s", strings.Join(unknown, ", "), tool, allowed)
	case *kind.Type:
		return fmt.Sprintf("argument %s is %s, but it must be %s", name, got, article(strings.Join(k.Want, " or ")))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = describe(w)
		}
		return fmt.Sprintf("argument %s is %s; allowed values: %s", name, got, strings.Join(want, ", "))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("argument %s is %s, but it must be greater than %s", name, rat(k.Got), rat(k.Want))
	case *kind.Minimum:
		return fmt.Sprintf("argument %s is %s, but it must be at least %s", name, rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("argument %s is %s, but it must be less than %s", name, rat(k.Got), rat(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("argument %s is %s, but it must be at most %s", name, rat(k.Got), rat(k.Want))
	case *kind.MaxLength:
		return fmt.Sprintf("argument %s is %d characters long; the maximum is %d", name, k.Got, k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("argument %s is %d characters long; the minimum is %d", name, k.Got, k.Want)
	}
	return fmt.Sprintf("argument %s is %s: %s", name, got, e.ErrorKind.LocalizedString(englishPrinter))
}

func argName(loc []string) string {
	if len(loc) == 0 {
		return "(the arguments object)"
	}
	return "`" + strings.Join(loc, ".") + "`"
}

func article(t string) string {
	switch t {
	case "object", "array", "integer":
		return "an " + t
	case "null":
		return t
	}
	return "a " + t
}

// valueAt follows an instance location into a decoded JSON value.
func valueAt(v any, loc []string) any {
	for _, seg := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			var i int
			if _, err := fmt.Sscan(seg, &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// describe renders a value for a message: its JSON, shortened, with its
// JSON type.
func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	s := string(b)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	switch v.(type) {
	case string:
		return "the string " + s
	case map[string]any:
		return "an object " + s
	case []any:
		return "an array " + s
	case bool:
		return "the boolean " + s
	case nil:
		return "null"
	case json.Number:
		return s
	}
	return s
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}
