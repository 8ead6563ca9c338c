package jinja

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// textWriter writes a repr or a JSON text of a value: it stops at limit
// bytes (marking itself over), grows its buffer through the evaluator's
// memory account, counts the values it visits and notes whether any
// untrusted text went in. Every value it visits writes at least one byte,
// so a value that shares one list many times over (2^64 leaves in 64
// levels) is cut off at limit visits.
type textWriter struct {
	ev      *evaluator
	line    int
	b       []byte
	limit   int
	over    bool
	err     error // the memory limit, from the evaluator
	tainted bool
	nodes   int
}

func (ev *evaluator) newTextWriter(line, limit int) *textWriter {
	return &textWriter{ev: ev, line: line, limit: limit}
}

func (w *textWriter) room(n int) bool {
	if w.over {
		return false
	}
	need := len(w.b) + n
	if need > w.limit {
		w.over = true
		return false
	}
	if need > cap(w.b) {
		c := min(max(2*cap(w.b), need, 64), w.limit)
		if err := w.ev.alloc(w.line, c); err != nil {
			w.err, w.over = err, true
			return false
		}
		b := make([]byte, len(w.b), c)
		copy(b, w.b)
		w.b = b
	}
	return true
}

func (w *textWriter) str(s string) {
	if w.room(len(s)) {
		w.b = append(w.b, s...)
	}
}

func (w *textWriter) byte(c byte) {
	if w.room(1) {
		w.b = append(w.b, c)
	}
}

func (w *textWriter) rune(r rune) {
	if w.room(utf8.RuneLen(r)) {
		w.b = utf8.AppendRune(w.b, r)
	}
}

// visit counts a value; it reports false once the writer is over.
func (w *textWriter) visit() bool {
	w.nodes++
	return !w.over
}

// text charges the work done and returns the text written: a limit error
// when it did not fit.
func (w *textWriter) text() (string, error) {
	if w.err != nil {
		return "", w.err
	}
	if err := w.ev.charge(w.line, w.nodes); err != nil {
		return "", err
	}
	if err := w.ev.touchRunes(w.line, len(w.b)); err != nil {
		return "", err
	}
	if w.over {
		return "", w.ev.fail(limitErr(w.line, "template built a value of more than the %d bytes allowed", w.limit))
	}
	return unsafe.String(unsafe.SliceData(w.b), len(w.b)), nil
}

// repr is Python's repr() of v, as a string untrusted if any text in v is.
func (ev *evaluator) repr(line int, v Value) (Value, error) {
	w := ev.newTextWriter(line, ev.lim.Output)
	w.repr(v, 0)
	s, err := w.text()
	if err != nil {
		return Value{}, err
	}
	if w.tainted {
		return Untrusted(s), nil
	}
	return Str(s), nil
}

// maxMessage bounds the text of a value quoted in an error message.
const maxMessage = 2000

// message is str(v) (repr(v) with quote) cut to maxMessage bytes, for an
// error message.
func (ev *evaluator) message(line int, v Value, quote bool) string {
	if v.k == KindString && !quote {
		return truncateStr(v.s, maxMessage)
	}
	w := ev.newTextWriter(line, maxMessage)
	w.repr(v, 0)
	s := string(w.b)
	if w.over {
		s += "…"
	}
	return s
}

func (w *textWriter) repr(v Value, depth int) {
	if !w.visit() {
		return
	}
	if depth > maxNest {
		w.str("...")
		return
	}
	switch v.k {
	case KindUndefined:
		w.str("Undefined")
	case KindNone:
		w.str("None")
	case KindBool:
		if v.n != 0 {
			w.str("True")
		} else {
			w.str("False")
		}
	case KindInt:
		w.str(strconv.FormatInt(v.n, 10))
	case KindFloat:
		w.str(pyFloat(v.f))
	case KindString:
		if v.tainted() {
			w.tainted = true
		}
		w.strRepr(v.s)
	case KindList, KindTuple:
		open, close := "[", "]"
		if v.k == KindTuple {
			open, close = "(", ")"
		}
		w.str(open)
		for i, x := range v.l {
			if i > 0 {
				w.str(", ")
			}
			w.repr(x, depth+1)
			if w.over {
				return
			}
		}
		if v.k == KindTuple && len(v.l) == 1 {
			w.str(",")
		}
		w.str(close)
	case KindDict:
		w.dictRepr(v.d, depth)
	case KindNamespace:
		w.str("<Namespace ")
		w.dictRepr(v.o.(*Namespace).attrs, depth)
		w.str(">")
	case KindCallable:
		w.str("<function " + v.o.(*callable).name + ">")
	case KindLoop:
		ls := v.o.(*loopState)
		w.str("<LoopContext " + strconv.Itoa(ls.index0+1) + "/" + strconv.Itoa(len(ls.items)) + ">")
	}
}

func (w *textWriter) dictRepr(d *dict, depth int) {
	w.str("{")
	for i := range d.keys {
		if i > 0 {
			w.str(", ")
		}
		w.repr(d.keys[i], depth+1)
		w.str(": ")
		w.repr(d.vals[i], depth+1)
		if w.over {
			return
		}
	}
	w.str("}")
}

