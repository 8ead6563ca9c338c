package jinja

import (
	"strconv"
	"strings"
	"time"
	"unicode"
)

// unsafeMethod: the methods ImmutableSandboxedEnvironment refuses (they
// would change a list or dict).
func unsafeMethod(k Kind, name string) bool {
	switch k {
	case KindList:
		switch name {
		case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear":
			return true
		}
	case KindDict:
		switch name {
		case "clear", "pop", "popitem", "setdefault", "update":
			return true
		}
	}
	return strings.HasPrefix(name, "_")
}

func method(name string, fn func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error)) (Value, bool) {
	return Value{k: KindCallable, o: &callable{name: name, fn: fn}}, true
}

func intArg(line int, args []Value, kwargs []kwValue, i int, name string, def int64) (int64, error) {
	v, ok := arg(args, kwargs, i, name)
	if !ok || v.k == KindNone {
		return def, nil
	}
	n, ok := toInt(v)
	if !ok || v.k == KindFloat {
		return 0, errorf(line, "%s must be an integer", name)
	}
	return n, nil
}

// methodOf returns the bound method name of v, for the str, dict, list and
// tuple methods chat templates call.
func methodOf(v Value, name string) (Value, bool) {
	switch v.k {
	case KindString:
		return strMethod(v, name)
	case KindDict:
		switch name {
		case "items":
			return method(name, func(ev *evaluator, line int, _ []Value, _ []kwValue) (Value, error) {
				return filters["items"](ev, line, v, nil, nil)
			})
		case "keys":
			return method(name, func(ev *evaluator, line int, _ []Value, _ []kwValue) (Value, error) {
				return ev.copyList(line, v.d.keys)
			})
		case "values":
			return method(name, func(ev *evaluator, line int, _ []Value, _ []kwValue) (Value, error) {
				return ev.copyList(line, v.d.vals)
			})
		case "get":
			return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
				if len(args) < 1 {
					return Value{}, errorf(line, "get expected at least 1 argument")
				}
				x, ok, err := v.d.get(ev, line, args[0])
				if err != nil {
					return Value{}, err
				}
				if ok {
					return x, nil
				}
				return argOr(args, kwargs, 1, "default", None()), nil
			})
		case "copy":
			return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) {
				return v, nil // values are immutable: a copy is the same
			})
		}
	case KindList, KindTuple:
		switch name {
		case "index":
			return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
				if len(args) < 1 {
					return Value{}, errorf(line, "index expected at least 1 argument")
				}
				for i, x := range v.l {
					if ev.equal(line, x, args[0]) {
						return Int(int64(i)), nil
					}
				}
				if ev.stop != nil {
					return Value{}, ev.stop
				}
				return Value{}, errorf(line, "%s is not in list", ev.message(line, args[0], true))
			})
		case "count":
			return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
				if len(args) < 1 {
					return Value{}, errorf(line, "count expected 1 argument")
				}
				n := 0
				for _, x := range v.l {
					if ev.equal(line, x, args[0]) {
						n++
					}
				}
				return Int(int64(n)), ev.stopped()
			})
		}
	}
	return Value{}, false
}

func (ev *evaluator) prefixes(line int, v Value, what string) ([]string, error) {
	switch v.k {
	case KindString:
		return []string{v.s}, nil
	case KindTuple, KindList:
		if err := ev.items(line, len(v.l)); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(v.l))
		for _, x := range v.l {
			if x.k != KindString {
				return nil, errorf(line, "tuple for %s must only contain str, not %s", what, x.k)
			}
			out = append(out, x.s)
		}
		return out, nil
	case KindUndefined:
		return nil, undefinedErr(line, v)
	}
	return nil, errorf(line, "%s arg must be str or a tuple of str, not %s", what, v.k)
}

