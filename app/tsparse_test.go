package app

// A reader for the small part of TypeScript that frontend/src/types.ts and
// api.ts use to describe the Go services' JSON: interfaces, type aliases,
// and type expressions (names, string literals, unions, arrays, tuples,
// object literals, generic names). TestFrontendTypesMatchGo compares what
// it reads with the Go structs.

import (
	"fmt"
	"strings"
	"unicode"
)

// tsTok is one token: an identifier, a number, a string literal (quoted, as
// written) or punctuation.
type tsTok struct {
	kind byte // 'i' identifier, 'n' number, 's' string, 'p' punctuation
	text string
	line int
}

// tsLex splits src into tokens, dropping comments and whitespace.
func tsLex(src string) ([]tsTok, error) {
	var toks []tsTok
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: comment not closed", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: string not closed", line)
			}
			toks = append(toks, tsTok{'s', src[i : j+1], line})
			line += strings.Count(src[i:j], "\n")
			i = j + 1
		case c == '_' || c == '$' || unicode.IsLetter(rune(c)):
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '$' || unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j]))) {
				j++
			}
			toks = append(toks, tsTok{'i', src[i:j], line})
			i = j
		case unicode.IsDigit(rune(c)):
			j := i
			for j < len(src) && (unicode.IsDigit(rune(src[j])) || src[j] == '.' || src[j] == '_') {
				j++
			}
			toks = append(toks, tsTok{'n', src[i:j], line})
			i = j
		case strings.HasPrefix(src[i:], "..."):
			toks = append(toks, tsTok{'p', "...", line})
			i += 3
		case strings.HasPrefix(src[i:], "=>"):
			toks = append(toks, tsTok{'p', "=>", line})
			i += 2
		default:
			toks = append(toks, tsTok{'p', string(c), line})
			i++
		}
	}
	return toks, nil
}

// tsType is a type expression. kind is "name" (name, with generic args),
// "lit" (a string literal, name holds it unquoted), "num" (a number
// literal, name holds it), "object" (fields),
// "array" (args[0] is the element), "tuple" (args) or "union" (args).
type tsType struct {
	kind   string
	name   string
	args   []*tsType
	fields []tsField
}

// tsField is a member of an interface or object literal type.
type tsField struct {
	name     string
	optional bool
	typ      *tsType
}

func (t *tsType) String() string {
	switch t.kind {
	case "name":
		if len(t.args) == 0 {
			return t.name
		}
		var a []string
		for _, x := range t.args {
			a = append(a, x.String())
		}
		return t.name + "<" + strings.Join(a, ", ") + ">"
	case "lit":
		return fmt.Sprintf("%q", t.name)
	case "num":
		return t.name
	case "array":
		return t.args[0].String() + "[]"
	case "tuple", "union":
		var a []string
		for _, x := range t.args {
			a = append(a, x.String())
		}
		if t.kind == "union" {
			return strings.Join(a, " | ")
		}
		return "[" + strings.Join(a, ", ") + "]"
	default:
		var f []string
		for _, x := range t.fields {
			q := ""
			if x.optional {
				q = "?"
			}
			f = append(f, x.name+q+": "+x.typ.String())
		}
		return "{ " + strings.Join(f, "; ") + " }"
	}
}

// tsParser reads types from a token stream.
type tsParser struct {
	toks []tsTok
	pos  int
}

func (p *tsParser) peek() tsTok {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return tsTok{kind: 0, text: "", line: -1}
}

func (p *tsParser) next() tsTok {
	t := p.peek()
	p.pos++
	return t
}

func (p *tsParser) is(text string) bool { t := p.peek(); return t.kind != 's' && t.text == text }

func (p *tsParser) expect(text string) error {
	if t := p.next(); t.text != text || t.kind == 's' {
		return fmt.Errorf("line %d: want %q, found %q", t.line, text, t.text)
	}
	return nil
}

