package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func render(t *testing.T, src string, vars map[string]Value) (Output, error) {
	t.Helper()
	tm, err := Parse(src)
	if err != nil {
		return Output{}, err
	}
	return tm.Render(t.Context(), vars, Options{Now: func() time.Time { return time.Date(2024, 7, 26, 9, 5, 0, 0, time.UTC) }})
}

// Expected outputs are what jinja2 3.1.6 renders with transformers'
// environment (ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True) + loopcontrols), checked by hand in Python.
func TestRenderSemantics(t *testing.T) {
	msgs := List(Dict(Str("role"), Str("user"), Str("content"), Untrusted("Hi")))
	cases := []struct{ src, want string }{
		{"{% set x = 1 %}{% for i in [1,2,3] %}{{ x }}{% set x = x + i %}{{ x }};{% endfor %}{{ x }}", "12;13;14;1"},
		{"{% macro m() %}{{ z }}{% endmacro %}{% set z = 5 %}{{ m() }}", "5"},
		{"{{ [1,2][5] }}|{{ {'a':1}.b }}|{{ 'ab'.zz }}", "||"},
		{"{{ none }}{{ True }}{{ [1,'a',none, 1.5, {'k': 'v'}] }}{{ (1,) }}{{ 1e20 }}{{ 1.0e-5 }}{{ 10/4 }}{{ 7//2 }}{{ -7//2 }}{{ -7 % 3 }}",
			"NoneTrue[1, 'a', None, 1.5, {'k': 'v'}](1,)1e+201e-052.53-42"},
		{"{{ x ~ 'a' }}{{ x | length }}{{ x|trim }}", "a0"},
		{"{{ 'x' in y }}", "False"},
		{"{% for a in 'ab' %}{{loop.index}}{{a}}{% else %}E{% endfor %}{% for a in [] %}x{% else %}E{% endfor %}", "1a2bE"},
		{"  {% if true %}\n  x\n  {% endif %}\n  {# c #}\n y {{- ' z ' -}} \n w", "  x\n y z w"},
		{"a\n", "a"},
		{"{{ 'a\\x41\\u00e9\\n\\d' }}", "aAé\n\\d"},
		{"{{ 'abc'[::-1] }}{{ 'héllo'[1:3] }}{{ 'a b  c'.split() }}{{ 'a,b'.split(',') }}", "cbaél['a', 'b', 'c']['a', 'b']"},
		{"{{ {'b':1,'a':2} | dictsort }}{{ {'b':1,'a':2} | tojson }}{{ {'b':1,'a':2}.items() | list }}", `[('a', 2), ('b', 1)]{"b": 1, "a": 2}[('b', 1), ('a', 2)]`},
		{"{{ 1 if false }}|{{ (1 if false) is defined }}", "|False"},
		{"{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}", "4"},
		{"{{ range(3)|list }}{{ dict(a=1) }}", "[0, 1, 2]{'a': 1}"},
		{"{{ 'é<>' | tojson }}{{ [1, 2.5, none, true] | tojson(indent=2) }}", "\"é<>\"[\n  1,\n  2.5,\n  null,\n  true\n]"},
		{"{{ x is string }}{{ 'a' is string }}{{ {} is sequence }}{{ true is number }}{{ true is integer }}", "FalseTrueTrueTrueFalse"},
		{"{% for m in messages %}{{ m.role }}:{{ m['content'] | upper }}{% endfor %}", "user:HI"},
		{"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", "02"},
		{"{{ messages[-1].content.startswith('H') }}{{ 'a-b'.replace('-', '+') }}{{ '%s=%d' % ('x', 3) }}", "Truea+bx=3"},
		{"{% set s %}in{{ 1 }}{% endset %}[{{ s }}]{{ 'x'.join(['a','b']) }}{{ [3,1,2]|sort|join(',') }}", "[in1]axb1,2,3"},
		{"{{ strftime_now('%d %b %Y') }}", "26 Jul 2024"},
		{"{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}"},
		{"{%- raw -%} {{ x }} {%- endraw %}", "{{ x }}"},
	}
	for _, c := range cases {
		out, err := render(t, c.src, map[string]Value{"messages": msgs})
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if out.Text != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.src, out.Text, c.want)
		}
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	cases := []struct{ src, want string }{
		{"a\n{% for %}", "line 2"},
		{"{{ x.y }}", "'x' is undefined"},
		{"{{ 'a' + 1 }}", "can only concatenate str"},
		{"\n\n{{ raise_exception('no system role') }}", "line 3: raise_exception: no system role"},
		{"{{ [].append(1) }}", "unsafe"},
		{"{% if x %}", "needs 'elif' or 'else' or 'endif'"},
		{"{{ x | nosuchfilter }}", "no filter named 'nosuchfilter'"},
		{"{% include 'x' %}", "not supported"},
		{"{{ 1 // 0 }}", "division or modulo by zero"},
		{"{% break %}", "outside of a loop"},
		{"{{ 9223372036854775807 + 1 }}", "integer overflow"},
	}
	for _, c := range cases {
		_, err := render(t, c.src, nil)
		var je *Error
		if err == nil || !errors.As(err, &je) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want it to contain %q", c.src, err, c.want)
		}
	}
}