func strMethod(v Value, name string) (Value, bool) {
	s := v.s
	switch name {
	case "strip", "lstrip", "rstrip":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			chars := None()
			if len(args) > 0 {
				chars = args[0]
			}
			return ev.strip(line, v, name != "rstrip", name != "lstrip", chars)
		})
	case "split", "rsplit":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			sep := argOr(args, kwargs, 0, "sep", None())
			n, err := intArg(line, args, kwargs, 1, "maxsplit", -1)
			if err != nil {
				return Value{}, err
			}
			// Each part is a value: charge for them before making them.
			if err := ev.touch(line, len(s)); err != nil {
				return Value{}, err
			}
			parts := countParts(s, sep)
			if err := ev.items(line, parts); err != nil {
				return Value{}, err
			}
			if v.tainted() {
				if err := ev.alloc(line, parts*spanSize); err != nil {
					return Value{}, err
				}
			}
			var out []Value
			if name == "split" || n < 0 {
				out, err = splitValue(line, v, sep, n)
			} else {
				out, err = rsplitValue(line, v, sep, n)
			}
			if err != nil {
				return Value{}, err
			}
			return List(out...), nil
		})
	case "splitlines":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			keep := truth(argOr(args, kwargs, 0, "keepends", Bool(false)))
			// Count the lines, charge them, then make them.
			if err := ev.touch(line, 2*len(s)); err != nil {
				return Value{}, err
			}
			n := 0
			eachLine(s, func(int, int, int) { n++ })
			if err := ev.items(line, n); err != nil {
				return Value{}, err
			}
			if v.tainted() {
				if err := ev.alloc(line, n*spanSize); err != nil {
					return Value{}, err
				}
			}
			out := make([]Value, 0, n)
			eachLine(s, func(start, end, next int) {
				if keep {
					end = next
				}
				out = append(out, substr(v, start, end))
			})
			return List(out...), nil
		})
	case "startswith", "endswith":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) < 1 {
				return Value{}, errorf(line, "%s takes at least 1 argument", name)
			}
			ps, err := ev.prefixes(line, args[0], name)
			if err != nil {
				return Value{}, err
			}
			for _, p := range ps {
				if err := ev.step(line); err != nil {
					return Value{}, err
				}
				if err := ev.touch(line, min(len(p), len(s))); err != nil {
					return Value{}, err
				}
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return Bool(true), nil
				}
			}
			return Bool(false), nil
		})
	case "upper", "lower", "casefold", "title", "capitalize":
		f := map[string]func(string) string{"upper": strings.ToUpper, "lower": strings.ToLower, "casefold": strings.ToLower, "title": pyTitle, "capitalize": pyCapitalize}[name]
		return method(name, func(ev *evaluator, line int, _ []Value, _ []kwValue) (Value, error) { return ev.mapText(line, v, f) })
	case "replace":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			if len(args) < 2 || args[0].k != KindString || args[1].k != KindString {
				return Value{}, errorf(line, "replace needs two strings")
			}
			n, err := intArg(line, args, kwargs, 2, "count", -1)
			if err != nil {
				return Value{}, err
			}
			return ev.replaceValue(line, v, args[0], args[1], n)
		})
	case "find", "rfind", "index", "rindex", "count":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) < 1 || args[0].k != KindString {
				return Value{}, errorf(line, "%s needs a string", name)
			}
			sub := args[0].s
			if err := ev.touch(line, len(s)+len(sub)); err != nil {
				return Value{}, err
			}
			if name == "count" {
				if sub == "" {
					n, err := ev.runeCount(line, s)
					return Int(int64(n + 1)), err
				}
				return Int(int64(strings.Count(s, sub))), nil
			}
			i := strings.Index(s, sub)
			if name == "rfind" || name == "rindex" {
				i = strings.LastIndex(s, sub)
			}
			if i < 0 {
				if name == "index" || name == "rindex" {
					return Value{}, errorf(line, "substring not found")
				}
				return Int(-1), nil
			}
			n, err := ev.runeCount(line, s[:i])
			return Int(int64(n)), err
		})
	case "join":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) != 1 {
				return Value{}, errorf(line, "join takes exactly one argument")
			}
			items, err := ev.iterate(line, args[0])
			if err != nil {
				return Value{}, err
			}
			for _, it := range items {
				if err := ev.step(line); err != nil {
					return Value{}, err
				}
				if it.k != KindString {
					return Value{}, errorf(line, "sequence item: expected str instance, %s found", it.k)
				}
			}
			return joinValues(ev, line, items, v)
		})
	case "format":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			return ev.strFormat(line, v, args, kwargs)
		})
	case "removeprefix", "removesuffix":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) != 1 || args[0].k != KindString {
				return Value{}, errorf(line, "%s needs a string", name)
			}
			p := args[0].s
			if err := ev.touch(line, min(len(p), len(s))); err != nil {
				return Value{}, err
			}
			if name == "removeprefix" && strings.HasPrefix(s, p) {
				return substr(v, len(p), len(s)), nil
			}
			if name == "removesuffix" && p != "" && strings.HasSuffix(s, p) {
				return substr(v, 0, len(s)-len(p)), nil
			}
			return v, nil
		})
	case "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper":
		return method(name, func(ev *evaluator, line int, _ []Value, _ []kwValue) (Value, error) {
			if err := ev.touchRunes(line, len(s)); err != nil {
				return Value{}, err
			}
			return Bool(strPredicate(name, s)), nil
		})
	case "zfill":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			w, err := intArg(line, args, kwargs, 0, "width", 0)
			if err != nil {
				return Value{}, err
			}
			runes, err := ev.runeCount(line, s)
			if err != nil {
				return Value{}, err
			}
			n := int64(runes)
			if w <= n {
				return v, nil
			}
			if err := ev.checkSize64(line, int64(len(s))+w-n); err != nil {
				return Value{}, err
			}
			if err := ev.built(line, len(s)+int(w-n), 1); err != nil {
				return Value{}, err
			}
			pad := strings.Repeat("0", int(w-n))
			if s != "" && (s[0] == '+' || s[0] == '-') {
				return derived(s[:1]+pad+s[1:], v), nil
			}
			return derived(pad+s, v), nil
		})
	}
	return Value{}, false
}