// typ reads a type: members of a union, each a primary with [] suffixes.
func (p *tsParser) typ() (*tsType, error) {
	p.skip("|") // a leading bar, as in multi-line unions
	var alts []*tsType
	for {
		t, err := p.postfix()
		if err != nil {
			return nil, err
		}
		alts = append(alts, t)
		if !p.is("|") {
			break
		}
		p.next()
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &tsType{kind: "union", args: alts}, nil
}

func (p *tsParser) skip(text string) {
	if p.is(text) {
		p.next()
	}
}

func (p *tsParser) postfix() (*tsType, error) {
	t, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.is("[") && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "]" {
		p.pos += 2
		t = &tsType{kind: "array", args: []*tsType{t}}
	}
	return t, nil
}

func (p *tsParser) primary() (*tsType, error) {
	t := p.next()
	switch {
	case t.kind == 's':
		return &tsType{kind: "lit", name: t.text[1 : len(t.text)-1]}, nil
	case t.kind == 'n':
		return &tsType{kind: "num", name: t.text}, nil
	case t.kind == 'i':
		out := &tsType{kind: "name", name: t.text}
		if p.is("<") {
			p.next()
			for {
				a, err := p.typ()
				if err != nil {
					return nil, err
				}
				out.args = append(out.args, a)
				if !p.is(",") {
					break
				}
				p.next()
			}
			if err := p.expect(">"); err != nil {
				return nil, err
			}
		}
		return out, nil
	case t.text == "(":
		in, err := p.typ()
		if err != nil {
			return nil, err
		}
		return in, p.expect(")")
	case t.text == "[":
		out := &tsType{kind: "tuple"}
		for !p.is("]") {
			a, err := p.typ()
			if err != nil {
				return nil, err
			}
			out.args = append(out.args, a)
			p.skip(",")
		}
		p.next()
		return out, nil
	case t.text == "{":
		fs, err := p.members()
		if err != nil {
			return nil, err
		}
		return &tsType{kind: "object", fields: fs}, nil
	}
	return nil, fmt.Errorf("line %d: %q does not start a type", t.line, t.text)
}

// members reads "name?: type;" members up to and including the closing brace.
func (p *tsParser) members() ([]tsField, error) {
	var fs []tsField
	for !p.is("}") {
		n := p.next()
		if n.kind != 'i' && n.kind != 's' {
			return nil, fmt.Errorf("line %d: want a member name, found %q", n.line, n.text)
		}
		f := tsField{name: strings.Trim(n.text, `"'`)}
		if p.is("?") {
			p.next()
			f.optional = true
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		t, err := p.typ()
		if err != nil {
			return nil, err
		}
		f.typ = t
		fs = append(fs, f)
		if p.is(";") || p.is(",") {
			p.next()
		}
	}
	p.next()
	return fs, nil
}

// tsDecls are the exported interfaces and type aliases of a file.
type tsDecls struct {
	interfaces map[string][]tsField
	aliases    map[string]*tsType
}

// tsDeclarations reads the exported interfaces and type aliases of src,
// which holds nothing else (types.ts).
func tsDeclarations(src string) (tsDecls, error) {
	d := tsDecls{interfaces: map[string][]tsField{}, aliases: map[string]*tsType{}}
	toks, err := tsLex(src)
	if err != nil {
		return d, err
	}
	p := &tsParser{toks: toks}
	for p.pos < len(p.toks) {
		if err := p.expect("export"); err != nil {
			return d, err
		}
		switch kw := p.next(); kw.text {
		case "interface":
			name := p.next().text
			if err := p.expect("{"); err != nil {
				return d, err
			}
			fs, err := p.members()
			if err != nil {
				return d, fmt.Errorf("interface %s: %w", name, err)
			}
			d.interfaces[name] = fs
		case "type":
			name := p.next().text
			if err := p.expect("="); err != nil {
				return d, err
			}
			t, err := p.typ()
			if err != nil {
				return d, fmt.Errorf("type %s: %w", name, err)
			}
			d.aliases[name] = t
			p.skip(";")
		default:
			return d, fmt.Errorf("line %d: only interfaces and type aliases are understood here, found %q", kw.line, kw.text)
		}
	}
	return d, nil
}
