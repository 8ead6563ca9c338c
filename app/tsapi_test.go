package app

// Reading frontend/src/api.ts: which Go method each entry calls, with which
// argument types and which result type, and which event carries which type.

import (
	"fmt"
	"strconv"
)

// tsCall is one call of a bound Go method in api.ts.
type tsCall struct {
	service, method string
	result          *tsType
	// args are the TypeScript types of the arguments, nil where api.ts does
	// not say (an unannotated parameter, an expression without satisfies).
	args    []*tsType
	argText []string
	line    int
}

// tsEvent is one event subscription in api.ts: b.on(name, (d) => cb(d as T)).
type tsEvent struct {
	name string
	typ  *tsType
	line int
}

// apiCalls reads api.ts. A call is helper<T>("Method", args...) where
// `const helper = <T>(m: string, ...a: unknown[]) => b.call<T>("Service", m, ...a)`,
// or b.call<T>("Service", "Method", args...). An argument's type is its
// arrow function parameter's annotation (or default value), or the type
// after `satisfies`.
func apiCalls(src string) ([]tsCall, []tsEvent, error) {
	toks, err := tsLex(src)
	if err != nil {
		return nil, nil, err
	}
	text := func(i int) string {
		if i >= 0 && i < len(toks) {
			return toks[i].text
		}
		return ""
	}
	isString := func(i int) bool { return i >= 0 && i < len(toks) && toks[i].kind == 's' }
	unquote := func(s string) string {
		u, err := strconv.Unquote(s)
		if err != nil {
			return s
		}
		return u
	}
	helpers := map[string]string{}
	for i := range toks {
		if text(i) == "const" && text(i+2) == "=" && text(i+3) == "<" {
			for j := i; j < len(toks) && text(j) != ";"; j++ {
				if text(j) == "b" && text(j+1) == "." && text(j+2) == "call" && text(j+3) == "<" && text(j+5) == ">" && isString(j+7) {
					helpers[text(i+1)] = unquote(text(j + 7))
				}
			}
		}
	}
	var calls []tsCall
	var events []tsEvent
	for i := 0; i < len(toks); i++ {
		if text(i) == "b" && text(i+1) == "." && text(i+2) == "on" && text(i+3) == "(" && isString(i+4) {
			// b.on("name", (d) => cb(d as T))
			j := i + 5
			for j < len(toks) && text(j) != "as" && text(j) != ";" {
				j++
			}
			if text(j) != "as" {
				return nil, nil, fmt.Errorf("line %d: b.on(%s, ...) does not cast its data with `as`", toks[i].line, text(i+4))
			}
			p := &tsParser{toks: toks, pos: j + 1}
			t, err := p.postfix()
			if err != nil {
				return nil, nil, err
			}
			events = append(events, tsEvent{name: unquote(text(i + 4)), typ: t, line: toks[i].line})
			continue
		}
		var c tsCall
		var p *tsParser
		service, isHelper := helpers[text(i)]
		if isHelper && text(i-1) != "const" && text(i+1) != "<" && text(i+1) != ":" || text(i) == "b" && text(i+1) == "." && text(i+2) == "call" && text(i+3) != "<" {
			return nil, nil, fmt.Errorf("line %d: %s is called without its result type: write %s<Type>(...)", toks[i].line, text(i), text(i))
		}
		switch {
		case isHelper && text(i+1) == "<" && text(i-1) != "const":
			c.service = service
			p = &tsParser{toks: toks, pos: i + 2}
		case text(i) == "b" && text(i+1) == "." && text(i+2) == "call" && text(i+3) == "<" && !(text(i+4) == "T" && text(i+5) == ">"):
			p = &tsParser{toks: toks, pos: i + 4}
		default:
			continue
		}
		c.line = toks[i].line
		res, err := p.typ()
		if err != nil {
			return nil, nil, err
		}
		c.result = res
		if err := p.expect(">"); err != nil {
			return nil, nil, err
		}
		if err := p.expect("("); err != nil {
			return nil, nil, err
		}
		if c.service == "" {
			c.service = unquote(p.next().text)
			if err := p.expect(","); err != nil {
				return nil, nil, err
			}
		}
		m := p.next()
		if m.kind != 's' {
			return nil, nil, fmt.Errorf("line %d: the method name must be a string literal, found %q", m.line, m.text)
		}
		c.method = unquote(m.text)
		params := arrowParams(toks, i)
		// The arguments, split at top-level commas.
		for p.is(",") {
			p.next()
			start, depth := p.pos, 0
			for p.pos < len(toks) && (depth > 0 || (!p.is(",") && !p.is(")"))) {
				switch p.next().text {
				case "(", "{", "[", "<":
					depth++
				case ")", "}", "]", ">":
					depth--
				}
			}
			c.args = append(c.args, argType(toks[start:p.pos], params))
			var s string
			for _, t := range toks[start:p.pos] {
				s += t.text + " "
			}
			c.argText = append(c.argText, s)
		}
		calls = append(calls, c)
		i = p.pos
	}
	return calls, events, nil
}

// arrowParams reads the parameters of the arrow function whose body starts
// at token i: "(a: number, b = "") => ...". Unannotated parameters map to
// nil, or to string or number after a string or number default.
func arrowParams(toks []tsTok, i int) map[string]*tsType {
	out := map[string]*tsType{}
	if i < 2 || toks[i-1].text != "=>" || toks[i-2].text != ")" {
		return out
	}
	depth, open := 0, -1
	for j := i - 2; j >= 0; j-- {
		switch toks[j].text {
		case ")":
			depth++
		case "(":
			depth--
		}
		if depth == 0 {
			open = j
			break
		}
	}
	if open < 0 {
		return out
	}
	p := &tsParser{toks: toks[:i-2], pos: open + 1}
	for p.pos < i-2 {
		name := p.next().text
		p.skip("?")
		var t *tsType
		if p.is(":") {
			p.next()
			var err error
			if t, err = p.typ(); err != nil {
				return out
			}
		}
		if p.is("=") {
			p.next()
			d := p.next()
			switch {
			case t != nil:
			case d.kind == 's':
				t = &tsType{kind: "name", name: "string"}
			case d.kind == 'n':
				t = &tsType{kind: "name", name: "number"}
			}
		}
		out[name] = t
		p.skip(",")
	}
	return out
}

// argType is the type of an argument expression: a parameter's, or the
// one after a top-level `satisfies`; nil if neither.
func argType(arg []tsTok, params map[string]*tsType) *tsType {
	if len(arg) == 1 && arg[0].kind == 'i' {
		return params[arg[0].text]
	}
	depth := 0
	for j, t := range arg {
		switch t.text {
		case "(", "{", "[":
			depth++
		case ")", "}", "]":
			depth--
		case "satisfies":
			if depth == 0 {
				p := &tsParser{toks: arg, pos: j + 1}
				if ty, err := p.typ(); err == nil && p.pos == len(arg) {
					return ty
				}
			}
		}
	}
	return nil
}