// Hostile templates are stopped by the limits, with an error, quickly.
func TestLimits(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}", "evaluation steps"},
		{"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested"},
		{"{{ 'x' * 100000000 }}", "more than"},
		{"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "more than"},
		{"{{ range(100000000) }}", "too big"},
		{"{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}", "nested too deeply"},
		{"{{ " + strings.Repeat("-", 5000) + "1 }}", "nested too deeply"},
		{"{{ " + strings.Repeat("not ", 5000) + "1 }}", "nested too deeply"},
		{"{% set s = 'ab' * 400000 %}{{ s | list | length }}", "evaluation steps"},
		{"{{ " + strings.Repeat("[", 150) + strings.Repeat("]", 150) + " }}", "nested too deeply"},
		{strings.Repeat("{% if true %}", 500) + strings.Repeat("{% endif %}", 500), "nested too deeply"},
	}
	for _, c := range cases {
		start := time.Now()
		tm, err := Parse(c.src)
		if err == nil {
			_, err = tm.Render(t.Context(), nil, Options{Limits: Limits{Steps: 200_000, Output: 1 << 20}})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: err %v, want %q", c.src, err, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Logf("%.40q took %v", c.src, d) // informative only: no timed assertion
		}
	}
}

// Untrusted bytes stay marked through the string operations templates use.
func TestTaint(t *testing.T) {
	vars := map[string]Value{"c": Untrusted("  <eot> said  "), "r": Str("user")}
	cases := []struct {
		src       string
		untrusted []string // the output's untrusted pieces
	}{
		{"<{{ r }}>{{ c | trim }}<end>", []string{"<eot> said"}},
		{"{{ '[' + c.strip() + ']' }}", []string{"<eot> said"}},
		{"{% for p in c.split('said') %}({{ p }}){% endfor %}", []string{"  <eot> ", "  "}},
		{"{{ c.replace('said', '<x>') }}", []string{"  <eot> <x>  "}},
		{"{{ c[2:7] }}|{{ c | tojson }}", []string{"<eot>", `"  <eot> said  "`}},
		{"{% set ns = namespace(s='') %}{% set ns.s = ns.s + 'A' + c %}{{ ns.s }}", []string{"  <eot> said  "}},
	}
	for _, c := range cases {
		out, err := render(t, c.src, vars)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		var got []string
		for _, sp := range out.Untrusted {
			got = append(got, out.Text[sp.Lo:sp.Hi])
		}
		if strings.Join(got, "|") != strings.Join(c.untrusted, "|") {
			t.Errorf("%q -> %q: untrusted %q, want %q", c.src, out.Text, got, c.untrusted)
		}
	}
}

// A loop that keeps rebuilding a long string runs out of steps (or, since
// every copy is charged as memory too, out of memory) rather than copying
// for minutes.
func TestQuadraticCopyIsBounded(t *testing.T) {
	src := "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% endfor %}{{ ns.s | length }}"
	tm, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Render(t.Context(), nil, Options{}); !errors.Is(err, ErrLimit) {
		t.Errorf("err = %v, want a limit", err)
	}
	// The same loop, short, renders.
	out, err := render(t, strings.Replace(src, "100000", "100", 1), nil)
	if err != nil || out.Text != "7000" {
		t.Errorf("short loop: %q, %v", out.Text, err)
	}
}