func (w *textWriter) strRepr(s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	w.byte(q)
	for _, r := range s {
		if w.over {
			return
		}
		switch {
		case r == '\\':
			w.str(`\\`)
		case r == rune(q):
			w.byte('\\')
			w.byte(q)
		case r == '\n':
			w.str(`\n`)
		case r == '\r':
			w.str(`\r`)
		case r == '\t':
			w.str(`\t`)
		case r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			w.rune(r)
		case r < 0x100:
			w.str(`\x` + hex2(int(r)))
		case r < 0x10000:
			w.str(`\u` + hex2(int(r)>>8) + hex2(int(r)&0xff))
		default:
			w.str(`\U` + hex2(int(r)>>24) + hex2(int(r)>>16&0xff) + hex2(int(r)>>8&0xff) + hex2(int(r)&0xff))
		}
	}
	w.byte(q)
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

// json writes v as Python's json.dumps does; a value JSON cannot hold is
// an error (the writer's limits are checked by text).
func (w *textWriter) json(v Value, o *jsonOpts, level int) error {
	if !w.visit() {
		return nil
	}
	if level > maxNest {
		return errString("tojson: value nested too deeply")
	}
	switch v.k {
	case KindNone:
		w.str("null")
	case KindBool:
		if v.n != 0 {
			w.str("true")
		} else {
			w.str("false")
		}
	case KindInt:
		w.str(strconv.FormatInt(v.n, 10))
	case KindFloat:
		switch {
		case math.IsInf(v.f, 1):
			w.str("Infinity")
		case math.IsInf(v.f, -1):
			w.str("-Infinity")
		case math.IsNaN(v.f):
			w.str("NaN")
		default:
			w.str(pyFloat(v.f))
		}
	case KindString:
		if v.tainted() {
			w.tainted = true
		}
		w.jsonString(v.s, o.ensureASCII)
	case KindList, KindTuple:
		if len(v.l) == 0 {
			w.str("[]")
			return nil
		}
		w.str("[")
		for i, x := range v.l {
			if i > 0 {
				w.str(o.itemSep)
			}
			o.newline(w, level+1)
			if err := w.json(x, o, level+1); err != nil {
				return err
			}
			if w.over {
				return nil
			}
		}
		o.newline(w, level)
		w.str("]")
	case KindDict, KindNamespace:
		d := v.d
		if v.k == KindNamespace {
			return errString("Object of type Namespace is not JSON serializable")
		}
		if d.len() == 0 {
			w.str("{}")
			return nil
		}
		type kv struct {
			k       string
			tainted bool
			v       Value
		}
		if err := w.ev.alloc(w.line, d.len()*(valueSize+32)); err != nil {
			w.err, w.over = err, true
			return nil
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
			items = append(items, kv{ks, k.tainted(), d.vals[i]})
		}
		if o.sortKeys {
			var err error
			sort.SliceStable(items, func(i, j int) bool {
				if err != nil {
					return false
				}
				if e := w.ev.touch(w.line, min(len(items[i].k), len(items[j].k))); e != nil {
					err = e
				}
				return items[i].k < items[j].k
			})
			if err != nil {
				w.err, w.over = err, true
				return nil
			}
		}
		w.str("{")
		for i, it := range items {
			if i > 0 {
				w.str(o.itemSep)
			}
			o.newline(w, level+1)
			if it.tainted {
				w.tainted = true
			}
			w.jsonString(it.k, o.ensureASCII)
			w.str(o.keySep)
			if err := w.json(it.v, o, level+1); err != nil {
				return err
			}
			if w.over {
				return nil
			}
		}
		o.newline(w, level)
		w.str("}")
	default:
		name := v.k.String()
		if v.k == KindUndefined {
			name = "Undefined"
		}
		return errString("Object of type " + name + " is not JSON serializable")
	}
	return nil
}

func (o *jsonOpts) newline(w *textWriter, level int) {
	if !o.hasIndent {
		return
	}
	w.byte('\n')
	for i := 0; i < level && !w.over; i++ {
		w.str(o.indent)
	}
}

func (w *textWriter) jsonString(s string, ascii bool) {
	w.byte('"')
	for _, r := range s {
		if w.over {
			return
		}
		switch r {
		case '"':
			w.str(`\"`)
		case '\\':
			w.str(`\\`)
		case '\n':
			w.str(`\n`)
		case '\r':
			w.str(`\r`)
		case '\t':
			w.str(`\t`)
		case '\b':
			w.str(`\b`)
		case '\f':
			w.str(`\f`)
		default:
			switch {
			case r < 0x20:
				w.str(`\u00` + hex2(int(r)))
			case ascii && r > 0x7e:
				if r >= 0x10000 {
					r -= 0x10000
					hi, lo := 0xd800+(r>>10), 0xdc00+(r&0x3ff)
					w.str(`\u` + hex2(int(hi)>>8) + hex2(int(hi)&0xff) + `\u` + hex2(int(lo)>>8) + hex2(int(lo)&0xff))
				} else {
					w.str(`\u` + hex2(int(r)>>8) + hex2(int(r)&0xff))
				}
			default:
				w.rune(r)
			}
		}
	}
	w.byte('"')
}