func strPredicate(name, s string) bool {
	if s == "" {
		return false
	}
	// ok reports whether r passes; cased whether it counts as a cased
	// character (islower and isupper need one).
	var ok func(r rune) bool
	cased := func(rune) bool { return true }
	switch name {
	case "isdigit", "isnumeric", "isdecimal":
		ok = unicode.IsDigit
	case "isalpha":
		ok = unicode.IsLetter
	case "isalnum":
		ok = func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }
	case "isspace":
		ok = pySpace
	case "islower":
		ok = func(r rune) bool { return !unicode.IsUpper(r) && !unicode.IsTitle(r) }
		cased = unicode.IsLower
	case "isupper":
		ok = func(r rune) bool { return !unicode.IsLower(r) && !unicode.IsTitle(r) }
		cased = unicode.IsUpper
	default:
		return false
	}
	anyCased := false
	for _, r := range s {
		if !ok(r) {
			return false
		}
		anyCased = anyCased || cased(r)
	}
	return anyCased
}

// strFormat is str.format with "{}", "{0}" and "{name}" fields (no format
// specs or conversions).
func (ev *evaluator) strFormat(line int, f Value, args []Value, kwargs []kwValue) (Value, error) {
	w := &tstr{}
	s := f.s
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				i++
			}
			if err := ev.put(line, w, "}", substr(f, i, i+1).t); err != nil {
				return Value{}, err
			}
			continue
		}
		if c != '{' {
			j := strings.IndexAny(s[i:], "{}")
			if j < 0 {
				j = len(s)
			} else {
				j += i
			}
			p := substr(f, i, j)
			if err := ev.put(line, w, p.s, p.t); err != nil {
				return Value{}, err
			}
			i = j - 1
			continue
		}
		if err := ev.step(line); err != nil {
			return Value{}, err
		}
		if i+1 < len(s) && s[i+1] == '{' {
			if err := ev.put(line, w, "{", nil); err != nil {
				return Value{}, err
			}
			i++
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return Value{}, errorf(line, "format: single '{' encountered")
		}
		field := s[i+1 : i+j]
		i += j
		if strings.ContainsAny(field, ":!") {
			return Value{}, errorf(line, "format: format specs and conversions are not supported")
		}
		var v Value
		if field == "" {
			if auto >= len(args) {
				return Value{}, errorf(line, "format: replacement index %d out of range", auto)
			}
			v = args[auto]
			auto++
		} else if n, err := strconv.Atoi(field); err == nil {
			if n < 0 || n >= len(args) {
				return Value{}, errorf(line, "format: replacement index %d out of range", n)
			}
			v = args[n]
		} else {
			found := false
			for _, kw := range kwargs {
				if kw.name == field {
					v, found = kw.v, true
				}
			}
			if !found {
				return Value{}, errorf(line, "format: no argument named %q", truncateStr(field, 100))
			}
		}
		sv, err := ev.str(line, v)
		if err != nil {
			return Value{}, err
		}
		if err := ev.put(line, w, sv.s, sv.t); err != nil {
			return Value{}, err
		}
	}
	return w.value(), nil
}

