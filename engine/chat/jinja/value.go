package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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
		if err := d.set(kv[i], kv[i+1]); err != nil {
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

// dict is an insertion-ordered map, like a Python dict.
type dict struct {
	keys []Value
	vals []Value
	idx  map[string]int
}

func newDict(n int) *dict { return &dict{idx: make(map[string]int, n)} }

// hashKey encodes a hashable value so that values Python considers equal
// (1, 1.0 and True) share a key.
func hashKey(v Value) (string, error) {
	switch v.k {
	case KindString:
		return "s" + v.s, nil
	case KindInt, KindBool:
		return "i" + strconv.FormatInt(v.n, 10), nil
	case KindFloat:
		if v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<62 {
			return "i" + strconv.FormatInt(int64(v.f), 10), nil
		}
		return "f" + strconv.FormatUint(math.Float64bits(v.f), 16), nil
	case KindNone:
		return "n", nil
	case KindTuple:
		var b strings.Builder
		b.WriteString("t")
		for _, x := range v.l {
			k, err := hashKey(x)
			if err != nil {
				return "", err
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unhashable type: '%s'", v.k)
}

func (d *dict) set(k, v Value) error {
	h, err := hashKey(k)
	if err != nil {
		return err
	}
	if i, ok := d.idx[h]; ok {
		d.vals[i] = v
		return nil
	}
	d.idx[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

func (d *dict) get(k Value) (Value, bool) {
	h, err := hashKey(k)
	if err != nil {
		return Value{}, false
	}
	i, ok := d.idx[h]
	if !ok {
		return Value{}, false
	}
	return d.vals[i], true
}

func (d *dict) getStr(k string) (Value, bool) {
	i, ok := d.idx["s"+k]
	if !ok {
		return Value{}, false
	}
	return d.vals[i], true
}

func (d *dict) len() int { return len(d.keys) }

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

// equal is Python's ==.
func equal(a, b Value) bool {
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
		return a.s == b.s
	case KindList, KindTuple:
		if len(a.l) != len(b.l) {
			return false
		}
		for i := range a.l {
			if !equal(a.l[i], b.l[i]) {
				return false
			}
		}
		return true
	case KindDict:
		if a.d.len() != b.d.len() {
			return false
		}
		for i, k := range a.d.keys {
			w, ok := b.d.get(k)
			if !ok || !equal(a.d.vals[i], w) {
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
func compare(a, b Value) (int, error) {
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
		switch {
		case a.n < b.n:
			return -1, nil
		case a.n > b.n:
			return 1, nil
		}
		return 0, nil
	}
	if a.k == KindString && b.k == KindString {
		return strings.Compare(a.s, b.s), nil // UTF-8 order is code-point order
	}
	if (a.k == KindList || a.k == KindTuple) && a.k == b.k {
		for i := 0; i < len(a.l) && i < len(b.l); i++ {
			if equal(a.l[i], b.l[i]) {
				continue
			}
			return compare(a.l[i], b.l[i])
		}
		return compareInt(len(a.l), len(b.l)), nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", a.k, b.k)
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortValues sorts in place with Python's ordering (stable), failing on
// values that cannot be ordered.
func sortValues(vs []Value, key func(Value) Value, reverse bool) error {
	var err error
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if key != nil {
			a, b = key(a), key(b)
		}
		if reverse {
			a, b = b, a
		}
		c, e := compare(a, b)
		if e != nil && err == nil {
			err = e
		}
		return c < 0
	})
	return err
}

// --- strings with taint ---

// tstr is a string under construction with its untrusted spans.
type tstr struct {
	b strings.Builder
	t []Span
}

func (w *tstr) add(s string, t []Span) {
	off := w.b.Len()
	w.b.WriteString(s)
	for _, sp := range t {
		w.addSpan(sp.Lo+off, sp.Hi+off)
	}
}

func (w *tstr) addTainted(s string) {
	off := w.b.Len()
	w.b.WriteString(s)
	w.addSpan(off, off+len(s))
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

func (w *tstr) len() int { return w.b.Len() }

func (w *tstr) value() Value { return Value{k: KindString, s: w.b.String(), t: w.t} }

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

// runeOffsets returns the byte offset of every rune of s, plus len(s).
func runeOffsets(s string) []int {
	offs := make([]int, 0, len(s)+1)
	for i := range s {
		offs = append(offs, i)
	}
	return append(offs, len(s))
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }
