package jinja

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scope holds the variables of a template, a loop turn, a macro call or a
// with block. The template's own scope is a map; the others hold a few
// names each and are small slices, searched in order (cheaper to make and
// to search than a map at that size).
type scope struct {
	root   map[string]Value // the template's scope only
	names  []string
	vals   []Value
	parent *scope
	// captured: a macro defined in this scope (or in one inside it) keeps
	// it, so a loop must not reuse it for its next turn.
	captured bool
}

// scopeSize is what a new scope allocates (a few variables), charged
// against Limits.Memory.
const scopeSize = 64 + 4*(16+valueSize)

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if s.root != nil {
			if v, ok := s.root[name]; ok {
				return v, true
			}
			continue
		}
		for i, n := range s.names {
			if n == name {
				return s.vals[i], true
			}
		}
	}
	return Value{}, false
}

// set binds name in s itself.
func (s *scope) set(name string, v Value) {
	if s.root != nil {
		s.root[name] = v
		return
	}
	for i, n := range s.names {
		if n == name {
			s.vals[i] = v
			return
		}
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
}

// child returns a new scope inside s, charged as memory.
func (ev *evaluator) child(line int, s *scope) (*scope, error) {
	if err := ev.alloc(line, scopeSize); err != nil {
		return nil, err
	}
	return &scope{parent: s, names: make([]string, 0, 4), vals: make([]Value, 0, 4)}, nil
}

// capture marks s and the scopes around it as kept by a macro.
func (s *scope) capture() {
	for ; s != nil && !s.captured; s = s.parent {
		s.captured = true
	}
}

// renew returns a fresh child of parent for a loop's next turn: s itself,
// emptied, unless a macro kept it (a loop turn allocates nothing then).
func (ev *evaluator) renew(line int, s, parent *scope) (*scope, error) {
	if s == nil || s.captured {
		return ev.child(line, parent)
	}
	clear(s.vals) // let the last turn's values go
	s.names, s.vals = s.names[:0], s.vals[:0]
	return s, nil
}

// loopControl is break or continue travelling up to its loop.
type loopControl struct {
	kind string
	line int
}

func (l *loopControl) Error() string { return l.kind }

// callable is a function value: a macro, a global or a bound method.
type callable struct {
	name string
	fn   func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error)
}

type kwValue struct {
	name string
	v    Value
}

func (ev *evaluator) nodes(body []node, sc *scope, w *tstr) error {
	for _, n := range body {
		if err := ev.node(n, sc, w); err != nil {
			return err
		}
	}
	return nil
}

func (ev *evaluator) write(line int, w *tstr, v Value) error {
	return ev.put(line, w, v.s, v.t)
}

func (ev *evaluator) node(n node, sc *scope, w *tstr) error {
	line := n.nodeLine()
	if err := ev.step(line); err != nil {
		return err
	}
	switch n := n.(type) {
	case *textNode:
		return ev.write(line, w, Str(n.s))
	case *outputNode:
		v, err := ev.eval(n.x, sc)
		if err != nil {
			return err
		}
		s, err := ev.str(line, v)
		if err != nil {
			return err
		}
		return ev.write(line, w, s)
	case *ifNode:
		for i, c := range n.conds {
			v, err := ev.eval(c, sc)
			if err != nil {
				return err
			}
			if truth(v) {
				return ev.nodes(n.bodies[i], sc, w)
			}
		}
		return ev.nodes(n.orelse, sc, w)
	case *forNode:
		return ev.forLoop(n, sc, w)
	case *setNode:
		v, err := ev.eval(n.x, sc)
		if err != nil {
			return err
		}
		return ev.assign(line, n.target, v, sc)
	case *setBlockNode:
		inner := &tstr{}
		if err := ev.nodes(n.body, sc, inner); err != nil {
			return err
		}
		v, err := ev.applyFilters(n.filters, inner.value(), sc)
		if err != nil {
			return err
		}
		return ev.assign(line, n.target, v, sc)
	case *filterBlockNode:
		inner := &tstr{}
		if err := ev.nodes(n.body, sc, inner); err != nil {
			return err
		}
		v, err := ev.applyFilters(n.filters, inner.value(), sc)
		if err != nil {
			return err
		}
		s, err := ev.str(line, v)
		if err != nil {
			return err
		}
		return ev.write(line, w, s)
	case *macroNode:
		sc.capture()
		sc.set(n.m.name, ev.macro(n.m, sc, nil))
		return nil
	case *callBlockNode:
		sc.capture()
		caller := ev.macro(n.caller, sc, nil)
		fn, err := ev.eval(n.call.fn, sc)
		if err != nil {
			return err
		}
		args, kwargs, err := ev.evalArgs(line, n.call.args, n.call.kwargs, sc)
		if err != nil {
			return err
		}
		kwargs = append(kwargs, kwValue{"caller", caller})
		v, err := ev.call(line, fn, args, kwargs)
		if err != nil {
			return err
		}
		s, err := ev.str(line, v)
		if err != nil {
			return err
		}
		return ev.write(line, w, s)
	case *withNode:
		inner, err := ev.child(line, sc)
		if err != nil {
			return err
		}
		for i, tg := range n.targets {
			v, err := ev.eval(n.values[i], sc)
			if err != nil {
				return err
			}
			if err := ev.assign(line, tg, v, inner); err != nil {
				return err
			}
		}
		return ev.nodes(n.body, inner, w)
	case *breakNode:
		return &loopControl{"break", line}
	case *continueNode:
		return &loopControl{"continue", line}
	}
	return errorf(line, "internal error: unknown node %T", n)
}