// strftime writes t formatted like C's strftime for the directives
// templates use.
func strftime(b *textWriter, t time.Time, f string) {
	for i := 0; i < len(f) && !b.over; i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.byte(f[i])
			continue
		}
		i++
		pad := func(n, w int) string {
			s := strconv.Itoa(n)
			for len(s) < w {
				s = "0" + s
			}
			return s
		}
		switch f[i] {
		case 'd':
			b.str(pad(t.Day(), 2))
		case 'e':
			b.str(strconv.Itoa(t.Day()))
		case 'm':
			b.str(pad(int(t.Month()), 2))
		case 'Y':
			b.str(strconv.Itoa(t.Year()))
		case 'y':
			b.str(pad(t.Year()%100, 2))
		case 'b', 'h':
			b.str(t.Month().String()[:3])
		case 'B':
			b.str(t.Month().String())
		case 'a':
			b.str(t.Weekday().String()[:3])
		case 'A':
			b.str(t.Weekday().String())
		case 'H':
			b.str(pad(t.Hour(), 2))
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			b.str(pad(h, 2))
		case 'M':
			b.str(pad(t.Minute(), 2))
		case 'S':
			b.str(pad(t.Second(), 2))
		case 'p':
			if t.Hour() < 12 {
				b.str("AM")
			} else {
				b.str("PM")
			}
		case 'j':
			b.str(pad(t.YearDay(), 3))
		case 'Z':
			z, _ := t.Zone()
			b.str(z)
		case '%':
			b.byte('%')
		default:
			b.byte('%')
			b.byte(f[i])
		}
	}
}

// eachLine calls f with each line of s as str.splitlines splits it: where
// it starts, where its text ends and where its line break ends.
func eachLine(s string, f func(start, end, next int)) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		n := 0
		switch {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			n = 2
		case c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e:
			n = 1
		case strings.HasPrefix(s[i:], "\u0085"):
			n = len("\u0085")
		case strings.HasPrefix(s[i:], "\u2028"), strings.HasPrefix(s[i:], "\u2029"):
			n = len("\u2028")
		}
		if n == 0 {
			i++
			continue
		}
		f(start, i, i+n)
		i += n
		start = i
	}
	if start < len(s) {
		f(start, len(s), len(s))
	}
}

// countParts bounds how many parts split makes of s.
func countParts(s string, sep Value) int {
	if sep.k == KindString && sep.s != "" {
		return strings.Count(s, sep.s) + 1
	}
	n, in := 0, false
	for _, r := range s {
		w := !pySpace(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}
