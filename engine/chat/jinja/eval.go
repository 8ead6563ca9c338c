package jinja

import (
	"math"
	"strconv"
	"strings"
	"time"
)

type scope struct {
	vars   map[string]Value
	parent *scope
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return Value{}, false
}

func (s *scope) child() *scope { return &scope{vars: map[string]Value{}, parent: s} }

type evaluator struct {
	lim   Limits
	steps int
	depth int
	now   func() time.Time
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

func (ev *evaluator) step(line int) error {
	ev.steps++
	if ev.steps > ev.lim.Steps {
		return errorf(line, "template exceeded %d evaluation steps (a loop that does not end?)", ev.lim.Steps)
	}
	return nil
}

// charge counts n steps of work at once (building n items).
func (ev *evaluator) charge(line, n int) error {
	ev.steps += n
	if ev.steps > ev.lim.Steps || n < 0 {
		return errorf(line, "template exceeded %d evaluation steps (a loop that does not end?)", ev.lim.Steps)
	}
	return nil
}

// built accounts for a new string or list of n bytes or items: it must fit
// the output limit, and copying costs steps (n/64), so a loop that keeps
// rebuilding a large string runs out of steps instead of copying forever.
func (ev *evaluator) built(line, n int) error {
	if err := ev.checkSize(line, n); err != nil {
		return err
	}
	return ev.charge(line, n/64)
}

// checkSize fails when a string or list would grow past the output limit.
func (ev *evaluator) checkSize(line, n int) error {
	if n > ev.lim.Output {
		return errorf(line, "template built a value of %d bytes or items, more than the %d allowed", n, ev.lim.Output)
	}
	return nil
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
	if err := ev.checkSize(line, w.len()+len(v.s)); err != nil {
		return err
	}
	w.add(v.s, v.t)
	return nil
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
		sc.vars[n.m.name] = ev.macro(n.m, sc, nil)
		return nil
	case *callBlockNode:
		caller := ev.macro(n.caller, sc, nil)
		fn, err := ev.eval(n.call.fn, sc)
		if err != nil {
			return err
		}
		args, kwargs, err := ev.evalArgs(n.call.args, n.call.kwargs, sc)
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
		inner := sc.child()
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
		return ns.o.(*Namespace).attrs.set(Str(tg.attr), v)
	}
	if !tg.tuple {
		sc.vars[tg.names[0]] = v
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
		sc.vars[name] = items[i]
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
		for _, item := range items {
			if err := ev.step(line); err != nil {
				return err
			}
			tmp := sc.child()
			if err := ev.assign(line, n.target, item, tmp); err != nil {
				return err
			}
			c, err := ev.eval(n.cond, tmp)
			if err != nil {
				return err
			}
			if truth(c) {
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
	for i, item := range items {
		if err := ev.step(line); err != nil {
			return err
		}
		ls.index0 = i
		body := sc.child()
		body.vars["loop"] = loopVal
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
			if ls.changed != nil && equal(*ls.changed, v) {
				return Bool(false), nil
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
			return Value{}, errorf(line, "macro calls nested more than %d deep", ev.lim.Depth)
		}
		ev.depth++
		defer func() { ev.depth-- }()
		inner := sc.child()
		if len(args) > len(m.params) {
			return Value{}, errorf(line, "macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
		}
		set := make([]bool, len(m.params))
		for i, a := range args {
			inner.vars[m.params[i]] = a
			set[i] = true
		}
		for _, kw := range kwargs {
			found := false
			for i, p := range m.params {
				if p == kw.name {
					if set[i] {
						return Value{}, errorf(line, "macro '%s' got multiple values for argument '%s'", m.name, p)
					}
					inner.vars[p] = kw.v
					set[i] = true
					found = true
				}
			}
			if !found {
				if kw.name == "caller" {
					inner.vars["caller"] = kw.v
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
				inner.vars[p] = v
			} else {
				inner.vars[p] = Undefined(p)
			}
		}
		w := &tstr{}
		if err := ev.nodes(m.body, inner, w); err != nil {
			return Value{}, err
		}
		return w.value(), nil
	}}}
}

func (ev *evaluator) evalArgs(args []expr, kwargs []kwarg, sc *scope) ([]Value, []kwValue, error) {
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
			if err := d.set(k, v); err != nil {
				return Value{}, errorf(line, "%v", err)
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
		args, kwargs, err := ev.evalArgs(x.args, x.kwargs, sc)
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
		args, kwargs, err := ev.evalArgs(x.args, x.kwargs, sc)
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
		w := &tstr{}
		for _, p := range x.parts {
			v, err := ev.eval(p, sc)
			if err != nil {
				return Value{}, err
			}
			s, err := ev.str(line, v)
			if err != nil {
				return Value{}, err
			}
			if err := ev.checkSize(line, w.len()+len(s.s)); err != nil {
				return Value{}, err
			}
			w.add(s.s, s.t)
		}
		if err := ev.built(line, w.len()); err != nil {
			return Value{}, err
		}
		return w.value(), nil
	}
	return Value{}, errorf(line, "internal error: unknown expression %T", x)
}

func (ev *evaluator) compareOp(line int, op string, l, r Value) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
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
	c, err := compare(l, r)
	if err != nil {
		return false, errorf(line, "%s", strings.Replace(err.Error(), "'<'", "'"+op+"'", 1))
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
		return strings.Contains(container.s, item.s), nil
	case KindList, KindTuple:
		for _, x := range container.l {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case KindDict:
		_, ok := container.d.get(item)
		return ok, nil
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
		if err := ev.charge(line, len(v.s)); err != nil {
			return nil, err
		}
		offs := runeOffsets(v.s)
		out := make([]Value, len(offs)-1)
		for i := range out {
			out[i] = substr(v, offs[i], offs[i+1])
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
			return m, nil
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
			return m, nil
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
		if x, ok := v.d.get(k); ok {
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
			offs := runeOffsets(v.s)
			n := int64(len(offs) - 1)
			i := k.n
			if i < 0 {
				i += n
			}
			if i >= 0 && i < n {
				return substr(v, offs[i], offs[i+1]), nil
			}
			return Undefined(""), nil
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
	var n int64
	var offs []int
	switch v.k {
	case KindList, KindTuple:
		n = int64(len(v.l))
	case KindString:
		offs = runeOffsets(v.s)
		n = int64(len(offs) - 1)
	case KindUndefined:
		return Value{}, undefinedErr(line, v)
	default:
		return Undefined(""), nil
	}
	idx := sliceIndices(n, lo, hi, step)
	switch v.k {
	case KindString:
		if step == 1 {
			if len(idx) == 0 {
				return Str(""), nil
			}
			return substr(v, offs[idx[0]], offs[idx[len(idx)-1]+1]), nil
		}
		w := &tstr{}
		for _, i := range idx {
			c := substr(v, offs[i], offs[i+1])
			w.add(c.s, c.t)
		}
		return w.value(), nil
	}
	out := make([]Value, len(idx))
	for j, i := range idx {
		out[j] = v.l[i]
	}
	return Value{k: v.k, l: out}, nil
}

// sliceIndices is Python's slice.indices expanded.
func sliceIndices(n int64, lo, hi *int64, step int64) []int64 {
	var start, stop int64
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
	if step > 0 {
		start = clamp(lo, 0, 0, n)
		stop = clamp(hi, n, 0, n)
	} else {
		start = clamp(lo, n-1, -1, n-1)
		stop = clamp(hi, -1, -1, n-1)
	}
	var out []int64
	if step > 0 {
		for i := start; i < stop; i += step {
			out = append(out, i)
		}
	} else {
		for i := start; i > stop; i += step {
			out = append(out, i)
		}
	}
	return out
}

func (ev *evaluator) filter(f *filterExpr, v Value, sc *scope) (Value, error) {
	args, kwargs, err := ev.evalArgs(f.args, f.kwargs, sc)
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
			if err := ev.built(line, len(l.s)+len(r.s)); err != nil {
				return Value{}, err
			}
			w := &tstr{}
			w.add(l.s, l.t)
			w.add(r.s, r.t)
			return w.value(), nil
		case (l.k == KindList || l.k == KindTuple) && l.k == r.k:
			if err := ev.charge(line, len(l.l)+len(r.l)); err != nil {
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
				if n > 0 && (int64(len(seq.s)) > int64(ev.lim.Output)/n) {
					return Value{}, ev.checkSize(line, ev.lim.Output+1)
				}
				w := &tstr{}
				for i := int64(0); i < n; i++ {
					w.add(seq.s, seq.t)
				}
				if w.len() == 0 {
					return Str(""), nil
				}
				return w.value(), nil
			case KindList, KindTuple:
				if n > 0 && (int64(len(seq.l)) > int64(ev.lim.Steps)/n) {
					return Value{}, ev.charge(line, ev.lim.Steps+1)
				}
				if err := ev.charge(line, int(int64(len(seq.l))*n)); err != nil {
					return Value{}, err
				}
				out := make([]Value, 0, int64(len(seq.l))*n)
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
			c := substr(f, i, i+1)
			w.add(c.s, c.t)
			continue
		}
		if i+1 >= len(s) {
			return Value{}, errorf(line, "incomplete format")
		}
		i++
		if s[i] == '%' {
			w.add("%", nil)
			continue
		}
		if next >= len(args) {
			return Value{}, errorf(line, "not enough arguments for format string")
		}
		a := args[next]
		next++
		switch s[i] {
		case 's':
			v, err := ev.str(line, a)
			if err != nil {
				return Value{}, err
			}
			w.add(v.s, v.t)
		case 'r':
			w.add(derived(pyRepr(a), a).s, derived(pyRepr(a), a).t)
		case 'd', 'i':
			if !isNumber(a) {
				return Value{}, errorf(line, "%%d format: a real number is required, not %s", a.k)
			}
			if a.k == KindFloat {
				w.add(strconv.FormatInt(int64(a.f), 10), nil)
			} else {
				w.add(strconv.FormatInt(a.n, 10), nil)
			}
		case 'f':
			if !isNumber(a) {
				return Value{}, errorf(line, "must be real number, not %s", a.k)
			}
			w.add(strconv.FormatFloat(asFloat(a), 'f', 6, 64), nil)
		default:
			return Value{}, errorf(line, "unsupported format character '%c'", s[i])
		}
		if err := ev.checkSize(line, w.len()); err != nil {
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
	s := pyStr(v)
	if err := ev.checkSize(line, len(s)); err != nil {
		return Value{}, err
	}
	return derived(s, taintOf(v)), nil
}

// taintOf returns an untrusted marker when v holds untrusted text anywhere.
func taintOf(v Value) Value {
	if deepTainted(v, 0) {
		return Untrusted("x")
	}
	return Str("")
}

func deepTainted(v Value, depth int) bool {
	if depth > 64 {
		return true
	}
	switch v.k {
	case KindString:
		return v.tainted()
	case KindList, KindTuple:
		for _, x := range v.l {
			if deepTainted(x, depth+1) {
				return true
			}
		}
	case KindDict:
		for i := range v.d.keys {
			if deepTainted(v.d.keys[i], depth+1) || deepTainted(v.d.vals[i], depth+1) {
				return true
			}
		}
	case KindNamespace:
		return deepTainted(Value{k: KindDict, d: v.o.(*Namespace).attrs}, depth+1)
	}
	return false
}
