package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type filterFunc func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error)
type testFunc func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (bool, error)

// The builtin tables are read-only after init (filled there because their
// functions reach the evaluator, which reads the tables).
var (
	filters map[string]filterFunc
	tests   map[string]testFunc
	globals map[string]*callable
)

// arg returns positional argument i or keyword name, if given.
func arg(args []Value, kwargs []kwValue, i int, name string) (Value, bool) {
	if i >= 0 && i < len(args) {
		return args[i], true
	}
	for _, kw := range kwargs {
		if kw.name == name {
			return kw.v, true
		}
	}
	return Value{}, false
}

func argOr(args []Value, kwargs []kwValue, i int, name string, def Value) Value {
	if v, ok := arg(args, kwargs, i, name); ok {
		return v
	}
	return def
}

func wantString(line int, what string, v Value) (Value, error) {
	switch v.k {
	case KindString:
		return v, nil
	case KindUndefined:
		return Value{}, undefinedErr(line, v)
	}
	return Value{}, errorf(line, "%s: expected a string, got %s", what, v.k)
}

// --- string helpers that keep taint ---

// stripChars is the set of runes strip removes: chars, or whitespace.
// It costs a look at chars, once (not once per rune of the string).
func (ev *evaluator) stripChars(line int, chars Value) (func(rune) bool, error) {
	if chars.k != KindString {
		return pySpace, nil
	}
	if err := ev.touchRunes(line, len(chars.s)); err != nil {
		return nil, err
	}
	var ascii [utf8.RuneSelf]bool
	var other map[rune]bool
	for _, r := range chars.s {
		if r < utf8.RuneSelf {
			ascii[r] = true
			continue
		}
		if other == nil {
			if err := ev.alloc(line, 4*len(chars.s)); err != nil {
				return nil, err
			}
			other = map[rune]bool{}
		}
		other[r] = true
	}
	return func(r rune) bool {
		if r < utf8.RuneSelf {
			return ascii[r]
		}
		return other[r]
	}, nil
}

func (ev *evaluator) strip(line int, v Value, left, right bool, chars Value) (Value, error) {
	f, err := ev.stripChars(line, chars)
	if err != nil {
		return Value{}, err
	}
	lo, hi := 0, len(v.s)
	if left {
		lo = len(v.s) - len(strings.TrimLeftFunc(v.s, f))
	}
	if right {
		hi = len(strings.TrimRightFunc(v.s, f))
	}
	if hi < lo {
		hi = lo
	}
	if err := ev.touchRunes(line, lo+len(v.s)-hi); err != nil {
		return Value{}, err
	}
	return substr(v, lo, hi), nil
}

// splitValue is Python's str.split(sep, maxsplit) (sep None: runs of
// whitespace, empty parts dropped).
func splitValue(line int, v, sep Value, maxsplit int64) ([]Value, error) {
	var out []Value
	s := v.s
	if sep.k == KindNone || sep.k == KindUndefined {
		i := 0
		for {
			for i < len(s) {
				r, n := utf8.DecodeRuneInString(s[i:])
				if !pySpace(r) {
					break
				}
				i += n
			}
			if i >= len(s) {
				return out, nil
			}
			if maxsplit >= 0 && int64(len(out)) == maxsplit {
				end := len(strings.TrimRightFunc(s, pySpace))
				return append(out, substr(v, i, end)), nil
			}
			j := i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if pySpace(r) {
					break
				}
				j += n
			}
			out = append(out, substr(v, i, j))
			i = j
		}
	}
	if sep.k != KindString {
		return nil, errorf(line, "must be str or None, not %s", sep.k)
	}
	if sep.s == "" {
		return nil, errorf(line, "empty separator")
	}
	start := 0
	for maxsplit < 0 || int64(len(out)) < maxsplit {
		j := strings.Index(s[start:], sep.s)
		if j < 0 {
			break
		}
		out = append(out, substr(v, start, start+j))
		start += j + len(sep.s)
	}
	return append(out, substr(v, start, len(s))), nil
}

