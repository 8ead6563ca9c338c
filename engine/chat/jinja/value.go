package jinja

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Kind is the type of a Value, after Python's types as Jinja sees them.
type Kind uint8

// The kinds of values a template works with.
const (
	KindUndefined Kind = iota // a name or key that does not exist
	KindNone                  // Python None
	KindBool
	KindInt
	KindFloat
	KindString
	KindList
	KindTuple
	KindDict
	KindNamespace // namespace(...): the one mutable object
	KindCallable  // macros, globals, bound methods
	KindLoop      // the loop variable of a for loop
)

var kindNames = [...]string{"undefined", "NoneType", "bool", "int", "float", "str", "list", "tuple", "dict", "Namespace", "function", "LoopContext"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind" + strconv.Itoa(int(k))
}

// Span is a byte range [Lo, Hi) of a string.
type Span struct{ Lo, Hi int }

// Value is a template value. Strings carry the byte ranges that came from
// untrusted input (message text), so that the caller can tell the
// template's own text from what users wrote after rendering. Lists, tuples
// and dicts are immutable once built, as in Hugging Face's
// ImmutableSandboxedEnvironment.
type Value struct {
	k Kind
	n int64   // Int; Bool as 0/1
	f float64 // Float
	s string  // String; for Undefined, the name that was looked up
	t []Span  // untrusted byte ranges of s, sorted and disjoint
	l []Value // List, Tuple
	d *dict
	o any // *Namespace, *callable, *loopState
}

// Constructors for values passed into a template.

// Undefined is the value of a name that does not exist.
func Undefined(name string) Value { return Value{k: KindUndefined, s: name} }

// None is Python's None.
func None() Value { return Value{k: KindNone} }

// Bool makes a boolean.
func Bool(b bool) Value {
	if b {
		return Value{k: KindBool, n: 1}
	}
	return Value{k: KindBool}
}

// Int makes an integer.
func Int(n int64) Value { return Value{k: KindInt, n: n} }

// Float makes a float.
func Float(f float64) Value { return Value{k: KindFloat, f: f} }

// Str makes a trusted string (text the template's caller vouches for).
func Str(s string) Value { return Value{k: KindString, s: s} }

// Untrusted makes a string whose every byte is untrusted input.
func Untrusted(s string) Value {
	if s == "" {
		return Value{k: KindString}
	}
	return Value{k: KindString, s: s, t: []Span{{0, len(s)}}}
}

// List makes a list.
func List(items ...Value) Value { return Value{k: KindList, l: items} }

// Dict makes a dict from alternating keys and values (keys must be
// hashable: strings, numbers, booleans or None). It panics on an odd count
// or an unhashable key, which is a programming error of the caller.
func Dict(kv ...Value) Value {
	if len(kv)%2 != 0 {
		panic("jinja.Dict: odd number of arguments")
	}
	d := newDict(len(kv) / 2)
	for i := 0; i < len(kv); i += 2 {
		if err := d.set(nil, 0, kv[i], kv[i+1]); err != nil {
			panic("jinja.Dict: " + err.Error())
		}
	}
	return Value{k: KindDict, d: d}
}

// Kind reports the value's kind.
func (v Value) Kind() Kind { return v.k }

// IsUndefined reports whether v is undefined.
func (v Value) IsUndefined() bool { return v.k == KindUndefined }

func (v Value) tainted() bool { return len(v.t) > 0 }

// dict is an insertion-ordered map, like a Python dict. String keys (nearly
// all keys in chat templates) are indexed by their text, other keys by their
// hashKey encoding.
type dict struct {
	keys  []Value
	vals  []Value
	strs  map[string]int
	other map[string]int
}

func newDict(n int) *dict { return &dict{strs: make(map[string]int, n)} }

// keyOf returns the index that holds k and k's text in it. A nil evaluator
// charges nothing (the caller's own values, Dict).
func keyOf(ev *evaluator, line int, k Value) (str bool, h string, err error) {
	if ev != nil {
		if err := ev.step(line); err != nil {
			return false, "", err
		}
	}
	if k.k == KindString {
		if ev != nil {
			// Hashing the key reads it.
			if err := ev.touch(line, len(k.s)); err != nil {
				return false, "", err
			}
		}
		return true, k.s, nil
	}
	h, err = hashKey(ev, line, k)
	return false, h, err
}

func (d *dict) index(str bool) map[string]int {
	if str {
		return d.strs
	}
	return d.other
}

