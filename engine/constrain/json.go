package constrain

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// value is a parsed JSON value that keeps the order of object members (a
// schema's properties are generated in the order it lists them, as OpenAI's
// structured outputs do; encoding/json's maps would lose it).
type value struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str     string
	num     string // a number's literal text
	boolean bool
	keys    []string
	vals    []*value // object members (with keys) or array elements
	off     int      // byte offset in the document, for messages
}

// member returns the value of an object member, or nil.
func (v *value) member(key string) *value {
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// kindName names a value's JSON type for messages.
func (v *value) kindName() string {
	switch v.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// canonical appends the compact JSON text of v: strings escaped as
// encoding/json does without HTML escaping, numbers as written, members in
// order. It is the one spelling an enum or const value is generated in.
func (v *value) canonical(dst []byte) []byte {
	switch v.kind {
	case 'o':
		dst = append(dst, '{')
		for i, k := range v.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = v.vals[i].canonical(dst)
		}
		return append(dst, '}')
	case 'a':
		dst = append(dst, '[')
		for i, e := range v.vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.canonical(dst)
		}
		return append(dst, ']')
	case 's':
		return appendString(dst, v.str)
	case 'n':
		return append(dst, v.num...)
	case 'b':
		return strconv.AppendBool(dst, v.boolean)
	}
	return append(dst, "null"...)
}

// appendString appends s as a JSON string literal: the escapes JSON
// requires (quote, backslash, control characters) and nothing else.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// parser reads one JSON document with bounded depth.
type parser struct {
	src   []byte
	i     int
	depth int
}

// parseJSON parses a whole JSON document (RFC 8259; strings must be valid
// UTF-8). Nesting deeper than MaxSchemaDepth is an error, so the work is
// linear in the input and the recursion bounded.
func parseJSON(src []byte) (*value, error) {
	p := &parser{src: src}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.src) {
		return nil, p.errf("unexpected %q after the JSON value", p.src[p.i])
	}
	return v, nil
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("not valid JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() (*value, error) {
	p.ws()
	if p.i >= len(p.src) {
		return nil, p.errf("unexpected end of input")
	}
	v := &value{off: p.i}
	switch c := p.src[p.i]; {
	case c == '{' || c == '[':
		p.depth++
		if p.depth > MaxSchemaDepth {
			return nil, p.errf("nested deeper than %d levels", MaxSchemaDepth)
		}
		defer func() { p.depth-- }()
		p.i++
		if c == '{' {
			return v, p.object(v)
		}
		return v, p.array(v)
	case c == '"':
		s, err := p.string()
		v.kind, v.str = 's', s
		return v, err
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.src[p.i:], []byte(lit)) {
				p.i += len(lit)
				v.kind, v.boolean = 'b', lit == "true"
				if lit == "null" {
					v.kind = 'z'
				}
				return v, nil
			}
		}
		return nil, p.errf("unexpected %q", c)
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		if !p.number() {
			return nil, p.errf("malformed number")
		}
		v.kind, v.num = 'n', string(p.src[start:p.i])
		return v, nil
	default:
		return nil, p.errf("unexpected %q", c)
	}
}

func (p *parser) object(v *value) error {
	v.kind = 'o'
	p.ws()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return p.errf("expected a member name")
		}
		k, err := p.string()
		if err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return p.errf("expected ':' after member name")
		}
		p.i++
		e, err := p.value()
		if err != nil {
			return err
		}
		v.keys = append(v.keys, k)
		v.vals = append(v.vals, e)
		p.ws()
		if p.i >= len(p.src) {
			return p.errf("unexpected end of input in an object")
		}
		switch p.src[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.errf("expected ',' or '}' in an object")
		}
	}
}

func (p *parser) array(v *value) error {
	v.kind = 'a'
	p.ws()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		e, err := p.value()
		if err != nil {
			return err
		}
		v.vals = append(v.vals, e)
		p.ws()
		if p.i >= len(p.src) {
			return p.errf("unexpected end of input in an array")
		}
		switch p.src[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.errf("expected ',' or ']' in an array")
		}
	}
}

// string reads a string literal at p.i (which is '"').
func (p *parser) string() (string, error) {
	p.i++
	var b []byte
	for {
		if p.i >= len(p.src) {
			return "", p.errf("unterminated string")
		}
		c := p.src[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.errf("control character in a string")
		case c == '\\':
			if p.i+1 >= len(p.src) {
				return "", p.errf("unterminated escape")
			}
			e := p.src[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errf("malformed \\u escape")
				}
				if r >= 0xD800 && r < 0xDC00 && p.i+1 < len(p.src) && p.src[p.i] == '\\' && p.src[p.i+1] == 'u' {
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return "", p.errf("malformed \\u escape")
					}
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					if r2 < 0xDC00 || r2 > 0xDFFF {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errf("unknown escape \\%c", e)
			}
		default:
			r, n := utf8.DecodeRune(p.src[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errf("invalid UTF-8 in a string")
			}
			b = append(b, p.src[p.i:p.i+n]...)
			p.i += n
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.src) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.src[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

// number reads a JSON number at p.i; false if malformed.
func (p *parser) number() bool {
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.src[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.src) && p.src[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return false
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
