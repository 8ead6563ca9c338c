package mlprogram

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// found lists a report's violations as "function op rule" ("function -
// rule" for a function's own, "- - rule" for the package's), sorted.
func found(r *PackageReport) []string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, "- - "+v.Rule)
	}
	for _, f := range r.Functions {
		for _, v := range f.Violations {
			op := v.Op
			if op == "" {
				op = "-"
			}
			out = append(out, fmt.Sprintf("%s %s %s", f.Name, op, v.Rule))
		}
	}
	slices.Sort(out)
	return out
}

// TestAuditNamesEachViolation: on gen.py's violating package, the audit
// names each op that breaks a rule, with the rule, the op's type and
// shapes and the rule's source, and nothing else: not the 20000-wide
// linear (matmul-class ops are exempt), not the enumerated input.
func TestAuditNamesEachViolation(t *testing.T) {
	p, err := OpenPackage(context.Background(), testData(t, "audit-violations.mlpackage"))
	if err != nil {
		t.Fatal(err)
	}
	r := Audit(p, DefaultLimits())
	want := []string{
		"flexible - dynamic-shape",
		"many_ops - op-count",
		"rules argmax_20000 reduction",
		"rules int_add integer",
		"rules tanh_20000 last-axis",
	}
	if got := found(r); !slices.Equal(got, want) {
		t.Fatalf("violations\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Count() != len(want) || !slices.Equal(r.RulesBroken(), []string{RuleDynamicShape, RuleInteger, RuleLastAxis, RuleOpCount, RuleReduction}) {
		t.Errorf("count %d, rules %v", r.Count(), r.RulesBroken())
	}
	details := map[string]Violation{}
	for _, f := range r.Functions {
		for _, v := range f.Violations {
			details[v.Rule] = v
			if v.Source == "" || v.Function != f.Name {
				t.Errorf("%+v: no source or wrong function", v)
			}
		}
	}
	for rule, want := range map[string]struct {
		typ, in, out, detail string
	}{
		RuleLastAxis:     {"tanh", "x=fp16[1,20000]", "tanh_20000: fp16[1,20000]", "last axis of 20000"},
		RuleReduction:    {"reduce_argmax", "x=fp16[1,20000,4]", "argmax_20000: int32[1,4]", "reduces 20000 elements"},
		RuleInteger:      {"add", "x=int32[1,4]", "int_add: int32[1,4]", "int32"},
		RuleDynamicShape: {"", "flex=fp16[1,?]", "", "a range of shapes"},
		RuleOpCount:      {"", "", "", "1801 ops"},
	} {
		v := details[rule]
		if v.OpType != want.typ || !strings.Contains(strings.Join(v.Inputs, " "), want.in) ||
			!strings.Contains(strings.Join(v.Outputs, " "), want.out) || !strings.Contains(v.Detail, want.detail) {
			t.Errorf("%s: %+v, want type %q, input %q, output %q, detail with %q", rule, v, want.typ, want.in, want.out, want.detail)
		}
	}

	// The limits move the thresholds: a package limit below its size, and
	// op and axis limits above the package's.
	l := DefaultLimits()
	l.MaxPackageBytes = p.Bytes - 1
	l.MaxOps = 1801
	l.MaxAxis = 20000
	want = []string{"- - package-bytes", "flexible - dynamic-shape", "rules int_add integer"}
	if got := found(Audit(p, l)); !slices.Equal(got, want) {
		t.Fatalf("with limits %+v: %v, want %v", l, got, want)
	}
}

// TestReduction: the elements a reduction covers, from its axes (a
// literal, a const op's value, the op's default, or every axis when they
// are computed at run time).
func TestReduction(t *testing.T) {
	x := Type{Kind: KindTensor, DType: Float16, Rank: 3, Shape: []int64{2, 3, 5}}
	ints := func(v ...int64) *Literal { return &Literal{Ints: v, NInts: len(v)} }
	scope := map[string]scoped{"x": {t: x}, "axes": {konst: true, lit: ints(0, -1)}, "dyn": {t: Type{Kind: KindTensor, DType: Int32, Rank: 1, Shape: []int64{1}}}}
	op := func(typ string, params ...Param) *Op {
		return &Op{Type: typ, Inputs: append([]Param{{Name: "x", Args: []Binding{{Name: "x"}}}}, params...)}
	}
	for _, c := range []struct {
		op   *Op
		want int64
		ok   bool
	}{
		{op("softmax"), 5, true},
		{op("ios18.reduce_argmax", Param{Name: "axis", Args: []Binding{{Literal: ints(1)}}}), 3, true},
		{op("reduce_sum"), 30, true},
		{op("reduce_max", Param{Name: "axes", Args: []Binding{{Name: "axes"}}}), 10, true},
		{op("layer_norm", Param{Name: "axes", Args: []Binding{{Name: "dyn"}}}), 30, true},
		{op("topk", Param{Name: "axis", Args: []Binding{{Literal: ints(7)}}}), 1, true}, // out of range: nothing reduced
		{op("add"), 0, false},
	} {
		n, how, ok := reduction(c.op, scope)
		if n != c.want || ok != c.ok {
			t.Errorf("%s %+v: %d (%s) %v, want %d %v", c.op.Type, c.op.Inputs, n, how, ok, c.want, c.ok)
		}
	}
}

// TestAuditReductionOnce: a reduction over a last axis past the limit is
// one finding (the reduction rule), not two.
func TestAuditReductionOnce(t *testing.T) {
	x := Type{Kind: KindTensor, DType: Float16, Rank: 3, Shape: []int64{1, 8, 32768}}
	op := &Op{Type: "reduce_argmax", Name: "argmax", Inputs: []Param{{Name: "x", Args: []Binding{{Name: "x"}}}},
		Outputs: []Var{{Name: "argmax", Type: Type{Kind: KindTensor, DType: Int32, Rank: 2, Shape: []int64{1, 8}}}}}
	m := &Model{Functions: []*Function{{Name: "main", Inputs: []Var{{Name: "x", Type: x}}, Block: &Block{Ops: []*Op{op}, Outputs: []string{"argmax"}}}}}
	r := Audit(&Package{Model: m, Blobs: map[BlobRef]Blob{}}, DefaultLimits())
	if got := found(r); !slices.Equal(got, []string{"main argmax reduction"}) {
		t.Fatalf("violations %v, want the reduction only", got)
	}
}
