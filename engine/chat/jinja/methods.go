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
			return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) {
				return List(append([]Value(nil), v.d.keys...)...), nil
			})
		case "values":
			return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) {
				return List(append([]Value(nil), v.d.vals...)...), nil
			})
		case "get":
			return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
				if len(args) < 1 {
					return Value{}, errorf(line, "get expected at least 1 argument")
				}
				if x, ok := v.d.get(args[0]); ok {
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
					if equal(x, args[0]) {
						return Int(int64(i)), nil
					}
				}
				return Value{}, errorf(line, "%s is not in list", pyRepr(args[0]))
			})
		case "count":
			return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
				if len(args) < 1 {
					return Value{}, errorf(line, "count expected 1 argument")
				}
				n := 0
				for _, x := range v.l {
					if equal(x, args[0]) {
						n++
					}
				}
				return Int(int64(n)), nil
			})
		}
	}
	return Value{}, false
}

func prefixes(line int, v Value, what string) ([]string, error) {
	switch v.k {
	case KindString:
		return []string{v.s}, nil
	case KindTuple, KindList:
		var out []string
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
			return strip(v, name != "rstrip", name != "lstrip", chars), nil
		})
	case "split", "rsplit":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			sep := argOr(args, kwargs, 0, "sep", None())
			n, err := intArg(line, args, kwargs, 1, "maxsplit", -1)
			if err != nil {
				return Value{}, err
			}
			// Each part is a value: charge for them before making them.
			if err := ev.charge(line, countParts(s, sep)); err != nil {
				return Value{}, err
			}
			var parts []Value
			if name == "split" || n < 0 {
				parts, err = splitValue(line, v, sep, n)
			} else {
				parts, err = rsplitValue(line, v, sep, n)
			}
			if err != nil {
				return Value{}, err
			}
			return List(parts...), nil
		})
	case "splitlines":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			keep := truth(argOr(args, kwargs, 0, "keepends", Bool(false)))
			var out []Value
			start := 0
			for i := 0; i < len(s); {
				c := s[i]
				n := 0
				switch {
				case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
					n = 2
				case c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e:
					n = 1
				case strings.HasPrefix(s[i:], "\u0085"), strings.HasPrefix(s[i:], "\u2028"), strings.HasPrefix(s[i:], "\u2029"):
					n = len(string([]rune(s[i:])[0]))
				}
				if n == 0 {
					i++
					continue
				}
				end := i
				if keep {
					end = i + n
				}
				out = append(out, substr(v, start, end))
				i += n
				start = i
			}
			if start < len(s) {
				out = append(out, substr(v, start, len(s)))
			}
			return List(out...), nil
		})
	case "startswith", "endswith":
		return method(name, func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) < 1 {
				return Value{}, errorf(line, "%s takes at least 1 argument", name)
			}
			ps, err := prefixes(line, args[0], name)
			if err != nil {
				return Value{}, err
			}
			for _, p := range ps {
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return Bool(true), nil
				}
			}
			return Bool(false), nil
		})
	case "upper":
		return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) { return mapRunes(v, strings.ToUpper), nil })
	case "lower", "casefold":
		return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) { return mapRunes(v, strings.ToLower), nil })
	case "title":
		return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) { return mapRunes(v, pyTitle), nil })
	case "capitalize":
		return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) { return mapRunes(v, pyCapitalize), nil })
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
			if name == "count" {
				if sub == "" {
					return Int(int64(runeLen(s) + 1)), nil
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
			return Int(int64(runeLen(s[:i]))), nil
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
			if name == "removeprefix" && strings.HasPrefix(s, p) {
				return substr(v, len(p), len(s)), nil
			}
			if name == "removesuffix" && p != "" && strings.HasSuffix(s, p) {
				return substr(v, 0, len(s)-len(p)), nil
			}
			return v, nil
		})
	case "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper":
		return method(name, func(*evaluator, int, []Value, []kwValue) (Value, error) {
			return Bool(strPredicate(name, s)), nil
		})
	case "zfill":
		return method(name, func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
			w, err := intArg(line, args, kwargs, 0, "width", 0)
			if err != nil {
				return Value{}, err
			}
			n := int64(runeLen(s))
			if w <= n {
				return v, nil
			}
			if err := ev.checkSize(line, int(min(w, int64(ev.lim.Output)+1))); err != nil {
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
	cased := false
	for _, r := range s {
		switch name {
		case "isdigit", "isnumeric", "isdecimal":
			if !unicode.IsDigit(r) {
				return false
			}
		case "isalpha":
			if !unicode.IsLetter(r) {
				return false
			}
		case "isalnum":
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
				return false
			}
		case "isspace":
			if !pySpace(r) {
				return false
			}
		case "islower":
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				return false
			}
			cased = cased || unicode.IsLower(r)
		case "isupper":
			if unicode.IsLower(r) || unicode.IsTitle(r) {
				return false
			}
			cased = cased || unicode.IsUpper(r)
		}
	}
	if name == "islower" || name == "isupper" {
		return cased
	}
	return true
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
			w.add("}", substr(f, i, i+1).t)
			continue
		}
		if c != '{' {
			p := substr(f, i, i+1)
			w.add(p.s, p.t)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			w.add("{", nil)
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
				return Value{}, errorf(line, "format: no argument named %q", field)
			}
		}
		sv, err := ev.str(line, v)
		if err != nil {
			return Value{}, err
		}
		w.add(sv.s, sv.t)
		if err := ev.checkSize(line, w.len()); err != nil {
			return Value{}, err
		}
	}
	return w.value(), nil
}

// strftime formats t like C's strftime for the directives templates use.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
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
			b.WriteString(pad(t.Day(), 2))
		case 'e':
			b.WriteString(strconv.Itoa(t.Day()))
		case 'm':
			b.WriteString(pad(int(t.Month()), 2))
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			b.WriteString(pad(t.Year()%100, 2))
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			b.WriteString(pad(t.Hour(), 2))
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			b.WriteString(pad(h, 2))
		case 'M':
			b.WriteString(pad(t.Minute(), 2))
		case 'S':
			b.WriteString(pad(t.Second(), 2))
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'j':
			b.WriteString(pad(t.YearDay(), 3))
		case 'Z':
			z, _ := t.Zone()
			b.WriteString(z)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
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