func (d *dict) set(ev *evaluator, line int, k, v Value) error {
	str, h, err := keyOf(ev, line, k)
	if err != nil {
		return err
	}
	if i, ok := d.index(str)[h]; ok {
		d.vals[i] = v
		return nil
	}
	if ev != nil {
		if err := ev.alloc(line, entrySize); err != nil {
			return err
		}
	}
	if str {
		if d.strs == nil {
			d.strs = map[string]int{}
		}
		d.strs[h] = len(d.keys)
	} else {
		if d.other == nil {
			d.other = map[string]int{}
		}
		d.other[h] = len(d.keys)
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// get looks k up; an unhashable key is not found (an error only when a
// limit stopped the render).
func (d *dict) get(ev *evaluator, line int, k Value) (Value, bool, error) {
	str, h, err := keyOf(ev, line, k)
	if err != nil {
		var je *Error
		if errors.As(err, &je) && je.Err != nil {
			return Value{}, false, err
		}
		return Value{}, false, nil
	}
	i, ok := d.index(str)[h]
	if !ok {
		return Value{}, false, nil
	}
	return d.vals[i], true, nil
}

func (d *dict) getStr(k string) (Value, bool) {
	i, ok := d.strs[k]
	if !ok {
		return Value{}, false
	}
	return d.vals[i], true
}

func (d *dict) len() int { return len(d.keys) }

// hashKey encodes a hashable value other than a string (numbers, None,
// tuples) so that values Python considers equal (1, 1.0 and True) share a
// key. The encoding is prefix-free: a tuple is its length and its
// elements' encodings, a string in a tuple its length and its bytes. Its
// size is worked out, within the limits, before it is built.
func hashKey(ev *evaluator, line int, v Value) (string, error) {
	limit := math.MaxInt
	if ev != nil {
		limit = min(ev.lim.Output, ev.lim.Steps)
	}
	var ks keySizer
	ks.limit = limit
	if err := ks.size(line, v, 0); err != nil {
		return "", err
	}
	if ev != nil {
		if ks.n > limit || ks.nodes > limit {
			return "", ev.fail(limitErr(line, "template built a dict key of more than %d bytes or %d values", limit, limit))
		}
		if err := ev.charge(line, ks.nodes); err != nil {
			return "", err
		}
		if err := ev.built(line, ks.n, 0); err != nil {
			return "", err
		}
	}
	b := make([]byte, 0, ks.n)
	return string(appendKey(b, v)), nil
}

// keySizer adds up the size of a key's encoding, stopping once it passes
// limit (a tuple that holds the same big tuple twice, many levels deep, is
// small to build and huge to encode).
type keySizer struct {
	n, nodes, limit int
}

func (ks *keySizer) size(line int, v Value, depth int) error {
	ks.nodes++
	if ks.n > ks.limit || ks.nodes > ks.limit {
		return nil
	}
	switch v.k {
	case KindString:
		ks.n += 2 + digits(len(v.s)) + len(v.s)
	case KindInt, KindBool:
		ks.n += 2 + len(strconv.FormatInt(v.n, 10))
	case KindFloat:
		ks.n += 2 + 16 + 1
	case KindNone:
		ks.n++
	case KindTuple:
		if depth >= maxNest {
			return limitErr(line, "values nested more than %d deep", maxNest)
		}
		ks.n += 2 + digits(len(v.l))
		for _, x := range v.l {
			if err := ks.size(line, x, depth+1); err != nil {
				return err
			}
			if ks.n > ks.limit {
				return nil
			}
		}
	default:
		return errorf(line, "unhashable type: '%s'", v.k)
	}
	return nil
}

func digits(n int) int { return len(strconv.Itoa(n)) }

func appendKey(b []byte, v Value) []byte {
	switch v.k {
	case KindString:
		b = append(b, 's')
		b = strconv.AppendInt(b, int64(len(v.s)), 10)
		b = append(b, ':')
		return append(b, v.s...)
	case KindInt, KindBool:
		b = append(b, 'i')
		return append(strconv.AppendInt(b, v.n, 10), ';')
	case KindFloat:
		if v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<62 {
			b = append(b, 'i')
			return append(strconv.AppendInt(b, int64(v.f), 10), ';')
		}
		b = append(b, 'f')
		return append(strconv.AppendUint(b, math.Float64bits(v.f), 16), ';')
	case KindNone:
		return append(b, 'n')
	case KindTuple:
		b = append(b, 't')
		b = strconv.AppendInt(b, int64(len(v.l)), 10)
		b = append(b, ':')
		for _, x := range v.l {
			b = appendKey(b, x)
		}
	}
	return b
}

// Namespace is the object namespace() returns: attributes that `set
// ns.attr = …` may change, the one way a template carries state out of a
// loop.
type Namespace struct{ attrs *dict }

// truth is Python's truthiness.
func truth(v Value) bool {
	switch v.k {
	case KindUndefined, KindNone:
		return false
	case KindBool, KindInt:
		return v.n != 0
	case KindFloat:
		return v.f != 0
	case KindString:
		return v.s != ""
	case KindList, KindTuple:
		return len(v.l) > 0
	case KindDict:
		return v.d.len() > 0
	}
	return true
}

// isNumber: bool, int and float (bool is an int in Python).
func isNumber(v Value) bool { return v.k == KindBool || v.k == KindInt || v.k == KindFloat }

func asFloat(v Value) float64 {
	if v.k == KindFloat {
		return v.f
	}
	return float64(v.n)
}

// equal is Python's ==, charged by what it compares. Once a limit stops
// the render it answers false at once (the render ends with the error).
func (ev *evaluator) equal(line int, a, b Value) bool { return ev.eq(line, a, b, 0) }

func (ev *evaluator) eq(line int, a, b Value, depth int) bool {
	if ev.step(line) != nil {
		return false
	}
	if isNumber(a) && isNumber(b) {
		if a.k == KindFloat || b.k == KindFloat {
			return asFloat(a) == asFloat(b)
		}
		return a.n == b.n
	}
	switch {
	case a.k == KindUndefined || b.k == KindUndefined:
		return a.k == b.k
	case a.k != b.k:
		return false
	}
	switch a.k {
	case KindNone:
		return true
	case KindString:
		if len(a.s) != len(b.s) {
			return false
		}
		if ev.touch(line, len(a.s)) != nil {
			return false
		}
		return a.s == b.s
	case KindList, KindTuple:
		if len(a.l) != len(b.l) {
			return false
		}
		if depth >= maxNest {
			ev.fail(limitErr(line, "values nested more than %d deep", maxNest))
			return false
		}
		for i := range a.l {
			if !ev.eq(line, a.l[i], b.l[i], depth+1) {
				return false
			}
		}
		return true
	case KindDict:
		if a.d.len() != b.d.len() {
			return false
		}
		if depth >= maxNest {
			ev.fail(limitErr(line, "values nested more than %d deep", maxNest))
			return false
		}
		for i, k := range a.d.keys {
			w, ok, err := b.d.get(ev, line, k)
			if err != nil || !ok || !ev.eq(line, a.d.vals[i], w, depth+1) {
				return false
			}
		}
		return true
	case KindNamespace, KindCallable, KindLoop:
		return a.o == b.o
	}
	return false
}

// compare is Python's ordering (<): numbers, strings, and lists/tuples
// lexicographically; anything else is a TypeError.
func (ev *evaluator) compare(line int, a, b Value) (int, error) {
	return ev.cmp(line, a, b, 0)
}

func (ev *evaluator) cmp(line int, a, b Value, depth int) (int, error) {
	if err := ev.step(line); err != nil {
		return 0, err
	}
	if isNumber(a) && isNumber(b) {
		if a.k == KindFloat || b.k == KindFloat {
			x, y := asFloat(a), asFloat(b)
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
		return compareInt64(a.n, b.n), nil
	}
	if a.k == KindString && b.k == KindString {
		if err := ev.touch(line, min(len(a.s), len(b.s))); err != nil {
			return 0, err
		}
		return strings.Compare(a.s, b.s), nil // UTF-8 order is code-point order
	}
	if (a.k == KindList || a.k == KindTuple) && a.k == b.k {
		if depth >= maxNest {
			return 0, ev.fail(limitErr(line, "values nested more than %d deep", maxNest))
		}
		for i := 0; i < len(a.l) && i < len(b.l); i++ {
			if ev.eq(line, a.l[i], b.l[i], depth+1) {
				continue
			}
			if ev.stop != nil {
				return 0, ev.stop
			}
			return ev.cmp(line, a.l[i], b.l[i], depth+1)
		}
		if ev.stop != nil {
			return 0, ev.stop
		}
		return compareInt(len(a.l), len(b.l)), nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", a.k, b.k)
}

func compareInt(a, b int) int { return compareInt64(int64(a), int64(b)) }

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortValues sorts vs in place with Python's ordering (stable, and
// reverse keeps equal items in their order, as Python's does), by key(v)
// when key is not nil (each key computed once). It fails on values that
// cannot be ordered, and stops as soon as a limit is reached: it is a
// merge sort of its own because sort.Stable cannot be stopped.
func (ev *evaluator) sortValues(line int, vs []Value, key func(Value) (Value, error), reverse bool) error {
	n := len(vs)
	if n < 2 {
		return nil
	}
	keys := vs
	if key != nil {
		if err := ev.items(line, n); err != nil {
			return err
		}
		keys = make([]Value, n)
		for i, v := range vs {
			k, err := key(v)
			if err != nil {
				return err
			}
			keys[i] = k
		}
	}
	if err := ev.alloc(line, 16*n+n*valueSize); err != nil {
		return err
	}
	idx, tmp := make([]int, n), make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var err error
	// before reports whether item j goes strictly before item i.
	before := func(j, i int) bool {
		a, b := keys[j], keys[i]
		if reverse {
			a, b = b, a
		}
		c, e := ev.compare(line, a, b)
		if e != nil {
			err = e
		}
		return c < 0
	}
	for width := 1; width < n && err == nil; width *= 2 {
		for lo := 0; lo < n && err == nil; lo += 2 * width {
			mid, hi := min(lo+width, n), min(lo+2*width, n)
			i, j, o := lo, mid, lo
			for i < mid && j < hi && err == nil {
				if before(idx[j], idx[i]) {
					tmp[o] = idx[j]
					j++
				} else {
					tmp[o] = idx[i]
					i++
				}
				o++
			}
			o += copy(tmp[o:], idx[i:mid])
			copy(tmp[o:], idx[j:hi])
		}
		idx, tmp = tmp, idx
	}
	if err != nil {
		return err
	}
	sorted := make([]Value, n)
	for o, i := range idx {
		sorted[o] = vs[i]
	}
	copy(vs, sorted)
	return nil
}

// --- strings with taint ---

// tstr is a string under construction with its untrusted spans. The
// evaluator grows it (evaluator.put), so that what it allocates is
// charged; value ends it.
type tstr struct {
	buf []byte
	t   []Span
}

func (w *tstr) grow(c int) {
	b := make([]byte, len(w.buf), c)
	copy(b, w.buf)
	w.buf = b
}

func (w *tstr) growSpans(c int) {
	t := make([]Span, len(w.t), c)
	copy(t, w.t)
	w.t = t
}

func (w *tstr) add(s string, t []Span) {
	off := len(w.buf)
	w.buf = append(w.buf, s...)
	for _, sp := range t {
		w.addSpan(sp.Lo+off, sp.Hi+off)
	}
}

func (w *tstr) addSpan(lo, hi int) {
	if lo >= hi {
		return
	}
	if n := len(w.t); n > 0 && w.t[n-1].Hi >= lo {
		if hi > w.t[n-1].Hi {
			w.t[n-1].Hi = hi
		}
		return
	}
	w.t = append(w.t, Span{lo, hi})
}

func (w *tstr) len() int { return len(w.buf) }

// value returns the string built; the tstr must not be written after.
func (w *tstr) value() Value {
	if len(w.buf) == 0 {
		return Value{k: KindString}
	}
	s := unsafe.String(unsafe.SliceData(w.buf), len(w.buf))
	w.buf = nil
	return Value{k: KindString, s: s, t: w.t}
}

// substr returns s[lo:hi] (bytes) with its spans.
func substr(v Value, lo, hi int) Value {
	out := Value{k: KindString, s: v.s[lo:hi]}
	for _, sp := range v.t {
		a, b := max(sp.Lo, lo), min(sp.Hi, hi)
		if a < b {
			out.t = append(out.t, Span{a - lo, b - lo})
		}
	}
	return out
}

// derived returns s as a new string that is untrusted wholly if any input is.
func derived(s string, from ...Value) Value {
	for _, f := range from {
		if f.tainted() {
			return Untrusted(s)
		}
	}
	return Str(s)
}

// taintedAt reports whether any byte of [lo, hi) is in one of the sorted,
// disjoint spans.
func taintedAt(spans []Span, lo, hi int) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > lo })
	return i < len(spans) && spans[i].Lo < hi
}

// runeIndex returns the byte offset of rune i of s (len(s) when s has i
// runes, -1 when fewer), charging the bytes it walks.
func (ev *evaluator) runeIndex(line int, s string, i int64) (int, error) {
	if i == 0 {
		return 0, nil
	}
	n := int64(0)
	for off := range s {
		if n == i {
			return off, ev.touch(line, off)
		}
		n++
	}
	if err := ev.touch(line, len(s)); err != nil {
		return 0, err
	}
	if n == i {
		return len(s), nil
	}
	return -1, nil
}

// runeCount counts the runes of s, charging the bytes it reads.
func (ev *evaluator) runeCount(line int, s string) (int, error) {
	if err := ev.touch(line, len(s)); err != nil {
		return 0, err
	}
	return utf8.RuneCountInString(s), nil
}
