package jinja

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyStr is Python's str() of a non-string value.
func pyStr(v Value) string {
	switch v.k {
	case KindString:
		return v.s
	case KindUndefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// pyRepr is Python's repr().
func pyRepr(v Value) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

func writeRepr(b *strings.Builder, v Value, depth int) {
	if depth > 100 {
		b.WriteString("...")
		return
	}
	switch v.k {
	case KindUndefined:
		b.WriteString("Undefined")
	case KindNone:
		b.WriteString("None")
	case KindBool:
		if v.n != 0 {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case KindInt:
		b.WriteString(strconv.FormatInt(v.n, 10))
	case KindFloat:
		b.WriteString(pyFloat(v.f))
	case KindString:
		writeStrRepr(b, v.s)
	case KindList, KindTuple:
		open, close := "[", "]"
		if v.k == KindTuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, x := range v.l {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, depth+1)
		}
		if v.k == KindTuple && len(v.l) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	case KindDict:
		writeDictRepr(b, v.d, depth)
	case KindNamespace:
		b.WriteString("<Namespace ")
		writeDictRepr(b, v.o.(*Namespace).attrs, depth)
		b.WriteString(">")
	case KindCallable:
		b.WriteString("<function " + v.o.(*callable).name + ">")
	case KindLoop:
		ls := v.o.(*loopState)
		b.WriteString("<LoopContext " + strconv.Itoa(ls.index0+1) + "/" + strconv.Itoa(len(ls.items)) + ">")
	}
}

func writeDictRepr(b *strings.Builder, d *dict, depth int) {
	b.WriteString("{")
	for i := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, d.keys[i], depth+1)
		b.WriteString(": ")
		writeRepr(b, d.vals[i], depth+1)
	}
	b.WriteString("}")
}

func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			b.WriteRune(r)
		case r < 0x100:
			b.WriteString(`\x` + hex2(int(r)))
		case r < 0x10000:
			b.WriteString(`\u` + hex2(int(r)>>8) + hex2(int(r)&0xff))
		default:
			b.WriteString(`\U` + hex2(int(r)>>24) + hex2(int(r)>>16&0xff) + hex2(int(r)>>8&0xff) + hex2(int(r)&0xff))
		}
	}
	b.WriteByte(q)
}

func hex2(n int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[n>>4&0xf], digits[n&0xf]})
}

// pyFloat is Python's repr(float): the shortest round-tripping digits, in
// positional notation for exponents -4..15 and scientific otherwise.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return mant + "e" + sign + es
}

// --- JSON, as Python's json.dumps(ensure_ascii=False) writes it ---

type jsonOpts struct {
	indent      string
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
	ensureASCII bool
}

func writeJSON(b *strings.Builder, v Value, o *jsonOpts, level, limit int) error {
	if level > 100 {
		return errString("tojson: value nested too deeply")
	}
	if b.Len() > limit {
		return errString("tojson: output too large")
	}
	switch v.k {
	case KindNone:
		b.WriteString("null")
	case KindBool:
		if v.n != 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case KindInt:
		b.WriteString(strconv.FormatInt(v.n, 10))
	case KindFloat:
		switch {
		case math.IsInf(v.f, 1):
			b.WriteString("Infinity")
		case math.IsInf(v.f, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(v.f):
			b.WriteString("NaN")
		default:
			b.WriteString(pyFloat(v.f))
		}
	case KindString:
		writeJSONString(b, v.s, o.ensureASCII)
	case KindList, KindTuple:
		if len(v.l) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[")
		for i, x := range v.l {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			if err := writeJSON(b, x, o, level+1, limit); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteString("]")
	case KindDict, KindNamespace:
		d := v.d
		if v.k == KindNamespace {
			return errString("Object of type Namespace is not JSON serializable")
		}
		if d.len() == 0 {
			b.WriteString("{}")
			return nil
		}
		type kv struct {
			k string
			v Value
		}
		items := make([]kv, 0, d.len())
		for i, k := range d.keys {
			var ks string
			switch k.k {
			case KindString:
				ks = k.s
			case KindNone:
				ks = "null"
			case KindBool:
				ks = "false"
				if k.n != 0 {
					ks = "true"
				}
			case KindInt:
				ks = strconv.FormatInt(k.n, 10)
			case KindFloat:
				ks = pyFloat(k.f)
			default:
				return errString("keys must be str, int, float, bool or None, not " + k.k.String())
			}
			items = append(items, kv{ks, d.vals[i]})
		}
		if o.sortKeys {
			sort.SliceStable(items, func(i, j int) bool { return items[i].k < items[j].k })
		}
		b.WriteString("{")
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			writeJSONString(b, it.k, o.ensureASCII)
			b.WriteString(o.keySep)
			if err := writeJSON(b, it.v, o, level+1, limit); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteString("}")
	default:
		name := v.k.String()
		if v.k == KindUndefined {
			name = "Undefined"
		}
		return errString("Object of type " + name + " is not JSON serializable")
	}
	return nil
}

func (o *jsonOpts) newline(b *strings.Builder, level int) {
	if !o.hasIndent {
		return
	}
	b.WriteByte('\n')
	for i := 0; i < level; i++ {
		b.WriteString(o.indent)
	}
}

func writeJSONString(b *strings.Builder, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				b.WriteString(`\u00` + hex2(int(r)))
			case ascii && r > 0x7e:
				if r >= 0x10000 {
					r -= 0x10000
					hi, lo := 0xd800+(r>>10), 0xdc00+(r&0x3ff)
					b.WriteString(`\u` + hex2(int(hi)>>8) + hex2(int(hi)&0xff) + `\u` + hex2(int(lo)>>8) + hex2(int(lo)&0xff))
				} else {
					b.WriteString(`\u` + hex2(int(r)>>8) + hex2(int(r)&0xff))
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
