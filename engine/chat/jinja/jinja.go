// Package jinja renders the subset of Jinja2 that chat templates use, the way
// Hugging Face transformers' apply_chat_template renders them (an
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop
// controls, plus its raise_exception, strftime_now and tojson).
//
// Supported: {{ }}, {% %}, {# #} with whitespace control ("-", "+");
// if/elif/else, for (with loop filters, else, loop.*, break, continue), set
// (names, tuples, ns.attr, blocks), macro and call blocks, filter and with
// blocks, transformers' generation block, raw; the Python expression
// language (literals, arithmetic, comparisons, in, is, slices, conditional
// expressions) with Jinja's filters and tests and the str/dict/list methods
// templates call. Not supported (a parse error): include, import, extends,
// block, recursive loops.
//
// Templates are untrusted input (a GGUF file's metadata): parsing and
// rendering never panic, and every render is bounded in steps, output size,
// value sizes and nesting depth (Limits). Errors name the template line.
//
// Strings carry taint: Untrusted values (message text) keep track of which
// bytes of every string derived from them came from the input, and Render
// reports those byte ranges of the output, so the caller can tokenize the
// template's own text and the users' text differently.
package jinja

import (
	"errors"
	"fmt"
	"time"
)

// Error is a template error: a syntax error at parse time or a failure at
// render time (including raise_exception), with the template line.
type Error struct {
	Line int
	Msg  string
	// Raised is set for raise_exception: the template refused the input.
	Raised bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Limits bound a render. Zero fields take the defaults.
type Limits struct {
	// Steps bounds the work: expression evaluations, statements and loop
	// iterations together (default 5,000,000).
	Steps int
	// Output bounds the output and every string or list built on the way,
	// in bytes or items (default 16 MiB).
	Output int
	// Depth bounds macro calls inside macro calls (default 64).
	Depth int
}

func (l Limits) withDefaults() Limits {
	if l.Steps <= 0 {
		l.Steps = 5_000_000
	}
	if l.Output <= 0 {
		l.Output = 16 << 20
	}
	if l.Depth <= 0 {
		l.Depth = 64
	}
	return l
}

// MaxTemplate is the largest template source Parse accepts (1 MiB; real chat
// templates are a few KiB to a few tens of KiB).
const MaxTemplate = 1 << 20

// Template is a parsed template, safe for concurrent renders.
type Template struct {
	body []node
}

// Parse parses a template.
func Parse(src string) (*Template, error) {
	if len(src) > MaxTemplate {
		return nil, &Error{Msg: fmt.Sprintf("template is %d bytes, more than the %d allowed", len(src), MaxTemplate)}
	}
	toks, err := lex(src, len(src)+16)
	if err != nil {
		return nil, err
	}
	body, err := parse(toks)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Output is a rendered template.
type Output struct {
	// Text is the rendered text.
	Text string
	// Untrusted are the byte ranges of Text that came from Untrusted
	// input, sorted and disjoint.
	Untrusted []Span
	// Steps is the work the render took, in the units of Limits.Steps.
	Steps int
}

// Options are the environment of a render.
type Options struct {
	Limits Limits
	// Now is the clock strftime_now reads (default time.Now).
	Now func() time.Time
}

// Render renders the template with the given variables.
func (t *Template) Render(vars map[string]Value, opts Options) (out Output, err error) {
	ev := &evaluator{lim: opts.Limits.withDefaults(), now: opts.Now}
	if ev.now == nil {
		ev.now = time.Now
	}
	root := &scope{vars: make(map[string]Value, len(vars)+8)}
	for k, v := range vars {
		root.vars[k] = v
	}
	w := &tstr{}
	if err := ev.nodes(t.body, root, w); err != nil {
		var ctl *loopControl
		if errors.As(err, &ctl) {
			return Output{}, errorf(ctl.line, "'%s' outside of a loop", ctl.kind)
		}
		return Output{}, err
	}
	v := w.value()
	return Output{Text: v.s, Untrusted: v.t, Steps: ev.steps}, nil
}