func rsplitValue(line int, v, sep Value, maxsplit int64) ([]Value, error) {
	if maxsplit < 0 {
		return splitValue(line, v, sep, -1)
	}
	if sep.k != KindString {
		// Whitespace, from the right.
		var out []Value
		end := len(v.s)
		for {
			end = len(strings.TrimRightFunc(v.s[:end], pySpace))
			if end == 0 {
				break
			}
			if int64(len(out)) == maxsplit {
				out = append(out, substr(v, len(v.s[:end])-len(strings.TrimLeftFunc(v.s[:end], pySpace)), end))
				break
			}
			j := strings.LastIndexFunc(v.s[:end], pySpace)
			start := 0
			if j >= 0 {
				_, n := utf8.DecodeRuneInString(v.s[j:])
				start = j + n
			}
			out = append(out, substr(v, start, end))
			end = start
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out, nil
	}
	if sep.s == "" {
		return nil, errorf(line, "empty separator")
	}
	var out []Value
	end := len(v.s)
	for int64(len(out)) < maxsplit {
		j := strings.LastIndex(v.s[:end], sep.s)
		if j < 0 {
			break
		}
		out = append(out, substr(v, j+len(sep.s), end))
		end = j
	}
	out = append(out, substr(v, 0, end))
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// replaceValue is str.replace; a replacement of untrusted text is untrusted.
func (ev *evaluator) replaceValue(line int, v, old, repl Value, count int64) (Value, error) {
	if old.s == "" {
		if count == 0 {
			return v, nil
		}
		// Python inserts repl before every character and at the end.
		n, err := ev.runeCount(line, v.s)
		if err != nil {
			return Value{}, err
		}
		times := int64(n) + 1
		if count >= 0 && count < times {
			times = count
		}
		if err := ev.checkSize64(line, int64(len(v.s))+mulSat(times, int64(len(repl.s)))); err != nil {
			return Value{}, err
		}
		w := &tstr{}
		k := int64(0)
		for i := 0; ; {
			if k < times {
				if err := ev.put(line, w, repl.s, repl.t); err != nil {
					return Value{}, err
				}
				k++
			}
			if i >= len(v.s) {
				break
			}
			if k >= times {
				rest := substr(v, i, len(v.s))
				if err := ev.put(line, w, rest.s, rest.t); err != nil {
					return Value{}, err
				}
				break
			}
			_, size := utf8.DecodeRuneInString(v.s[i:])
			c := substr(v, i, i+size)
			if err := ev.put(line, w, c.s, c.t); err != nil {
				return Value{}, err
			}
			i += size
		}
		return w.value(), nil
	}
	w := &tstr{}
	start := 0
	for n := int64(0); count < 0 || n < count; n++ {
		j := strings.Index(v.s[start:], old.s)
		scanned := len(v.s) - start
		if j >= 0 {
			scanned = j + len(old.s)
		}
		if err := ev.touch(line, scanned); err != nil {
			return Value{}, err
		}
		if j < 0 {
			break
		}
		j += start
		pre := substr(v, start, j)
		if err := ev.put(line, w, pre.s, pre.t); err != nil {
			return Value{}, err
		}
		rt := repl.t
		if taintedAt(v.t, j, j+len(old.s)) {
			rt = []Span{{0, len(repl.s)}}
		}
		if err := ev.put(line, w, repl.s, rt); err != nil {
			return Value{}, err
		}
		start = j + len(old.s)
	}
	rest := substr(v, start, len(v.s))
	if err := ev.put(line, w, rest.s, rest.t); err != nil {
		return Value{}, err
	}
	return w.value(), nil
}

// mapText is f(v) (a case mapping), untrusted if v is: it costs a read of
// v rune by rune and the bytes it makes.
func (ev *evaluator) mapText(line int, v Value, f func(string) string) (Value, error) {
	if err := ev.touchRunes(line, len(v.s)); err != nil {
		return Value{}, err
	}
	if err := ev.alloc(line, len(v.s)+spanSize); err != nil {
		return Value{}, err
	}
	out := f(v.s)
	if len(out) > len(v.s) {
		if err := ev.built(line, len(out)-len(v.s), 0); err != nil {
			return Value{}, err
		}
	}
	return derived(out, v), nil
}

// lower is strings.ToLower for sort keys and the like, charged.
func (ev *evaluator) lower(line int, s string) (string, error) {
	v, err := ev.mapText(line, Str(s), strings.ToLower)
	return v.s, err
}

func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	var b strings.Builder
	b.Grow(len(s) + utf8.UTFMax)
	b.WriteRune(unicode.ToTitle(r))
	b.WriteString(strings.ToLower(s[n:]))
	return b.String()
}

// jinjaTitle is Jinja's title filter: each word (split at whitespace and
// -({[<) gets an upper-case first letter and lower-case rest.
func jinjaTitle(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	start := true
	for _, r := range s {
		if pySpace(r) || strings.ContainsRune("-({[<", r) {
			b.WriteRune(r)
			start = true
			continue
		}
		if start {
			b.WriteRune(unicode.ToUpper(r))
			start = false
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// pyTitle is Python's str.title().
func pyTitle(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
	}
	return b.String()
}

func joinValues(ev *evaluator, line int, items []Value, sep Value) (Value, error) {
	w := &tstr{}
	for i, it := range items {
		if err := ev.step(line); err != nil {
			return Value{}, err
		}
		if i > 0 {
			if err := ev.put(line, w, sep.s, sep.t); err != nil {
				return Value{}, err
			}
		}
		s, err := ev.str(line, it)
		if err != nil {
			return Value{}, err
		}
		if err := ev.put(line, w, s.s, s.t); err != nil {
			return Value{}, err
		}
	}
	if w.len() == 0 {
		return Str(""), nil
	}
	return w.value(), nil
}

// pairs is d's (key, value) tuples, as items() lists them.
func (ev *evaluator) pairs(line int, d *dict) ([]Value, error) {
	if err := ev.items(line, 3*d.len()); err != nil {
		return nil, err
	}
	items := make([]Value, d.len())
	for i := range d.keys {
		items[i] = Value{k: KindTuple, l: []Value{d.keys[i], d.vals[i]}}
	}
	return items, nil
}

// copyList is a new list of items.
func (ev *evaluator) copyList(line int, items []Value) (Value, error) {
	if err := ev.items(line, len(items)); err != nil {
		return Value{}, err
	}
	return List(append([]Value(nil), items...)...), nil
}

func toInt(v Value) (int64, bool) {
	switch v.k {
	case KindInt, KindBool:
		return v.n, true
	case KindFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) || math.Abs(v.f) >= 1<<63 {
			return 0, false
		}
		return int64(v.f), true
	}
	return 0, false
}

func (ev *evaluator) length(line int, v Value) (int, error) {
	switch v.k {
	case KindString:
		return ev.runeCount(line, v.s)
	case KindList, KindTuple:
		return len(v.l), nil
	case KindDict:
		return v.d.len(), nil
	case KindUndefined:
		return 0, nil
	case KindNamespace:
		return v.o.(*Namespace).attrs.len(), nil
	}
	return 0, errorf(line, "object of type '%s' has no len()", v.k)
}

// attrPath resolves "a.b.0" on v as Jinja's attribute= arguments do.
func (ev *evaluator) attrPath(line int, v Value, path string) (Value, error) {
	for rest, more := path, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ".")
		if err := ev.step(line); err != nil {
			return Value{}, err
		}
		if err := ev.touch(line, len(part)); err != nil {
			return Value{}, err
		}
		var err error
		if n, perr := strconv.Atoi(part); perr == nil {
			v, err = ev.getitem(line, v, Int(int64(n)))
		} else {
			v, err = ev.getitem(line, v, Str(part))
		}
		if err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

// selectItems implements select/reject/selectattr/rejectattr.
func (ev *evaluator) selectItems(line int, v Value, args []Value, kwargs []kwValue, byAttr, keep bool) (Value, error) {
	items, err := ev.iterate(line, v)
	if err != nil {
		return Value{}, err
	}
	var attr string
	if byAttr {
		if len(args) == 0 {
			return Value{}, errorf(line, "missing attribute name")
		}
		a, err := wantString(line, "attribute", args[0])
		if err != nil {
			return Value{}, err
		}
		attr, args = a.s, args[1:]
	}
	var test testFunc
	if len(args) > 0 {
		name, err := wantString(line, "test name", args[0])
		if err != nil {
			return Value{}, err
		}
		t, ok := tests[name.s]
		if !ok {
			return Value{}, errorf(line, "no test named '%s'", name.s)
		}
		test, args = t, args[1:]
	}
	var out []Value
	for _, it := range items {
		if err := ev.step(line); err != nil {
			return Value{}, err
		}
		x := it
		if byAttr {
			if x, err = ev.attrPath(line, it, attr); err != nil {
				return Value{}, err
			}
		}
		ok := truth(x)
		if test != nil {
			if ok, err = test(ev, line, x, args, kwargs); err != nil {
				return Value{}, err
			}
		}
		if ok == keep {
			if err := ev.alloc(line, valueSize); err != nil {
				return Value{}, err
			}
			out = append(out, it)
		}
	}
	return List(out...), nil
}

func init() {
	filters = map[string]filterFunc{
		"abs": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			switch v.k {
			case KindInt, KindBool:
				if v.n == math.MinInt64 {
					return Value{}, errorf(line, "integer overflow")
				}
				if v.n < 0 {
					return Int(-v.n), nil
				}
				return Int(v.n), nil
			case KindFloat:
				return Float(math.Abs(v.f)), nil
			}
			return Value{}, errorf(line, "bad operand type for abs(): '%s'", v.k)
		},
		"attr": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			name, err := wantString(line, "attr", argOr(args, kwargs, 0, "name", Undefined("name")))
			if err != nil {
				return Value{}, err
			}
			return ev.getattr(line, v, name.s)
		},
		"capitalize": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.mapText(line, s, pyCapitalize)
		},
		"center": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			width, _ := toInt(argOr(args, kwargs, 0, "width", Int(80)))
			runes, err := ev.runeCount(line, s.s)
			if err != nil {
				return Value{}, err
			}
			n := int64(runes)
			if width <= n {
				return s, nil
			}
			pad := width - n
			if err := ev.checkSize64(line, int64(len(s.s))+pad); err != nil {
				return Value{}, err
			}
			if err := ev.built(line, len(s.s)+int(pad), 1); err != nil {
				return Value{}, err
			}
			left := pad / 2
			if pad%2 == 1 && n%2 == 1 {
				left++
			}
			return derived(strings.Repeat(" ", int(left))+s.s+strings.Repeat(" ", int(pad-left)), s), nil
		},
		"default": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			def := argOr(args, kwargs, 0, "default_value", Str(""))
			boolean := truth(argOr(args, kwargs, 1, "boolean", Bool(false)))
			if v.k == KindUndefined || (boolean && !truth(v)) {
				return def, nil
			}
			return v, nil
		},
		"dictsort": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			if v.k != KindDict {
				return Value{}, errorf(line, "dictsort: expected a dict, got %s", v.k)
			}
			cs := truth(argOr(args, kwargs, 0, "case_sensitive", Bool(false)))
			by := argOr(args, kwargs, 1, "by", Str("key"))
			rev := truth(argOr(args, kwargs, 2, "reverse", Bool(false)))
			pos := 0
			if by.k == KindString && by.s == "value" {
				pos = 1
			} else if by.k != KindString || by.s != "key" {
				return Value{}, errorf(line, "You can only sort by either \"key\" or \"value\"")
			}
			items, err := ev.pairs(line, v.d)
			if err != nil {
				return Value{}, err
			}
			err = ev.sortValues(line, items, func(x Value) (Value, error) {
				k := x.l[pos]
				if !cs && k.k == KindString {
					s, err := ev.lower(line, k.s)
					return Str(s), err
				}
				return k, nil
			}, rev)
			if err != nil {
				return Value{}, typeErrorf(line, err, func(m string) string { return "dictsort: " + m })
			}
			return List(items...), nil
		},
		"escape": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			// Each of &<>"' grows by up to 4 bytes: size the result first.
			if err := ev.touch(line, len(s.s)); err != nil {
				return Value{}, err
			}
			grow := 4*strings.Count(s.s, "&") + 3*(strings.Count(s.s, "<")+strings.Count(s.s, ">")) + 4*(strings.Count(s.s, `"`)+strings.Count(s.s, "'"))
			if err := ev.built(line, len(s.s)+grow, 1); err != nil {
				return Value{}, err
			}
			r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
			return derived(r.Replace(s.s), s), nil
		},
		"first": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			if len(items) == 0 {
				return Undefined("first"), nil
			}
			return items[0], nil
		},
		"last": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			if len(items) == 0 {
				return Undefined("last"), nil
			}
			return items[len(items)-1], nil
		},
		"float": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			def := argOr(args, kwargs, 0, "default", Float(0))
			switch v.k {
			case KindFloat:
				return v, nil
			case KindInt, KindBool:
				return Float(float64(v.n)), nil
			case KindString:
				if err := ev.touch(line, len(v.s)); err != nil {
					return Value{}, err
				}
				if f, err := strconv.ParseFloat(strings.TrimFunc(v.s, pySpace), 64); err == nil {
					return Float(f), nil
				}
			}
			return def, nil
		},
		"format": func(ev *evaluator, line int, v Value, args []Value, _ []kwValue) (Value, error) {
			s, err := wantString(line, "format", v)
			if err != nil {
				return Value{}, err
			}
			if len(args) == 1 {
				return ev.percentFormat(line, s, args[0])
			}
			return ev.percentFormat(line, s, Value{k: KindTuple, l: args})
		},
		"indent": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			width := argOr(args, kwargs, 0, "width", Int(4))
			first := truth(argOr(args, kwargs, 1, "first", Bool(false)))
			blank := truth(argOr(args, kwargs, 2, "blank", Bool(false)))
			ind := ""
			if width.k == KindString {
				ind = width.s
			} else if n, ok := toInt(width); ok && n > 0 {
				if err := ev.checkSize64(line, n); err != nil {
					return Value{}, err
				}
				if err := ev.built(line, int(n), 0); err != nil {
					return Value{}, err
				}
				ind = strings.Repeat(" ", int(n))
			}
			// Line by line, without a list of the lines.
			w := &tstr{}
			rest, i := s, 0
			for more := true; more; i++ {
				if err := ev.step(line); err != nil {
					return Value{}, err
				}
				l := rest
				if j := strings.IndexByte(rest.s, '\n'); j >= 0 {
					l, rest = substr(rest, 0, j), substr(rest, j+1, len(rest.s))
				} else {
					more = false
				}
				if i > 0 {
					if err := ev.put(line, w, "\n", nil); err != nil {
						return Value{}, err
					}
				}
				if (i > 0 || first) && (blank || strings.TrimFunc(l.s, pySpace) != "") {
					if err := ev.put(line, w, ind, nil); err != nil {
						return Value{}, err
					}
				}
				if err := ev.put(line, w, l.s, l.t); err != nil {
					return Value{}, err
				}
			}
			return w.value(), nil
		},
		"int": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			def := argOr(args, kwargs, 0, "default", Int(0))
			base, _ := toInt(argOr(args, kwargs, 1, "base", Int(10)))
			switch v.k {
			case KindInt, KindBool:
				return Int(v.n), nil
			case KindFloat:
				if n, ok := toInt(v); ok {
					return Int(n), nil
				}
			case KindString:
				if err := ev.built(line, len(v.s), 0); err != nil {
					return Value{}, err
				}
				t := strings.ReplaceAll(strings.TrimFunc(v.s, pySpace), "_", "")
				if base < 2 || base > 36 {
					base = 10
				}
				if n, err := strconv.ParseInt(t, int(base), 64); err == nil {
					return Int(n), nil
				}
				if f, err := strconv.ParseFloat(t, 64); err == nil && base == 10 {
					if n, ok := toInt(Float(f)); ok {
						return Int(n), nil
					}
				}
			}
			return def, nil
		},
		"items": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			switch v.k {
			case KindUndefined:
				return List(), nil
			case KindDict:
				items, err := ev.pairs(line, v.d)
				return List(items...), err
			}
			return Value{}, errorf(line, "items: can only get item pairs from a mapping, not %s", v.k)
		},
		"join": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			sep, err := ev.str(line, argOr(args, kwargs, 0, "d", Str("")))
			if err != nil {
				return Value{}, err
			}
			if a, ok := arg(args, kwargs, 1, "attribute"); ok && a.k != KindNone {
				path, err := wantString(line, "attribute", a)
				if err != nil {
					return Value{}, err
				}
				if err := ev.items(line, len(items)); err != nil {
					return Value{}, err
				}
				mapped := make([]Value, len(items))
				for i, it := range items {
					if mapped[i], err = ev.attrPath(line, it, path.s); err != nil {
						return Value{}, err
					}
				}
				items = mapped
			}
			return joinValues(ev, line, items, sep)
		},
		"length": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			n, err := ev.length(line, v)
			return Int(int64(n)), err
		},
		"list": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.copyList(line, items)
		},
		"lower": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.mapText(line, s, strings.ToLower)
		},
		"upper": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.mapText(line, s, strings.ToUpper)
		},
		"map": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			if err := ev.items(line, len(items)); err != nil {
				return Value{}, err
			}
			out := make([]Value, len(items))
			if a, ok := arg(nil, kwargs, -1, "attribute"); ok {
				path, err := wantString(line, "attribute", a)
				if err != nil {
					return Value{}, err
				}
				def, hasDef := arg(nil, kwargs, -1, "default")
				for i, it := range items {
					if err := ev.step(line); err != nil {
						return Value{}, err
					}
					if out[i], err = ev.attrPath(line, it, path.s); err != nil {
						return Value{}, err
					}
					if hasDef && out[i].k == KindUndefined {
						out[i] = def
					}
				}
				return List(out...), nil
			}
			if len(args) == 0 {
				return Value{}, errorf(line, "map: needs a filter name or attribute=")
			}
			name, err := wantString(line, "filter name", args[0])
			if err != nil {
				return Value{}, err
			}
			f, ok := filters[name.s]
			if !ok {
				return Value{}, errorf(line, "no filter named '%s'", name.s)
			}
			for i, it := range items {
				if err := ev.step(line); err != nil {
					return Value{}, err
				}
				if out[i], err = f(ev, line, it, args[1:], kwargs); err != nil {
					return Value{}, err
				}
			}
			return List(out...), nil
		},
		"max": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.minmax(line, v, args, kwargs, 1)
		},
		"min": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.minmax(line, v, args, kwargs, -1)
		},
		"reject": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.selectItems(line, v, args, kwargs, false, false)
		},
		"rejectattr": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.selectItems(line, v, args, kwargs, true, false)
		},
		"select": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.selectItems(line, v, args, kwargs, false, true)
		},
		"selectattr": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			return ev.selectItems(line, v, args, kwargs, true, true)
		},
		"replace": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			old, err := ev.str(line, argOr(args, kwargs, 0, "old", Undefined("old")))
			if err != nil {
				return Value{}, err
			}
			repl, err := ev.str(line, argOr(args, kwargs, 1, "new", Undefined("new")))
			if err != nil {
				return Value{}, err
			}
			count := int64(-1)
			if c, ok := arg(args, kwargs, 2, "count"); ok && c.k != KindNone {
				count, _ = toInt(c)
			}
			return ev.replaceValue(line, s, old, repl, count)
		},
		"reverse": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			if v.k == KindString {
				step := int64(-1)
				return ev.sliceString(line, v, nil, nil, step)
			}
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			if err := ev.items(line, len(items)); err != nil {
				return Value{}, err
			}
			out := make([]Value, len(items))
			for i, it := range items {
				out[len(items)-1-i] = it
			}
			return List(out...), nil
		},
		"round": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			if !isNumber(v) {
				return Value{}, errorf(line, "round: expected a number, got %s", v.k)
			}
			prec, _ := toInt(argOr(args, kwargs, 0, "precision", Int(0)))
			method := argOr(args, kwargs, 1, "method", Str("common"))
			if prec > 300 {
				prec = 300
			}
			if prec < -300 {
				prec = -300
			}
			m := math.Pow(10, float64(prec))
			x := asFloat(v) * m
			switch method.s {
			case "common":
				x = math.Round(x)
			case "ceil":
				x = math.Ceil(x)
			case "floor":
				x = math.Floor(x)
			default:
				return Value{}, errorf(line, "method must be common, ceil or floor")
			}
			return Float(x / m), nil
		},
		"safe": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			return v, nil
		},
		"sort": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			if err := ev.items(line, len(items)); err != nil {
				return Value{}, err
			}
			out := append([]Value(nil), items...)
			rev := truth(argOr(args, kwargs, 0, "reverse", Bool(false)))
			cs := truth(argOr(args, kwargs, 1, "case_sensitive", Bool(false)))
			attr := argOr(args, kwargs, 2, "attribute", None())
			key := func(x Value) (Value, error) {
				if attr.k == KindString {
					var err error
					if x, err = ev.attrPath(line, x, attr.s); err != nil {
						return Value{}, err
					}
				}
				if !cs && x.k == KindString {
					s, err := ev.lower(line, x.s)
					return Str(s), err
				}
				return x, nil
			}
			if err := ev.sortValues(line, out, key, rev); err != nil {
				return Value{}, typeErrorf(line, err, func(m string) string { return "sort: " + m })
			}
			return List(out...), nil
		},
		"string": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			return ev.str(line, v)
		},
		"sum": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			total := argOr(args, kwargs, 1, "start", Int(0))
			attr, hasAttr := arg(args, kwargs, 0, "attribute")
			for _, it := range items {
				if err := ev.step(line); err != nil {
					return Value{}, err
				}
				if hasAttr && attr.k == KindString {
					if it, err = ev.attrPath(line, it, attr.s); err != nil {
						return Value{}, err
					}
				}
				if total, err = ev.binop(line, "+", total, it); err != nil {
					return Value{}, err
				}
			}
			return total, nil
		},
		"title": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.mapText(line, s, jinjaTitle)
		},
		"tojson": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			o := &jsonOpts{itemSep: ", ", keySep: ": "}
			if ind, ok := arg(args, kwargs, -1, "indent"); ok && ind.k != KindNone {
				o.hasIndent = true
				switch ind.k {
				case KindString:
					o.indent = ind.s
				case KindInt:
					if ind.n > 0 {
						o.indent = strings.Repeat(" ", int(min(ind.n, 64)))
					}
				default:
					return Value{}, errorf(line, "tojson: indent must be an int or a string")
				}
				o.itemSep = ","
			}
			if len(args) > 0 && !o.hasIndent {
				// tojson(4): Jinja's own positional indent.
				if n, ok := toInt(args[0]); ok && args[0].k == KindInt {
					o.hasIndent, o.itemSep = true, ","
					o.indent = strings.Repeat(" ", int(max(min(n, 64), 0)))
				}
			}
			if sep, ok := arg(nil, kwargs, -1, "separators"); ok && sep.k != KindNone {
				if (sep.k != KindTuple && sep.k != KindList) || len(sep.l) != 2 || sep.l[0].k != KindString || sep.l[1].k != KindString {
					return Value{}, errorf(line, "tojson: separators must be a pair of strings")
				}
				o.itemSep, o.keySep = sep.l[0].s, sep.l[1].s
			}
			o.sortKeys = truth(argOr(nil, kwargs, -1, "sort_keys", Bool(false)))
			o.ensureASCII = truth(argOr(nil, kwargs, -1, "ensure_ascii", Bool(false)))
			w := ev.newTextWriter(line, ev.lim.Output)
			if err := w.json(v, o, 0); err != nil {
				return Value{}, errorf(line, "tojson: %v", err)
			}
			s, err := w.text()
			if err != nil {
				return Value{}, err
			}
			if w.tainted {
				return Untrusted(s), nil
			}
			return Str(s), nil
		},
		"trim": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return ev.strip(line, s, true, true, argOr(args, kwargs, 0, "chars", None()))
		},
		"unique": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			cs := truth(argOr(args, kwargs, 0, "case_sensitive", Bool(false)))
			attr := argOr(args, kwargs, 1, "attribute", None())
			seen := newDict(len(items))
			var out []Value
			for _, it := range items {
				k := it
				if attr.k == KindString {
					if k, err = ev.attrPath(line, it, attr.s); err != nil {
						return Value{}, err
					}
				}
				if !cs && k.k == KindString {
					s, err := ev.lower(line, k.s)
					if err != nil {
						return Value{}, err
					}
					k = Str(s)
				}
				_, dup, err := seen.get(ev, line, k)
				if err != nil {
					return Value{}, err
				}
				if dup {
					continue
				}
				if err := seen.set(ev, line, k, None()); err != nil {
					return Value{}, err
				}
				if err := ev.alloc(line, valueSize); err != nil {
					return Value{}, err
				}
				out = append(out, it)
			}
			return List(out...), nil
		},
		"wordcount": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			if err := ev.touchRunes(line, len(s.s)); err != nil {
				return Value{}, err
			}
			n := 0
			inWord := false
			for _, r := range s.s {
				w := r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
				if w && !inWord {
					n++
				}
				inWord = w
			}
			return Int(int64(n)), nil
		},
	}
	filters["d"] = filters["default"]
	filters["e"] = filters["escape"]
	filters["forceescape"] = filters["escape"]
	filters["count"] = filters["length"]

	tests = map[string]testFunc{
		"defined": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k != KindUndefined, nil
		},
		"undefined": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindUndefined, nil
		},
		"none":    func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return v.k == KindNone, nil },
		"boolean": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return v.k == KindBool, nil },
		"true": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindBool && v.n != 0, nil
		},
		"false": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindBool && v.n == 0, nil
		},
		"integer": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return v.k == KindInt, nil },
		"float":   func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return v.k == KindFloat, nil },
		"number":  func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return isNumber(v), nil },
		"string": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindString, nil
		},
		"mapping": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return v.k == KindDict, nil },
		"iterable": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindString || v.k == KindList || v.k == KindTuple || v.k == KindDict || v.k == KindUndefined, nil
		},
		"sequence": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindString || v.k == KindList || v.k == KindTuple || v.k == KindDict, nil
		},
		"callable": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindCallable, nil
		},
		"escaped": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) { return false, nil },
		"sameas": func(ev *evaluator, line int, v Value, args []Value, _ []kwValue) (bool, error) {
			if len(args) != 1 {
				return false, errorf(line, "sameas needs one argument")
			}
			o := args[0]
			switch {
			case v.k != o.k:
				return false, nil
			case v.k == KindNone || v.k == KindUndefined:
				return true, nil
			case v.k == KindBool || v.k == KindInt:
				return v.n == o.n, nil
			}
			eq := ev.equal(line, v, o)
			return eq && (v.k != KindList && v.k != KindDict || v.o == o.o && (v.d == o.d)), ev.stopped()
		},
		"lower": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (bool, error) {
			if v.k != KindString {
				return false, nil
			}
			l, err := ev.mapText(line, v, strings.ToLower)
			return l.s == v.s, err
		},
		"upper": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (bool, error) {
			if v.k != KindString {
				return false, nil
			}
			u, err := ev.mapText(line, v, strings.ToUpper)
			return u.s == v.s, err
		},
		"odd": func(_ *evaluator, line int, v Value, _ []Value, _ []kwValue) (bool, error) {
			n, ok := toInt(v)
			if !ok {
				return false, errorf(line, "odd: expected an integer, got %s", v.k)
			}
			return n%2 != 0, nil
		},
		"even": func(_ *evaluator, line int, v Value, _ []Value, _ []kwValue) (bool, error) {
			n, ok := toInt(v)
			if !ok {
				return false, errorf(line, "even: expected an integer, got %s", v.k)
			}
			return n%2 == 0, nil
		},
		"divisibleby": func(_ *evaluator, line int, v Value, args []Value, _ []kwValue) (bool, error) {
			if len(args) != 1 {
				return false, errorf(line, "divisibleby needs one argument")
			}
			a, ok1 := toInt(v)
			b, ok2 := toInt(args[0])
			if !ok1 || !ok2 || b == 0 {
				return false, errorf(line, "divisibleby: integers required, and a divisor other than 0")
			}
			return floorMod(a, b) == 0, nil
		},
		"in": func(ev *evaluator, line int, v Value, args []Value, _ []kwValue) (bool, error) {
			if len(args) != 1 {
				return false, errorf(line, "in needs one argument")
			}
			return ev.contains(line, args[0], v)
		},
		"filter": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			_, ok := filters[v.s]
			return v.k == KindString && ok, nil
		},
		"test": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			_, ok := tests[v.s]
			return v.k == KindString && ok, nil
		},
	}
	cmp := func(op string) testFunc {
		return func(ev *evaluator, line int, v Value, args []Value, _ []kwValue) (bool, error) {
			if len(args) != 1 {
				return false, errorf(line, "comparison test needs one argument")
			}
			return ev.compareOp(line, op, v, args[0])
		}
	}
	for names, op := range map[string]string{"eq equalto ==": "==", "ne !=": "!=", "lt lessthan <": "<", "le <=": "<=", "gt greaterthan >": ">", "ge >=": ">="} {
		for _, n := range strings.Fields(names) {
			tests[n] = cmp(op)
		}
	}

	globals = map[string]*callable{
		"range": {name: "range", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			var ns [3]int64
			ns[2] = 1
			for i, a := range args {
				n, ok := toInt(a)
				if !ok || a.k == KindFloat || i > 2 {
					return Value{}, errorf(line, "range: expected up to 3 integers")
				}
				ns[i] = n
			}
			start, stop, step := int64(0), ns[0], ns[2]
			switch len(args) {
			case 0:
				return Value{}, errorf(line, "range expected at least 1 argument")
			case 2, 3:
				start, stop = ns[0], ns[1]
			}
			if step == 0 {
				return Value{}, errorf(line, "range() arg 3 must not be zero")
			}
			n := int64(0)
			if step > 0 && stop > start {
				n = (stop - start + step - 1) / step
			} else if step < 0 && start > stop {
				n = (start - stop - step - 1) / -step
			}
			if n < 0 || n > 1<<20 {
				return Value{}, ev.fail(limitErr(line, "range of %d items is too big", n))
			}
			if err := ev.items(line, int(n)); err != nil {
				return Value{}, err
			}
			out := make([]Value, n)
			for i := range out {
				out[i] = Int(start + int64(i)*step)
			}
			return List(out...), nil
		}},
		"dict": {name: "dict", fn: func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			d := newDict(len(kwargs))
			if len(args) > 1 {
				return Value{}, errorf(line, "dict expected at most 1 argument")
			}
			if len(args) == 1 {
				switch a := args[0]; a.k {
				case KindDict:
					for i := range a.d.keys {
						if err := d.set(ev, line, a.d.keys[i], a.d.vals[i]); err != nil {
							return Value{}, err
						}
					}
				case KindList, KindTuple:
					for _, p := range a.l {
						if (p.k != KindList && p.k != KindTuple) || len(p.l) != 2 {
							return Value{}, errorf(line, "dict: sequence elements must be pairs")
						}
						if err := d.set(ev, line, p.l[0], p.l[1]); err != nil {
							return Value{}, err
						}
					}
				default:
					return Value{}, errorf(line, "dict: cannot convert %s", a.k)
				}
			}
			for _, kw := range kwargs {
				if err := d.set(ev, line, Str(kw.name), kw.v); err != nil {
					return Value{}, err
				}
			}
			return Value{k: KindDict, d: d}, nil
		}},
		"namespace": {name: "namespace", fn: func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			ns := &Namespace{attrs: newDict(len(kwargs))}
			for _, a := range args {
				if a.k != KindDict {
					return Value{}, errorf(line, "namespace: positional arguments must be dicts")
				}
				for i := range a.d.keys {
					if a.d.keys[i].k == KindString && strings.HasPrefix(a.d.keys[i].s, "_") {
						return Value{}, errorf(line, "cannot store underscore-prefixed attribute %q on a namespace", truncateStr(a.d.keys[i].s, 100))
					}
					if err := ns.attrs.set(ev, line, a.d.keys[i], a.d.vals[i]); err != nil {
						return Value{}, err
					}
				}
			}
			for _, kw := range kwargs {
				if strings.HasPrefix(kw.name, "_") {
					return Value{}, errorf(line, "cannot store underscore-prefixed attribute %q on a namespace", kw.name)
				}
				if err := ns.attrs.set(ev, line, Str(kw.name), kw.v); err != nil {
					return Value{}, err
				}
			}
			return Value{k: KindNamespace, o: ns}, nil
		}},
		"raise_exception": {name: "raise_exception", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			msg := ""
			if len(args) > 0 {
				msg = ev.message(line, args[0], false)
			}
			return Value{}, &Error{Line: line, Msg: "raise_exception: " + msg, Raised: true}
		}},
		"strftime_now": {name: "strftime_now", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) != 1 || args[0].k != KindString {
				return Value{}, errorf(line, "strftime_now needs a format string")
			}
			w := ev.newTextWriter(line, ev.lim.Output)
			strftime(w, ev.now(), args[0].s)
			s, err := w.text()
			return Str(s), err
		}},
	}
}

func (ev *evaluator) minmax(line int, v Value, args []Value, kwargs []kwValue, sign int) (Value, error) {
	items, err := ev.iterate(line, v)
	if err != nil {
		return Value{}, err
	}
	if len(items) == 0 {
		return Undefined("max"), nil
	}
	cs := truth(argOr(args, kwargs, 0, "case_sensitive", Bool(false)))
	attr := argOr(args, kwargs, 1, "attribute", None())
	key := func(x Value) (Value, error) {
		if attr.k == KindString {
			var err error
			if x, err = ev.attrPath(line, x, attr.s); err != nil {
				return Value{}, err
			}
		}
		if !cs && x.k == KindString {
			s, err := ev.lower(line, x.s)
			return Str(s), err
		}
		return x, nil
	}
	best := items[0]
	bk, err := key(best)
	if err != nil {
		return Value{}, err
	}
	for _, it := range items[1:] {
		k, err := key(it)
		if err != nil {
			return Value{}, err
		}
		c, err := ev.compare(line, k, bk)
		if err != nil {
			return Value{}, typeErrorf(line, err, func(m string) string { return m })
		}
		if c*sign > 0 {
			best, bk = it, k
		}
	}
	return best, nil
}