func (ev *evaluator) applyFilters(fs []*filterExpr, v Value, sc *scope) (Value, error) {
	for _, f := range fs {
		var err error
		if v, err = ev.filter(f, v, sc); err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

func (ev *evaluator) assign(line int, tg target, v Value, sc *scope) error {
	if tg.attr != "" {
		ns, ok := sc.lookup(tg.names[0])
		if !ok || ns.k != KindNamespace {
			return errorf(line, "cannot assign attribute on non-namespace object '%s'", tg.names[0])
		}
		if strings.HasPrefix(tg.attr, "_") {
			return errorf(line, "cannot store underscore-prefixed attribute %q on a namespace", tg.attr)
		}
		return ns.o.(*Namespace).attrs.set(ev, line, Str(tg.attr), v)
	}
	if !tg.tuple {
		sc.set(tg.names[0], v)
		return nil
	}
	items, err := ev.iterate(line, v)
	if err != nil {
		return err
	}
	if len(items) != len(tg.names) {
		return errorf(line, "cannot unpack %d values into %d names", len(items), len(tg.names))
	}
	for i, name := range tg.names {
		sc.set(name, items[i])
	}
	return nil
}

// loopState is the `loop` variable.
type loopState struct {
	items   []Value
	index0  int
	changed *Value
}

func (ev *evaluator) forLoop(n *forNode, sc *scope, w *tstr) error {
	line := n.line
	it, err := ev.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := ev.iterate(line, it)
	if err != nil {
		return err
	}
	if n.cond != nil {
		var kept []Value
		var tmp *scope
		for _, item := range items {
			if err := ev.step(line); err != nil {
				return err
			}
			if tmp, err = ev.renew(line, tmp, sc); err != nil {
				return err
			}
			if err := ev.assign(line, n.target, item, tmp); err != nil {
				return err
			}
			c, err := ev.eval(n.cond, tmp)
			if err != nil {
				return err
			}
			if truth(c) {
				if err := ev.alloc(line, valueSize); err != nil {
					return err
				}
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return ev.nodes(n.orelse, sc, w)
	}
	ls := &loopState{items: items}
	loopVal := Value{k: KindLoop, o: ls}
	var body *scope
	for i, item := range items {
		if err := ev.step(line); err != nil {
			return err
		}
		ls.index0 = i
		if body, err = ev.renew(line, body, sc); err != nil {
			return err
		}
		body.set("loop", loopVal)
		if err := ev.assign(line, n.target, item, body); err != nil {
			return err
		}
		if err := ev.nodes(n.body, body, w); err != nil {
			if ctl, ok := err.(*loopControl); ok {
				if ctl.kind == "break" {
					break
				}
				continue
			}
			return err
		}
	}
	return nil
}

func (ls *loopState) attr(name string) (Value, bool) {
	n := len(ls.items)
	switch name {
	case "index":
		return Int(int64(ls.index0 + 1)), true
	case "index0":
		return Int(int64(ls.index0)), true
	case "revindex":
		return Int(int64(n - ls.index0)), true
	case "revindex0":
		return Int(int64(n - ls.index0 - 1)), true
	case "first":
		return Bool(ls.index0 == 0), true
	case "last":
		return Bool(ls.index0 == n-1), true
	case "length":
		return Int(int64(n)), true
	case "depth":
		return Int(1), true
	case "depth0":
		return Int(0), true
	case "previtem":
		if ls.index0 > 0 {
			return ls.items[ls.index0-1], true
		}
		return Undefined("previtem"), true
	case "nextitem":
		if ls.index0+1 < n {
			return ls.items[ls.index0+1], true
		}
		return Undefined("nextitem"), true
	case "cycle":
		return Value{k: KindCallable, o: &callable{name: "loop.cycle", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			if len(args) == 0 {
				return Value{}, errorf(line, "no items for cycling given")
			}
			return args[ls.index0%len(args)], nil
		}}}, true
	case "changed":
		return Value{k: KindCallable, o: &callable{name: "loop.changed", fn: func(ev *evaluator, line int, args []Value, _ []kwValue) (Value, error) {
			v := List(args...)
			if ls.changed != nil && ev.equal(line, *ls.changed, v) {
				return Bool(false), nil
			}
			if ev.stop != nil {
				return Value{}, ev.stop
			}
			ls.changed = &v
			return Bool(true), nil
		}}}, true
	}
	return Value{}, false
}

// macro makes the callable for a macro defined in sc.
func (ev *evaluator) macro(m *macroDef, sc *scope, _ *Value) Value {
	return Value{k: KindCallable, o: &callable{name: m.name, fn: func(ev *evaluator, line int, args []Value, kwargs []kwValue) (Value, error) {
		if ev.depth >= ev.lim.Depth {
			return Value{}, ev.fail(limitErr(line, "macro calls nested more than %d deep", ev.lim.Depth))
		}
		// A call's frame (its scope, arguments and output) is memory too.
		if err := ev.alloc(line, frameSize); err != nil {
			return Value{}, err
		}
		ev.depth++
		defer func() { ev.depth-- }()
		inner, err := ev.child(line, sc)
		if err != nil {
			return Value{}, err
		}
		if len(args) > len(m.params) {
			return Value{}, errorf(line, "macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
		}
		set := make([]bool, len(m.params))
		for i, a := range args {
			inner.set(m.params[i], a)
			set[i] = true
		}
		for _, kw := range kwargs {
			found := false
			for i, p := range m.params {
				if p == kw.name {
					if set[i] {
						return Value{}, errorf(line, "macro '%s' got multiple values for argument '%s'", m.name, p)
					}
					inner.set(p, kw.v)
					set[i] = true
					found = true
				}
			}
			if !found {
				if kw.name == "caller" {
					inner.set("caller", kw.v)
					continue
				}
				return Value{}, errorf(line, "macro '%s' has no argument '%s'", m.name, kw.name)
			}
		}
		for i, p := range m.params {
			if set[i] {
				continue
			}
			if m.defaults[i] != nil {
				v, err := ev.eval(m.defaults[i], inner)
				if err != nil {
					return Value{}, err
				}
				inner.set(p, v)
			} else {
				inner.set(p, Undefined(p))
			}
		}
		w := &tstr{}
		if err := ev.nodes(m.body, inner, w); err != nil {
			return Value{}, err
		}
		return w.value(), nil
	}}}
}

// evalArgs evaluates a call's arguments; the memory they take is charged
// (a call in a loop would otherwise churn it for free).
func (ev *evaluator) evalArgs(line int, args []expr, kwargs []kwarg, sc *scope) ([]Value, []kwValue, error) {
	if err := ev.alloc(line, len(args)*valueSize+len(kwargs)*(valueSize+16)); err != nil {
		return nil, nil, err
	}
	av := make([]Value, len(args))
	for i, a := range args {
		v, err := ev.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		av[i] = v
	}
	var kv []kwValue
	for _, k := range kwargs {
		v, err := ev.eval(k.x, sc)
		if err != nil {
			return nil, nil, err
		}
		kv = append(kv, kwValue{k.name, v})
	}
	return av, kv, nil
}

func (ev *evaluator) call(line int, fn Value, args []Value, kwargs []kwValue) (Value, error) {
	switch fn.k {
	case KindCallable:
		return fn.o.(*callable).fn(ev, line, args, kwargs)
	case KindUndefined:
		return Value{}, undefinedErr(line, fn)
	}
	return Value{}, errorf(line, "'%s' object is not callable", fn.k)
}

func undefinedErr(line int, v Value) *Error {
	if v.s == "" {
		return errorf(line, "undefined value")
	}
	return errorf(line, "'%s' is undefined", v.s)
}

func (ev *evaluator) lookup(name string, sc *scope) Value {
	if v, ok := sc.lookup(name); ok {
		return v
	}
	if g, ok := globals[name]; ok {
		return Value{k: KindCallable, o: g}
	}
	return Undefined(name)
}

func (ev *evaluator) eval(x expr, sc *scope) (Value, error) {
	line := x.exprLine()
	if err := ev.step(line); err != nil {
		return Value{}, err
	}
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		return ev.lookup(x.name, sc), nil
	case *listExpr:
		if err := ev.items(line, len(x.items)); err != nil {
			return Value{}, err
		}
		items := make([]Value, len(x.items))
		for i, it := range x.items {
			v, err := ev.eval(it, sc)
			if err != nil {
				return Value{}, err
			}
			items[i] = v
		}
		if x.tuple {
			return Value{k: KindTuple, l: items}, nil
		}
		return List(items...), nil
	case *dictExpr:
		d := newDict(len(x.keys))
		for i := range x.keys {
			k, err := ev.eval(x.keys[i], sc)
			if err != nil {
				return Value{}, err
			}
			v, err := ev.eval(x.vals[i], sc)
			if err != nil {
				return Value{}, err
			}
			if err := d.set(ev, line, k, v); err != nil {
				return Value{}, err
			}
		}
		return Value{k: KindDict, d: d}, nil
	case *attrExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.getattr(line, v, x.name)
	case *itemExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		k, err := ev.eval(x.index, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.getitem(line, v, k)
	case *sliceExpr:
		return ev.slice(x, sc)
	case *callExpr:
		fn, err := ev.eval(x.fn, sc)
		if err != nil {
			return Value{}, err
		}
		args, kwargs, err := ev.evalArgs(line, x.args, x.kwargs, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.call(line, fn, args, kwargs)
	case *filterExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.filter(x, v, sc)
	case *testExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		args, kwargs, err := ev.evalArgs(line, x.args, x.kwargs, sc)
		if err != nil {
			return Value{}, err
		}
		r, err := tests[x.name](ev, line, v, args, kwargs)
		if err != nil {
			return Value{}, err
		}
		return Bool(r != x.negate), nil
	case *binExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil {
			return Value{}, err
		}
		r, err := ev.eval(x.r, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.binop(line, x.op, l, r)
	case *unaryExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		switch x.op {
		case "not":
			return Bool(!truth(v)), nil
		case "-":
			switch v.k {
			case KindInt, KindBool:
				if v.n == math.MinInt64 {
					return Value{}, errorf(line, "integer overflow")
				}
				return Int(-v.n), nil
			case KindFloat:
				return Float(-v.f), nil
			case KindUndefined:
				return Value{}, undefinedErr(line, v)
			}
			return Value{}, errorf(line, "bad operand type for unary -: '%s'", v.k)
		default:
			switch v.k {
			case KindInt, KindBool:
				return Int(v.n), nil
			case KindFloat:
				return v, nil
			case KindUndefined:
				return Value{}, undefinedErr(line, v)
			}
			return Value{}, errorf(line, "bad operand type for unary +: '%s'", v.k)
		}
	case *logicExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil {
			return Value{}, err
		}
		if truth(l) != x.and {
			return l, nil
		}
		return ev.eval(x.r, sc)
	case *compareExpr:
		l, err := ev.eval(x.first, sc)
		if err != nil {
			return Value{}, err
		}
		for i, op := range x.ops {
			r, err := ev.eval(x.rest[i], sc)
			if err != nil {
				return Value{}, err
			}
			ok, err := ev.compareOp(line, op, l, r)
			if err != nil {
				return Value{}, err
			}
			if !ok {
				return Bool(false), nil
			}
			l = r
		}
		return Bool(true), nil
	case *condExpr:
		c, err := ev.eval(x.cond, sc)
		if err != nil {
			return Value{}, err
		}
		if truth(c) {
			return ev.eval(x.a, sc)
		}
		if x.b == nil {
			return Undefined(""), nil
		}
		return ev.eval(x.b, sc)
	case *concatExpr:
		parts := make([]Value, len(x.parts))
		n, spans := 0, 0
		for i, p := range x.parts {
			v, err := ev.eval(p, sc)
			if err != nil {
				return Value{}, err
			}
			if parts[i], err = ev.str(line, v); err != nil {
				return Value{}, err
			}
			n, spans = n+len(parts[i].s), spans+len(parts[i].t)
			if err := ev.checkSize(line, n); err != nil {
				return Value{}, err
			}
		}
		return ev.concat(line, n, spans, parts...)
	}
	return Value{}, errorf(line, "internal error: unknown expression %T", x)
}

func (ev *evaluator) compareOp(line int, op string, l, r Value) (bool, error) {
	switch op {
	case "==":
		eq := ev.equal(line, l, r)
		return eq, ev.stopped()
	case "!=":
		eq := ev.equal(line, l, r)
		return !eq, ev.stopped()
	case "in":
		return ev.contains(line, r, l)
	case "notin":
		ok, err := ev.contains(line, r, l)
		return !ok, err
	}
	if l.k == KindUndefined {
		return false, undefinedErr(line, l)
	}
	if r.k == KindUndefined {
		return false, undefinedErr(line, r)
	}
	c, err := ev.compare(line, l, r)
	if err != nil {
		return false, typeErrorf(line, err, func(m string) string { return strings.Replace(m, "'<'", "'"+op+"'", 1) })
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// contains is Python's `item in container`.
func (ev *evaluator) contains(line int, container, item Value) (bool, error) {
	switch container.k {
	case KindString:
		if item.k != KindString {
			if item.k == KindUndefined {
				return false, undefinedErr(line, item)
			}
			return false, errorf(line, "'in <string>' requires string as left operand, not %s", item.k)
		}
		if err := ev.touch(line, len(container.s)+len(item.s)); err != nil {
			return false, err
		}
		return strings.Contains(container.s, item.s), nil
	case KindList, KindTuple:
		for _, x := range container.l {
			if ev.equal(line, x, item) {
				return true, nil
			}
		}
		return false, ev.stopped()
	case KindDict:
		_, ok, err := container.d.get(ev, line, item)
		return ok, err
	case KindUndefined:
		return false, nil
	}
	return false, errorf(line, "argument of type '%s' is not iterable", container.k)
}

// iterate lists what `for` walks: items, dict keys, characters.
func (ev *evaluator) iterate(line int, v Value) ([]Value, error) {
	switch v.k {
	case KindList, KindTuple:
		return v.l, nil
	case KindDict:
		return v.d.keys, nil
	case KindString:
		n, err := ev.runeCount(line, v.s)
		if err != nil {
			return nil, err
		}
		if err := ev.items(line, n); err != nil {
			return nil, err
		}
		if v.tainted() {
			if err := ev.alloc(line, n*spanSize); err != nil {
				return nil, err
			}
		}
		out := make([]Value, 0, n)
		for i := 0; i < len(v.s); {
			_, size := utf8.DecodeRuneInString(v.s[i:])
			out = append(out, substr(v, i, i+size))
			i += size
		}
		return out, nil
	case KindUndefined:
		return nil, nil
	case KindNamespace:
		return nil, errorf(line, "'Namespace' object is not iterable")
	}
	return nil, errorf(line, "'%s' object is not iterable", v.k)
}

func (ev *evaluator) getattr(line int, v Value, name string) (Value, error) {
	switch v.k {
	case KindUndefined:
		return Value{}, undefinedErr(line, v)
	case KindDict:
		if m, ok := methodOf(v, name); ok {
			return m, ev.alloc(line, methodSize)
		}
		if unsafeMethod(v.k, name) {
			return Value{}, errorf(line, "access to attribute '%s' of 'dict' object is unsafe", name)
		}
		if x, ok := v.d.getStr(name); ok {
			return x, nil
		}
	case KindNamespace:
		if x, ok := v.o.(*Namespace).attrs.getStr(name); ok {
			return x, nil
		}
	case KindLoop:
		if x, ok := v.o.(*loopState).attr(name); ok {
			return x, nil
		}
	default:
		if m, ok := methodOf(v, name); ok {
			return m, ev.alloc(line, methodSize)
		}
		if unsafeMethod(v.k, name) {
			return Value{}, errorf(line, "access to attribute '%s' of '%s' object is unsafe", name, v.k)
		}
	}
	return Undefined(name), nil
}

func (ev *evaluator) getitem(line int, v, k Value) (Value, error) {
	switch v.k {
	case KindUndefined:
		return Value{}, undefinedErr(line, v)
	case KindDict:
		x, ok, err := v.d.get(ev, line, k)
		if err != nil {
			return Value{}, err
		}
		if ok {
			return x, nil
		}
	case KindList, KindTuple:
		if k.k == KindInt || k.k == KindBool {
			i := k.n
			if i < 0 {
				i += int64(len(v.l))
			}
			if i >= 0 && i < int64(len(v.l)) {
				return v.l[i], nil
			}
			return Undefined(""), nil
		}
	case KindString:
		if k.k == KindInt || k.k == KindBool {
			i := k.n
			if i < 0 {
				n, err := ev.runeCount(line, v.s)
				if err != nil {
					return Value{}, err
				}
				i += int64(n)
			}
			if i < 0 {
				return Undefined(""), nil
			}
			off, err := ev.runeIndex(line, v.s, i)
			if err != nil {
				return Value{}, err
			}
			if off < 0 || off >= len(v.s) {
				return Undefined(""), nil
			}
			_, size := utf8.DecodeRuneInString(v.s[off:])
			return substr(v, off, off+size), nil
		}
	}
	if k.k == KindString {
		return ev.getattr(line, v, k.s)
	}
	return Undefined(""), nil
}

func (ev *evaluator) slice(x *sliceExpr, sc *scope) (Value, error) {
	line := x.line
	v, err := ev.eval(x.x, sc)
	if err != nil {
		return Value{}, err
	}
	bound := func(e expr) (*int64, error) {
		if e == nil {
			return nil, nil
		}
		b, err := ev.eval(e, sc)
		if err != nil {
			return nil, err
		}
		switch b.k {
		case KindNone:
			return nil, nil
		case KindInt, KindBool:
			return &b.n, nil
		}
		return nil, errorf(line, "slice indices must be integers or None")
	}
	lo, err := bound(x.lo)
	if err != nil {
		return Value{}, err
	}
	hi, err := bound(x.hi)
	if err != nil {
		return Value{}, err
	}
	st, err := bound(x.step)
	if err != nil {
		return Value{}, err
	}
	step := int64(1)
	if st != nil {
		step = *st
	}
	if step == 0 {
		return Value{}, errorf(line, "slice step cannot be zero")
	}
	switch v.k {
	case KindList, KindTuple:
		start, count := sliceIndices(int64(len(v.l)), lo, hi, step)
		if err := ev.items(line, int(count)); err != nil {
			return Value{}, err
		}
		out := make([]Value, count)
		for j := range out {
			out[j] = v.l[start+int64(j)*step]
		}
		return Value{k: v.k, l: out}, nil
	case KindString:
		return ev.sliceString(line, v, lo, hi, step)
	case KindUndefined:
		return Value{}, undefinedErr(line, v)
	}
	return Undefined(""), nil
}

// sliceString is s[lo:hi:step] by runes, walking s once without a table
// of rune offsets.
func (ev *evaluator) sliceString(line int, v Value, lo, hi *int64, step int64) (Value, error) {
	n, err := ev.runeCount(line, v.s)
	if err != nil {
		return Value{}, err
	}
	start, count := sliceIndices(int64(n), lo, hi, step)
	if count == 0 {
		return Str(""), nil
	}
	if step == 1 {
		a, err := ev.runeIndex(line, v.s, start)
		if err != nil {
			return Value{}, err
		}
		b, err := ev.runeIndex(line, v.s, start+count)
		if err != nil {
			return Value{}, err
		}
		return substr(v, a, b), nil
	}
	// The runes picked, at most all of s: build them in place.
	if err := ev.built(line, len(v.s), len(v.t)); err != nil {
		return Value{}, err
	}
	w := &tstr{buf: make([]byte, 0, len(v.s))}
	pick := func(lo, hi int) {
		off := w.len()
		w.buf = append(w.buf, v.s[lo:hi]...)
		if taintedAt(v.t, lo, hi) {
			w.addSpan(off, off+hi-lo)
		}
	}
	last := start + (count-1)*step
	if step > 0 {
		r := int64(0)
		for i := 0; i < len(v.s) && r <= last; r++ {
			_, size := utf8.DecodeRuneInString(v.s[i:])
			if r >= start && (r-start)%step == 0 {
				pick(i, i+size)
			}
			i += size
		}
	} else {
		// Python's runes from the end: count them back from n-1.
		r := int64(n - 1)
		for i := len(v.s); i > 0 && r >= last; r-- {
			// Decode forward from the start of the last rune, as the
			// count did, so invalid bytes split the same way.
			j := lastRuneStart(v.s[:i])
			if r <= start && (start-r)%(-step) == 0 {
				pick(j, i)
			}
			i = j
		}
	}
	return w.value(), nil
}

// lastRuneStart returns where the last rune of s starts, as a forward walk
// of s would split it.
func lastRuneStart(s string) int {
	_, size := utf8.DecodeLastRuneInString(s)
	j := len(s) - size
	if _, fw := utf8.DecodeRuneInString(s[j:]); fw != size {
		// An invalid sequence: forward decoding takes it byte by byte.
		return len(s) - 1
	}
	return j
}

// sliceIndices is Python's slice.indices: the first index and how many
// items s[lo:hi:step] has.
func sliceIndices(n int64, lo, hi *int64, step int64) (start, count int64) {
	clamp := func(p *int64, def, lower, upper int64) int64 {
		if p == nil {
			return def
		}
		x := *p
		if x < 0 {
			x += n
			if x < lower {
				x = lower
			}
		} else if x > upper {
			x = upper
		}
		return x
	}
	var stop int64
	if step > 0 {
		start = clamp(lo, 0, 0, n)
		stop = clamp(hi, n, 0, n)
		if stop > start {
			count = (stop-start-1)/step + 1
		}
	} else {
		start = clamp(lo, n-1, -1, n-1)
		stop = clamp(hi, -1, -1, n-1)
		if start > stop {
			count = 1
			if step != math.MinInt64 {
				count += (start - stop - 1) / -step
			}
		}
	}
	return start, count
}

func (ev *evaluator) filter(f *filterExpr, v Value, sc *scope) (Value, error) {
	args, kwargs, err := ev.evalArgs(f.line, f.args, f.kwargs, sc)
	if err != nil {
		return Value{}, err
	}
	return filters[f.name](ev, f.line, v, args, kwargs)
}

// --- arithmetic ---

func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m != 0 && ((m < 0) != (b < 0)) {
		m += b
	}
	return m
}

func typeErr(line int, op string, l, r Value) *Error {
	if l.k == KindUndefined {
		return undefinedErr(line, l)
	}
	if r.k == KindUndefined {
		return undefinedErr(line, r)
	}
	if op == "+" && l.k == KindString {
		return errorf(line, "can only concatenate str (not \"%s\") to str", r.k)
	}
	return errorf(line, "unsupported operand type(s) for %s: '%s' and '%s'", op, l.k, r.k)
}

func (ev *evaluator) binop(line int, op string, l, r Value) (Value, error) {
	if isNumber(l) && isNumber(r) {
		return numOp(line, op, l, r)
	}
	switch op {
	case "+":
		switch {
		case l.k == KindString && r.k == KindString:
			return ev.concat(line, len(l.s)+len(r.s), len(l.t)+len(r.t), l, r)
		case (l.k == KindList || l.k == KindTuple) && l.k == r.k:
			if err := ev.items(line, len(l.l)+len(r.l)); err != nil {
				return Value{}, err
			}
			out := make([]Value, 0, len(l.l)+len(r.l))
			out = append(append(out, l.l...), r.l...)
			return Value{k: l.k, l: out}, nil
		}
	case "*":
		seq, times := l, r
		if isNumber(l) {
			seq, times = r, l
		}
		if times.k == KindInt || times.k == KindBool {
			n := times.n
			if n < 0 || (seq.k == KindString && seq.s == "") || ((seq.k == KindList || seq.k == KindTuple) && len(seq.l) == 0) {
				n = 0
			}
			switch seq.k {
			case KindString:
				if err := ev.checkSize64(line, mulSat(int64(len(seq.s)), n)); err != nil {
					return Value{}, err
				}
				if n == 0 {
					return Str(""), nil
				}
				size, spans := len(seq.s)*int(n), len(seq.t)*int(n)
				if len(seq.t) == 1 && seq.t[0] == (Span{0, len(seq.s)}) {
					spans = 1 // all untrusted: the copies' spans merge
				}
				if err := ev.built(line, size, spans); err != nil {
					return Value{}, err
				}
				if !seq.tainted() {
					return Str(strings.Repeat(seq.s, int(n))), nil
				}
				w := &tstr{buf: make([]byte, 0, size), t: make([]Span, 0, spans)}
				for i := int64(0); i < n; i++ {
					w.add(seq.s, seq.t)
				}
				return w.value(), nil
			case KindList, KindTuple:
				if err := ev.checkSize64(line, mulSat(int64(len(seq.l)), n)); err != nil {
					return Value{}, err
				}
				if err := ev.items(line, len(seq.l)*int(n)); err != nil {
					return Value{}, err
				}
				out := make([]Value, 0, len(seq.l)*int(n))
				for i := int64(0); i < n; i++ {
					out = append(out, seq.l...)
				}
				return Value{k: seq.k, l: out}, nil
			}
		}
	case "%":
		if l.k == KindString {
			return ev.percentFormat(line, l, r)
		}
	}
	return Value{}, typeErr(line, op, l, r)
}

// mulSat is a*b for sizes (a, b >= 0), saturated at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if c, ok := mulInt(a, b); ok {
		return c
	}
	return math.MaxInt64
}

// concat joins parts into one new string of n bytes with at most spans
// taint records, charged before it is built.
func (ev *evaluator) concat(line, n, spans int, parts ...Value) (Value, error) {
	if err := ev.built(line, n, spans); err != nil {
		return Value{}, err
	}
	if n == 0 {
		return Str(""), nil
	}
	w := &tstr{buf: make([]byte, 0, n)}
	if spans > 0 {
		w.t = make([]Span, 0, spans)
	}
	for _, p := range parts {
		w.add(p.s, p.t)
	}
	return w.value(), nil
}

func numOp(line int, op string, l, r Value) (Value, error) {
	if l.k != KindFloat && r.k != KindFloat {
		a, b := l.n, r.n
		switch op {
		case "+":
			if c, ok := addInt(a, b); ok {
				return Int(c), nil
			}
		case "-":
			if b != math.MinInt64 {
				if c, ok := addInt(a, -b); ok {
					return Int(c), nil
				}
			}
		case "*":
			if c, ok := mulInt(a, b); ok {
				return Int(c), nil
			}
		case "/":
			if b == 0 {
				return Value{}, errorf(line, "division by zero")
			}
			return Float(float64(a) / float64(b)), nil
		case "//":
			if b == 0 {
				return Value{}, errorf(line, "integer division or modulo by zero")
			}
			if a == math.MinInt64 && b == -1 {
				break
			}
			return Int(floorDiv(a, b)), nil
		case "%":
			if b == 0 {
				return Value{}, errorf(line, "integer division or modulo by zero")
			}
			if b == -1 {
				return Int(0), nil
			}
			return Int(floorMod(a, b)), nil
		case "**":
			if b < 0 {
				return Float(math.Pow(float64(a), float64(b))), nil
			}
			c := int64(1)
			for i := int64(0); i < b; i++ {
				var ok bool
				if c, ok = mulInt(c, a); !ok {
					return Value{}, errorf(line, "integer overflow")
				}
				if c == 0 || c == 1 && a == 1 {
					break
				}
				if a == -1 {
					if b%2 == 0 {
						c = 1
					} else {
						c = -1
					}
					break
				}
			}
			return Int(c), nil
		}
		return Value{}, errorf(line, "integer overflow")
	}
	a, b := asFloat(l), asFloat(r)
	switch op {
	case "+":
		return Float(a + b), nil
	case "-":
		return Float(a - b), nil
	case "*":
		return Float(a * b), nil
	case "/":
		if b == 0 {
			return Value{}, errorf(line, "float division by zero")
		}
		return Float(a / b), nil
	case "//":
		if b == 0 {
			return Value{}, errorf(line, "float floor division by zero")
		}
		return Float(math.Floor(a / b)), nil
	case "%":
		if b == 0 {
			return Value{}, errorf(line, "float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return Float(m), nil
	case "**":
		return Float(math.Pow(a, b)), nil
	}
	return Value{}, errorf(line, "unknown operator %s", op)
}

// percentFormat is Python's "..." % args for %s, %d, %i, %r, %f and %%.
func (ev *evaluator) percentFormat(line int, f, arg Value) (Value, error) {
	args := []Value{arg}
	if arg.k == KindTuple {
		args = arg.l
	}
	w := &tstr{}
	s := f.s
	next := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			j := strings.IndexByte(s[i:], '%')
			if j < 0 {
				j = len(s)
			} else {
				j += i
			}
			lit := substr(f, i, j)
			if err := ev.put(line, w, lit.s, lit.t); err != nil {
				return Value{}, err
			}
			i = j - 1
			continue
		}
		if err := ev.step(line); err != nil {
			return Value{}, err
		}
		if i+1 >= len(s) {
			return Value{}, errorf(line, "incomplete format")
		}
		i++
		if s[i] == '%' {
			if err := ev.put(line, w, "%", nil); err != nil {
				return Value{}, err
			}
			continue
		}
		if next >= len(args) {
			return Value{}, errorf(line, "not enough arguments for format string")
		}
		a := args[next]
		next++
		var out Value
		switch s[i] {
		case 's':
			v, err := ev.str(line, a)
			if err != nil {
				return Value{}, err
			}
			out = v
		case 'r':
			v, err := ev.repr(line, a)
			if err != nil {
				return Value{}, err
			}
			out = v
		case 'd', 'i':
			if !isNumber(a) {
				return Value{}, errorf(line, "%%d format: a real number is required, not %s", a.k)
			}
			if a.k == KindFloat {
				out = Str(strconv.FormatInt(int64(a.f), 10))
			} else {
				out = Str(strconv.FormatInt(a.n, 10))
			}
		case 'f':
			if !isNumber(a) {
				return Value{}, errorf(line, "must be real number, not %s", a.k)
			}
			out = Str(strconv.FormatFloat(asFloat(a), 'f', 6, 64))
		default:
			return Value{}, errorf(line, "unsupported format character '%c'", s[i])
		}
		if err := ev.put(line, w, out.s, out.t); err != nil {
			return Value{}, err
		}
	}
	if next < len(args) && arg.k == KindTuple {
		return Value{}, errorf(line, "not all arguments converted during string formatting")
	}
	return w.value(), nil
}

// str is Python's str() as Jinja prints a value.
func (ev *evaluator) str(line int, v Value) (Value, error) {
	switch v.k {
	case KindString:
		return v, nil
	case KindUndefined:
		return Str(""), nil
	}
	return ev.repr(line, v)
}

// stopped returns the error that stopped the render, if any: for helpers
// that answer without an error (equal) once a limit is reached.
func (ev *evaluator) stopped() error { return ev.stop }

// typeErrorf turns a TypeError of compare into a template error, its
// message edited by edit; a limit error passes as it is.
func typeErrorf(line int, err error, edit func(string) string) error {
	var je *Error
	if errors.As(err, &je) {
		return err
	}
	return errorf(line, "%s", edit(err.Error()))
}
