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
// rendering never panic, and every render is bounded (Limits; the defaults
// in brackets):
//
//   - work [5,000,000 steps]: a step per statement, expression, loop turn
//     and list or dict element made or visited, and a step per 64 bytes a
//     string operation reads, compares or writes (a rune count, a search,
//     a copy, hashing a dict key; per 16 bytes for rune-by-rune Unicode
//     work: case mappings, repr, character classes). So a loop whose body
//     works on a 16 MB string runs a handful of turns, not millions;
//   - memory [128 MiB]: the bytes of every string, list, dict entry, scope,
//     macro frame, call's arguments and bound method a render makes,
//     counted as they are allocated (not as they are freed);
//   - value size [16 MiB]: the output and every string (bytes) or list
//     (items) built on the way, checked before it is built;
//   - nesting: macro calls inside macro calls [64], values walked by
//     comparison, hashing and printing [100 levels];
//   - wall-clock time [5 s], and the render's context: both are looked at
//     every 4,096 steps, so cancelling the context stops a render at once.
//
// A render stopped by a limit fails with an *Error that wraps ErrLimit;
// one stopped by its context wraps the context's error. Errors name the
// template line.
//
// Strings carry taint: Untrusted values (message text) keep track of which
// bytes of every string derived from them came from the input, and Render
// reports those byte ranges of the output, so the caller can tokenize the
// template's own text and the users' text differently.
package jinja

import (
	"context"
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
	// Err is ErrLimit for a render stopped by one of its limits, the
	// context's error for one stopped by its context, else nil.
	Err error
}

// ErrLimit is wrapped by the error of a render that one of its Limits
// stopped: a template that does too much work or builds too much.
var ErrLimit = errors.New("the chat template exceeded a limit")

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Limits bound a render (see the package doc for what each one counts).
// Zero fields take the defaults.
type Limits struct {
	// Steps bounds the work: statements, expressions, loop turns, elements
	// made or visited, and string bytes read or written (bytesPerStep to
	// a step) together (default 5,000,000).
	Steps int
	// Output bounds the output and every string or list built on the way,
	// in bytes or items (default 16 MiB).
	Output int
	// Memory bounds the bytes a render allocates for its values, in total
	// (default 128 MiB).
	Memory int
	// Depth bounds macro calls inside macro calls (default 64).
	Depth int
	// Time bounds the render's wall-clock time (default 5 s).
	Time time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.Steps <= 0 {
		l.Steps = 5_000_000
	}
	if l.Output <= 0 {
		l.Output = 16 << 20
	}
	if l.Memory <= 0 {
		l.Memory = 128 << 20
	}
	if l.Depth <= 0 {
		l.Depth = 64
	}
	if l.Time <= 0 {
		l.Time = 5 * time.Second
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

// Render renders the template with the given variables. It stops when ctx
// ends (the error wraps ctx.Err()) or a limit is reached (it wraps
// ErrLimit).
func (t *Template) Render(ctx context.Context, vars map[string]Value, opts Options) (Output, error) {
	_, out, err := t.render(ctx, vars, opts)
	return out, err
}

// render is Render, returning the evaluator for its accounts too.
func (t *Template) render(ctx context.Context, vars map[string]Value, opts Options) (*evaluator, Output, error) {
	ev := newEvaluator(ctx, opts)
	root := &scope{root: make(map[string]Value, len(vars)+8)}
	for k, v := range vars {
		root.root[k] = v
	}
	w := &tstr{}
	err := ev.step(0)
	if err == nil {
		err = ev.nodes(t.body, root, w)
	}
	if err == nil {
		// A helper that cannot return an error (a comparison) may have
		// met a limit after the last step.
		err = ev.stop
	}
	if err != nil {
		var ctl *loopControl
		if errors.As(err, &ctl) {
			return ev, Output{}, errorf(ctl.line, "'%s' outside of a loop", ctl.kind)
		}
		return ev, Output{}, err
	}
	v := w.value()
	return ev, Output{Text: v.s, Untrusted: v.t, Steps: ev.steps}, nil
}