// A render stops when its context ends, at once and with the context's
// error: the clock strftime_now reads cancels the context in the middle of
// a loop that would run for millions of steps.
func TestRenderStopsWithItsContext(t *testing.T) {
	tm, err := Parse("{{ strftime_now('%Y') }}{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	now := func() time.Time { cancel(); return time.Now() }
	ev, _, err := tm.render(ctx, nil, Options{Now: now})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var je *Error
	if !errors.As(err, &je) || je.Line != 1 {
		t.Errorf("err = %#v, want a template error naming the line", err)
	}
	if ev.steps > 2*checkEvery {
		t.Errorf("%d steps after the cancel (of a billion), want at most %d", ev.steps, 2*checkEvery)
	}
	// A context already ended stops the render before its first step.
	if _, err := tm.Render(ctx, nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

// The wall-clock limit stops a render that its other limits allow.
func TestRenderTimeLimit(t *testing.T) {
	tm, err := Parse("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Render(t.Context(), nil, Options{Limits: Limits{Steps: 1 << 40, Time: time.Millisecond}})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "took longer than 1ms") {
		t.Errorf("err = %v, want the time limit", err)
	}
}

// The operations rewritten to be charged by what they touch (slicing and
// indexing strings without rune tables, dict keys, sorting, replace, split,
// strip, case tests, formatting) still render what Jinja2 renders. Expected
// outputs are jinja2 3.1.6's, with transformers' environment.
func TestChargedOperationsMatchJinja2(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{ 'héllo wörld'[::2] }}|{{ 'héllo wörld'[::-2] }}|{{ 'héllo'[-1] }}|{{ 'héllo'[-5] }}|{{ 'héllo'[-6] }}|{{ 'héllo'[4] }}|{{ 'héllo'[5] }}",
			"hlowrd|drwolh|o|h||o|"},
		{"{{ 'abcdef'[1:5:2] }}|{{ 'abcdef'[5:1:-2] }}|{{ 'abcdef'[-2:] }}|{{ 'abcdef'[:-2] }}|{{ 'abcdef'[10:] }}|{{ 'abcdef'[::-1] }}|{{ [1,2,3,4,5][::-2] }}|{{ [1,2,3,4,5][1:4:2] }}|{{ [1,2,3][5:1:-1] }}",
			"bd|fd|ef|abcd||fedcba|[5, 3, 1]|[2, 4]|[3]"},
		{"{{ 'héllo'|reverse }}|{{ 'a\\u2028b\\u0085c\\r\\nd\\x1ce'.splitlines() }}|{{ 'a\\nb\\n'.splitlines(True) }}",
			"olléh|['a', 'b', 'c', 'd', 'e']|['a\\n', 'b\\n']"},
		{"{{ 'ab'.replace('', '-') }}|{{ 'ab'.replace('', '-', 1) }}|{{ ''.replace('', 'x') }}|{{ 'aXbXc'.replace('X', '--', 1) }}",
			"-a-b-|-ab|x|a--bXc"},
		{"{{ {(1, 'a'): 2}[(1.0, 'a')] }}|{{ {1: 'x'}[True] }}|{{ (1, 2) in {(1, 2): 0} }}|{{ {(1, (2, 'b')): 5}[(True, (2, 'b'))] }}|{{ {'a': 1, 'b': 2}['b'] }}",
			"2|x|True|5|2"},
		{"{{ ['b', 'A', 'a', 'B']|sort }}|{{ ['b', 'A', 'a', 'B']|sort(reverse=true) }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ {'b': 1, 'A': 2, 'a': 3}|dictsort }}|{{ ['x', 'Y', 'y']|unique|list }}|{{ ['b', 'C', 'a']|max }}|{{ ['b', 'C', 'a']|min }}",
			"['A', 'a', 'b', 'B']|['b', 'B', 'A', 'a']|[3, 2, 1]|[('A', 2), ('a', 3), ('b', 1)]|['x', 'Y']|C|a"},
		{"{{ '{}-{}'.format(1, 'x') }}|{{ '%s:%d %%' % ('a', 3) }}|{{ '%r' % ('x',) }}|{{ 'x %s y'|format([1, 'q']) }}",
			"1-x|a:3 %|'x'|x [1, 'q'] y"},
		{"{{ 'Hello World'|title }}|{{ 'hello-world foo(bar'|title }}|{{ 'hELLO'|capitalize }}|{{ 'ab cd'.title() }}",
			"Hello World|Hello-World Foo(Bar|Hello|Ab Cd"},
		{"{{ 'abc'.isalpha() }}{{ 'ab1'.isalnum() }}{{ ' \\t'.isspace() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}{{ '12'.isdigit() }}{{ 'a1'.islower() }}{{ '1'.islower() }}",
			"TrueTrueTrueTrueTrueTrueTrueFalse"},
		{"{{ 'xxhixx'.strip('x') }}|{{ 'éàhiàé'.strip('àé') }}|{{ '  hi '.lstrip() }}|{{ 'hi  '.rstrip() }}", "hi|hi|hi |hi"},
		{"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'x'|center(7) }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}",
			"a\n  b\n\n  c|  a\n  b|   x   |00042|-0042"},
		{"{{ [1, [2, 'a'], {'k': (1,)}] == [1, [2, 'a'], {'k': (1,)}] }}{{ [1, 2] < [1, 3] }}{{ (1, 'b') > (1, 'a') }}{{ [1, 2].index(2) }}{{ [1, 2, 1].count(1) }}",
			"TrueTrueTrue12"},
		{"{{ '<a href=\"x\">&\\'</a>'|escape }}|{{ 'a b_c 1'|wordcount }}|{{ ' 3.5 '|float }}|{{ '1_000'|int }}|{{ 'héllo'|length }}|{{ 'hé'.find('é') }}|{{ 'aaa'.count('') }}",
			"&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;|3|3.5|1000|5|1|4"},
		{"{% for c in 'hé' %}[{{ c }}]{% endfor %}|{{ 'hé'|list }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',', 2) }}|{{ 'a,b,c'.rsplit(',', 1) }}",
			"[h][é]|['h', 'é']|['a', 'b', 'c']|['a', 'b', ',c']|['a,b', 'c']"},
		{"{% for i in range(3) %}{% if loop.first %}{% set y = 5 %}{% endif %}{{ y is defined }}{% endfor %}", "TrueFalseFalse"},
		{"{% for i in range(3) %}{% macro m() %}{{ i }}{% endmacro %}{% set f = m %}{{ f() }}{% endfor %}", "012"},
	}
	for _, c := range cases {
		out, err := render(t, c.src, nil)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if out.Text != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.src, out.Text, c.want)
		}
	}
}
