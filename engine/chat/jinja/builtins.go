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

func toStrValue(ev *evaluator, line int, v Value) (Value, error) { return ev.str(line, v) }

// --- string helpers that keep taint ---

func stripChars(chars Value) func(rune) bool {
	if chars.k != KindString {
		return pySpace
	}
	set := chars.s
	return func(r rune) bool { return strings.ContainsRune(set, r) }
}

func strip(v Value, left, right bool, chars Value) Value {
	f := stripChars(chars)
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
	return substr(v, lo, hi)
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
		// Python inserts repl between every character.
		w := &tstr{}
		offs := runeOffsets(v.s)
		n := int64(0)
		for i := 0; i < len(offs); i++ {
			if count < 0 || n < count {
				w.add(repl.s, repl.t)
				n++
			}
			if i+1 < len(offs) {
				c := substr(v, offs[i], offs[i+1])
				w.add(c.s, c.t)
			}
			if err := ev.checkSize(line, w.len()); err != nil {
				return Value{}, err
			}
		}
		return w.value(), nil
	}
	w := &tstr{}
	start := 0
	for n := int64(0); count < 0 || n < count; n++ {
		j := strings.Index(v.s[start:], old.s)
		if j < 0 {
			break
		}
		j += start
		pre := substr(v, start, j)
		w.add(pre.s, pre.t)
		if substr(v, j, j+len(old.s)).tainted() {
			w.addTainted(repl.s)
		} else {
			w.add(repl.s, repl.t)
		}
		if err := ev.checkSize(line, w.len()); err != nil {
			return Value{}, err
		}
		start = j + len(old.s)
	}
	rest := substr(v, start, len(v.s))
	w.add(rest.s, rest.t)
	if err := ev.built(line, w.len()); err != nil {
		return Value{}, err
	}
	return w.value(), nil
}

func mapRunes(v Value, f func(string) string) Value { return derived(f(v.s), v) }

func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// jinjaTitle is Jinja's title filter: each word (split at whitespace and
// -({[<) gets an upper-case first letter and lower-case rest.
func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		if pySpace(r) || strings.ContainsRune("-({[<", r) {
			b.WriteRune(r)
			start = true
			continue
		}
		if start {
			b.WriteString(strings.ToUpper(string(r)))
			start = false
		} else {
			b.WriteString(strings.ToLower(string(r)))
		}
	}
	return b.String()
}

// pyTitle is Python's str.title().
func pyTitle(s string) string {
	var b strings.Builder
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
		if i > 0 {
			w.add(sep.s, sep.t)
		}
		s, err := ev.str(line, it)
		if err != nil {
			return Value{}, err
		}
		w.add(s.s, s.t)
		if err := ev.checkSize(line, w.len()); err != nil {
			return Value{}, err
		}
	}
	if err := ev.built(line, w.len()); err != nil {
		return Value{}, err
	}
	if w.len() == 0 {
		return Str(""), nil
	}
	return w.value(), nil
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

func length(line int, v Value) (int, error) {
	switch v.k {
	case KindString:
		return runeLen(v.s), nil
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
	for _, part := range strings.Split(path, ".") {
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
			return mapRunes(s, pyCapitalize), nil
		},
		"center": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			width, _ := toInt(argOr(args, kwargs, 0, "width", Int(80)))
			n := int64(runeLen(s.s))
			if width <= n {
				return s, nil
			}
			if err := ev.checkSize(line, int(min(width, int64(ev.lim.Output)+1))); err != nil {
				return Value{}, err
			}
			pad := width - n
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
			items := make([]Value, v.d.len())
			for i := range v.d.keys {
				items[i] = Value{k: KindTuple, l: []Value{v.d.keys[i], v.d.vals[i]}}
			}
			err := sortValues(items, func(x Value) Value {
				k := x.l[pos]
				if !cs && k.k == KindString {
					return Str(strings.ToLower(k.s))
				}
				return k
			}, rev)
			if err != nil {
				return Value{}, errorf(line, "dictsort: %v", err)
			}
			return List(items...), nil
		},
		"escape": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
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
				if err := ev.checkSize(line, int(min(n, int64(ev.lim.Output)+1))); err != nil {
					return Value{}, err
				}
				ind = strings.Repeat(" ", int(n))
			}
			lines, err := splitValue(line, s, Str("\n"), -1)
			if err != nil {
				return Value{}, err
			}
			w := &tstr{}
			for i, l := range lines {
				if i > 0 {
					w.add("\n", nil)
				}
				if (i > 0 || first) && (blank || strings.TrimFunc(l.s, pySpace) != "") {
					w.add(ind, nil)
				}
				w.add(l.s, l.t)
				if err := ev.checkSize(line, w.len()); err != nil {
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
				items := make([]Value, v.d.len())
				for i := range v.d.keys {
					items[i] = Value{k: KindTuple, l: []Value{v.d.keys[i], v.d.vals[i]}}
				}
				return List(items...), nil
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
			n, err := length(line, v)
			return Int(int64(n)), err
		},
		"list": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
				return Value{}, err
			}
			return List(append([]Value(nil), items...)...), nil
		},
		"lower": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return mapRunes(s, strings.ToLower), nil
		},
		"upper": func(ev *evaluator, line int, v Value, _ []Value, _ []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return mapRunes(s, strings.ToUpper), nil
		},
		"map": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			items, err := ev.iterate(line, v)
			if err != nil {
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
				offs := runeOffsets(v.s)
				w := &tstr{}
				for i := len(offs) - 2; i >= 0; i-- {
					c := substr(v, offs[i], offs[i+1])
					w.add(c.s, c.t)
				}
				return w.value(), nil
			}
			items, err := ev.iterate(line, v)
			if err != nil {
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
			out := append([]Value(nil), items...)
			rev := truth(argOr(args, kwargs, 0, "reverse", Bool(false)))
			cs := truth(argOr(args, kwargs, 1, "case_sensitive", Bool(false)))
			attr := argOr(args, kwargs, 2, "attribute", None())
			var keyErr error
			key := func(x Value) Value {
				if attr.k == KindString {
					var e error
					if x, e = ev.attrPath(line, x, attr.s); e != nil && keyErr == nil {
						keyErr = e
					}
				}
				if !cs && x.k == KindString {
					return Str(strings.ToLower(x.s))
				}
				return x
			}
			if err := sortValues(out, key, rev); err != nil {
				return Value{}, errorf(line, "sort: %v", err)
			}
			if keyErr != nil {
				return Value{}, keyErr
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
			return mapRunes(s, jinjaTitle), nil
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
			var b strings.Builder
			if err := writeJSON(&b, v, o, 0, ev.lim.Output); err != nil {
				return Value{}, errorf(line, "tojson: %v", err)
			}
			return derived(b.String(), taintOf(v)), nil
		},
		"trim": func(ev *evaluator, line int, v Value, args []Value, kwargs []kwValue) (Value, error) {
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			return strip(s, true, true, argOr(args, kwargs, 0, "chars", None())), nil
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
					k = Str(strings.ToLower(k.s))
				}
				if _, dup := seen.get(k); dup {
					continue
				}
				if err := seen.set(k, None()); err != nil {
					return Value{}, errorf(line, "%v", err)
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
		"sameas": func(_ *evaluator, line int, v Value, args []Value, _ []kwValue) (bool, error) {
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
			return equal(v, o) && (v.k != KindList && v.k != KindDict || v.o == o.o && (v.d == o.d)), nil
		},
		"lower": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindString && strings.ToLower(v.s) == v.s, nil
		},
		"upper": func(_ *evaluator, _ int, v Value, _ []Value, _ []kwValue) (bool, error) {
			return v.k == KindString && strings.ToUpper(v.s) == v.s, nil
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
				return Value{}, errorf(line, "range of %d items is too big", n)
			}
			if err := ev.charge(line, int(n)); err != nil {
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
						d.set(a.d.keys[i], a.d.vals[i])
					}
				case KindList, KindTuple:
					for _, p := range a.l {
						if (p.k != KindList && p.k != KindTuple) || len(p.l) != 2 {
							return Value{}, errorf(line, "dict: sequence elements must be pairs")
						}
						if err := d.set(p.l[0], p.l[1]); err != nil {
							return Value{}, errorf(line, "%v", err)
						}
					}
				default:
					return Value{}, errorf(line, "dict: cannot convert %s", a.k)
				}
			}
			for _, kw := range kwargs {
				d.set(Str(kw.name), kw.v)
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
						return Value{}, errorf(line, "cannot store underscore-prefixed attribute %q on a namespace", a.d.keys[i].s)
					}
					ns.attrs.set(a.d.keys[i], a.d.vals[i])
				}
			}
			for _, kw := range kwargs {
				if strings.HasPrefix(kw.name, "_") {
					return Value{}, errorf(line, "cannot store underscore-prefixed attribute %q on a namespace", kw.name)
				}
				ns.attrs.set(Str(kw.name), kw.v)
			}
			return Value{k: KindNamespace, o: ns}, nil
		}},
		"raise_exception": {name: "raise_exception", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			msg := ""
			if len(args) > 0 {
				msg = pyStr(args[0])
			}
			return Value{}, &Error{Line: line, Msg: "raise_exception: " + msg, Raised: true}
		}},
		"strftime_now": {name: "strftime_now", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) != 1 || args[0].k != KindString {
				return Value{}, errorf(line, "strftime_now needs a format string")
			}
			return Str(strftime(ev.now(), args[0].s)), nil
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
			return Str(strings.ToLower(x.s)), nil
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
		c, err := compare(k, bk)
		if err != nil {
			return Value{}, errorf(line, "%v", err)
		}
		if c*sign > 0 {
			best, bk = it, k
		}
	}
	return best, nil
}
