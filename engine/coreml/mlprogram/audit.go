package mlprogram

import (
	"fmt"
	"math"
	"sort"
)

// The audit checks a saved package against the rules that the projects
// which measured Core ML on the Neural Engine (ANE) found to push work off
// it. Each rule below carries its threshold and its source: CoreML-LLM is
// github.com/john-rocky/CoreML-LLM @72178c6, ANEMLL is
// github.com/Anemll/Anemll @6ecb10d with its 0.3.5 files from the fork
// zkh2016/Anemll @fb42f60 (DESIGN.md summarises what they found). Apple
// documents none of these limits except the one on flexible shapes: they
// are what public projects measured or assume, and only Core ML's compute
// plan on a Mac says where each op actually runs. The audit is the cheap
// check that runs everywhere.

// The rules, by the ID a Violation carries.
const (
	// RulePackageBytes: a package larger than Limits.MaxPackageBytes
	// (default 950 MiB).
	RulePackageBytes = "package-bytes"
	// RuleOpCount: a function with more than Limits.MaxOps ops, constants
	// not counted (default 1,800).
	RuleOpCount = "op-count"
	// RuleLastAxis: an op other than linear, matmul and conv whose input
	// or output has a last axis longer than Limits.MaxAxis (16384).
	RuleLastAxis = "last-axis"
	// RuleReduction: a reduction (reduce_*, softmax, topk, argsort,
	// layer_norm) over more than Limits.MaxAxis elements.
	RuleReduction = "reduction"
	// RuleInteger: an op reading an integer value computed at run time.
	RuleInteger = "integer"
	// RuleDynamicShape: a function input whose shape is a range (or not
	// fixed and not enumerated), or an op whose output shape is not fixed
	// in a function whose inputs are.
	RuleDynamicShape = "dynamic-shape"
)

// Sources of the rules, quoted from the projects that measured them.
const (
	sourcePackageBytes = `ANEMLL docs/calc_chunk_split.md: --max-chunk-mb "default 950" (its chunk planner's default); ` +
		`ANEMLL docs/ANE_converter.md: "iOS devices have a 1GB file size limitation for neural network models"; ` +
		`CoreML-LLM docs/DECODE_STATE_LAYOUTS.md §2: a 1.94 GB model ran at "0% ANE placement — Core ML routes to GPU without error"`
	sourceOpCount = `CoreML-LLM docs/THREE_CHUNK_MAC_BENCH.md: its largest working chunk (17 layers) has 1,847 ops ` +
		`("chunk2_3way: 133/1847 ops NOT on Neural Engine", all 133 ios18.constexpr_lut_to_dense), so about 1,714 without ` +
		`constants; no project documents an op limit: 1,800 is that working size, not a measured limit`
	sourceLastAxis = `ANEMLL anemll/models/llama_model.py:179: "ANE tensors dimension size is limited to 16384" (lore, no Apple source); ` +
		`CoreML-LLM docs/EXPERIMENTS.md (MLComputePlan audit, iPhone 17 Pro): the vocabulary tail on the [1,1,262144] logits, ` +
		`"mul (×2), tanh, squeeze (×2), reduce_argmax, expand_dims, gather_along_axis", ran on the CPU while the ` +
		`262144-channel lm_head conv stayed on the ANE (so linear, matmul and conv are exempt)`
	sourceReduction = `CoreML-LLM docs/EXPERIMENTS.md: reduce_argmax over the 262144 logits ran on the CPU; ANEMLL 0.3.5 ` +
		`(docs/RELEASE_NOTES_0.3.5.md, --argmax) "computes argmax per chunk internally", 16 chunks of 16384 ` +
		`(InferenceManager.swift: "MetalArgmax assumes 16 chunks x 16384 each")`
	sourceInteger = `ANEMLL anemll/utils/ANE_PROFILER.md, "Common GPU Fallback Operations": select, ios18.cast (integer type casts), ` +
		`ios18.gather (dynamic indexing), ios18.greater_equal; CoreML-LLM docs/ARCHITECTURE.md: "Eliminates gather / ` +
		`greater_equal (int ops → CPU)"; ANEMLL gemma3_converter.py: "ANE doesn't support int32 for argmax". ` +
		`An integer result may leave the function as an output (an argmax id); an op that reads one is flagged`
	sourceDynamicShape = `Apple, developer.apple.com/forums/thread/724930: "For models with range flexibility, we currently only ` +
		`support running on the Neural Engine for the input's default shape … For enumerated shape flexibility, each shape ` +
		`should be able to run on the Neural Engine."`
)

// RuleInfo describes one rule: its ID, what it checks and its source.
type RuleInfo struct {
	ID     string `json:"id"`
	Checks string `json:"checks"`
	Source string `json:"source"`
}

// Rules lists the audit's rules with the thresholds of l.
func Rules(l Limits) []RuleInfo {
	return []RuleInfo{
		{ID: RulePackageBytes, Checks: fmt.Sprintf("a package of more than %d MiB", l.MaxPackageBytes>>20), Source: sourcePackageBytes},
		{ID: RuleOpCount, Checks: fmt.Sprintf("a function of more than %d ops (constants not counted)", l.MaxOps), Source: sourceOpCount},
		{ID: RuleLastAxis, Checks: fmt.Sprintf("an op other than linear, matmul or conv with an input or output whose last axis is longer than %d", l.MaxAxis), Source: sourceLastAxis},
		{ID: RuleReduction, Checks: fmt.Sprintf("a reduction (reduce_*, softmax, topk, argsort, layer_norm) over more than %d elements", l.MaxAxis), Source: sourceReduction},
		{ID: RuleInteger, Checks: "an op reading an integer value computed at run time", Source: sourceInteger},
		{ID: RuleDynamicShape, Checks: "an input with a range of shapes (or a shape neither fixed nor enumerated), or an op whose output shape is not fixed", Source: sourceDynamicShape},
	}
}

// source returns rule's source.
func source(rule string) string {
	for _, r := range Rules(Limits{}) {
		if r.ID == rule {
			return r.Source
		}
	}
	return ""
}

// Limits are the audit's thresholds.
type Limits struct {
	// MaxPackageBytes is the largest package (all its files).
	MaxPackageBytes int64 `json:"max_package_bytes"`
	// MaxOps is the most ops a function may have, constants not counted.
	MaxOps int `json:"max_ops"`
	// MaxAxis is the longest last axis of a non-matmul op, and the most
	// elements one reduction may cover.
	MaxAxis int64 `json:"max_axis"`
}

// DefaultLimits are the thresholds the sources give: 950 MiB per package
// (ANEMLL's planner default, under iOS's 1 GB), 1,800 ops per function
// (CoreML-LLM's largest working chunk), 16384 elements per axis (ANEMLL).
func DefaultLimits() Limits {
	return Limits{MaxPackageBytes: 950 << 20, MaxOps: 1800, MaxAxis: 16384}
}

// Violation is one thing in a package that breaks a rule.
type Violation struct {
	Rule     string `json:"rule"`
	Function string `json:"function,omitempty"`
	// Op and OpType name the op (empty for package and function rules).
	Op     string `json:"op,omitempty"`
	OpType string `json:"op_type,omitempty"`
	// Inputs are the op's values computed at run time ("x=fp16[1,8,262144]");
	// Outputs its results ("logits: fp16[1,8,262144]").
	Inputs  []string `json:"inputs,omitempty"`
	Outputs []string `json:"outputs,omitempty"`
	// Detail says what breaks the rule, with the numbers.
	Detail string `json:"detail"`
	Source string `json:"source"`
}

// FunctionReport is the audit of one function.
type FunctionReport struct {
	Name string `json:"name"`
	// Ops counts the function's ops, nested blocks included, constants
	// (const, constexpr_*) not included; Constants counts those.
	Ops       int `json:"ops"`
	Constants int `json:"constants"`
	// OpTypes counts the ops by type (without an "iosNN." prefix).
	OpTypes map[string]int `json:"op_types"`
	// WeightBytes is the size of the weight blobs the function reads.
	WeightBytes int64       `json:"weight_bytes"`
	Violations  []Violation `json:"violations"`
}

// PackageReport is the audit of one package.
type PackageReport struct {
	Path string `json:"path"`
	// Bytes is the size of all the package's files.
	Bytes int64 `json:"bytes"`
	// WeightBytes is the size of every weight blob of the package, each
	// counted once (functions share theirs).
	WeightBytes int64            `json:"weight_bytes"`
	Functions   []FunctionReport `json:"functions"`
	// Violations are the package's own (its size).
	Violations []Violation `json:"violations"`
}

// Count is the number of violations in the package and its functions.
func (r *PackageReport) Count() int {
	n := len(r.Violations)
	for _, f := range r.Functions {
		n += len(f.Violations)
	}
	return n
}

// Audit checks the package p against the rules with thresholds l.
func Audit(p *Package, l Limits) *PackageReport {
	r := &PackageReport{Path: p.Path, Bytes: p.Bytes, Violations: []Violation{}}
	for _, b := range p.Blobs {
		r.WeightBytes += b.Size
	}
	if p.Bytes > l.MaxPackageBytes {
		r.Violations = append(r.Violations, Violation{Rule: RulePackageBytes, Source: sourcePackageBytes,
			Detail: fmt.Sprintf("the package holds %d bytes (%.1f MiB), more than %d MiB", p.Bytes, float64(p.Bytes)/(1<<20), l.MaxPackageBytes>>20)})
	}
	for _, fn := range p.Model.Functions {
		r.Functions = append(r.Functions, auditFunction(p, fn, l))
	}
	return r
}

// scoped is what the audit knows of a named value: its type, whether a
// constant op made it, and that constant's literal.
type scoped struct {
	t     Type
	konst bool
	lit   *Literal
}

// auditFunction audits one function.
func auditFunction(p *Package, fn *Function, l Limits) FunctionReport {
	fr := FunctionReport{Name: fn.Name, OpTypes: map[string]int{}, WeightBytes: p.WeightBytes(fn), Violations: []Violation{}}
	scope := map[string]scoped{}
	flexible := false
	for _, in := range fn.Inputs {
		scope[in.Name] = scoped{t: in.Type}
		flex := fn.InputFlex[in.Name]
		if flex == FlexRange || (!in.Type.Fixed() && flex != FlexEnumerated) {
			flexible = true
			fr.Violations = append(fr.Violations, Violation{Rule: RuleDynamicShape, Function: fn.Name, Source: sourceDynamicShape,
				Inputs: []string{in.Name + "=" + in.Type.String()},
				Detail: fmt.Sprintf("input %s (%s) has %s: only its default shape can run on the ANE", in.Name, in.Type, flexName(flex))})
		} else if flex == FlexEnumerated {
			flexible = true // ops see its shape as unknown; each enumerated shape is fixed
		}
	}
	var visit func(blk *Block)
	visit = func(blk *Block) {
		if blk == nil {
			return
		}
		for _, in := range blk.Inputs {
			scope[in.Name] = scoped{t: in.Type}
		}
		for _, op := range blk.Ops {
			konst := op.IsConst()
			for _, o := range op.Outputs {
				s := scoped{t: o.Type, konst: konst}
				if konst && op.BaseType() == "const" {
					s.lit = op.Val
				}
				scope[o.Name] = s
			}
			if konst {
				fr.Constants++
			} else {
				fr.Ops++
				fr.OpTypes[op.BaseType()]++
				fr.Violations = append(fr.Violations, auditOp(fn, op, scope, l, flexible)...)
			}
			for _, b := range op.Blocks {
				visit(b)
			}
		}
	}
	visit(fn.Block)
	if fr.Ops > l.MaxOps {
		fr.Violations = append(fr.Violations, Violation{Rule: RuleOpCount, Function: fn.Name, Source: sourceOpCount,
			Detail: fmt.Sprintf("%d ops (constants not counted), more than %d", fr.Ops, l.MaxOps)})
	}
	return fr
}

// flexName says what a flexible input's shape is.
func flexName(f Flex) string {
	if f == FlexRange {
		return "a range of shapes"
	}
	return "a shape that is not fixed"
}

// runtimeInput is an op's argument computed at run time (a function or
// block input, or a non-constant op's output).
type runtimeInput struct {
	param string
	t     Type
}

// matmulClass are the ops exempt from the last-axis rule: CoreML-LLM's
// 262144-channel lm_head conv ran on the ANE.
func matmulClass(t string) bool {
	switch t {
	case "linear", "matmul", "conv", "conv_transpose":
		return true
	}
	return false
}

// auditOp checks one non-constant op against the per-op rules.
func auditOp(fn *Function, op *Op, scope map[string]scoped, l Limits, flexible bool) []Violation {
	var runtime []runtimeInput
	for _, p := range op.Inputs {
		for _, a := range p.Args {
			if a.Name == "" {
				continue
			}
			if s, ok := scope[a.Name]; ok && !s.konst {
				runtime = append(runtime, runtimeInput{param: p.Name, t: s.t})
			}
		}
	}
	base := op.BaseType()
	var out []Violation
	add := func(rule, detail string) {
		v := Violation{Rule: rule, Function: fn.Name, Op: op.Name, OpType: op.Type, Detail: detail, Source: source(rule)}
		for _, in := range runtime {
			v.Inputs = append(v.Inputs, in.param+"="+in.t.String())
		}
		for _, o := range op.Outputs {
			v.Outputs = append(v.Outputs, o.Name+": "+o.Type.String())
		}
		out = append(out, v)
	}
	tensor := func(t Type) bool { return t.Kind == KindTensor || t.Kind == KindState }

	// RuleReduction: the elements one reduction covers. A reduction
	// breaking it is not reported again under RuleLastAxis (one finding
	// for the one cause, the more specific rule).
	reduces := false
	if n, how, ok := reduction(op, scope); ok && n > l.MaxAxis {
		reduces = true
		add(RuleReduction, fmt.Sprintf("reduces %d elements (%s), more than %d", n, how, l.MaxAxis))
	}

	// RuleLastAxis: the longest last axis among the op's run-time inputs
	// and its outputs.
	if !matmulClass(base) && !reduces {
		var worst int64
		what := ""
		for _, in := range runtime {
			if tensor(in.t) && in.t.Last() > worst {
				worst, what = in.t.Last(), "input "+in.param+" "+in.t.String()
			}
		}
		for _, o := range op.Outputs {
			if tensor(o.Type) && o.Type.Last() > worst {
				worst, what = o.Type.Last(), "output "+o.Name+" "+o.Type.String()
			}
		}
		if worst > l.MaxAxis {
			add(RuleLastAxis, fmt.Sprintf("last axis of %d (%s), longer than %d", worst, what, l.MaxAxis))
		}
	}

	// RuleInteger: an integer value computed at run time, read here.
	for _, in := range runtime {
		if tensor(in.t) && in.t.DType.IsInteger() {
			add(RuleInteger, fmt.Sprintf("reads %s, %s computed at run time", in.param, in.t))
			break
		}
	}

	// RuleDynamicShape: an output whose shape is not fixed although every
	// input's is (a data-dependent shape).
	if !flexible {
		for _, o := range op.Outputs {
			if tensor(o.Type) && !o.Type.Fixed() {
				add(RuleDynamicShape, fmt.Sprintf("output %s has the shape %s, not fixed", o.Name, o.Type))
				break
			}
		}
	}
	return out
}

// reduction returns how many elements each reduction of op covers when
// op is a reduction whose input shape is known: the product of the input's
// sizes along the reduced axes (all of them when the axes are computed at
// run time, an upper bound), and how that was found.
func reduction(op *Op, scope map[string]scoped) (int64, string, bool) {
	base := op.BaseType()
	param, all := "", false // the axes parameter; all: reduce every axis when it is absent
	switch base {
	case "reduce_argmax", "reduce_argmin", "softmax", "topk", "argsort":
		param = "axis"
	case "layer_norm":
		param, all = "axes", true
	default:
		if len(base) > 7 && base[:7] == "reduce_" {
			param, all = "axes", true
		} else {
			return 0, "", false
		}
	}
	x := op.Input("x")
	if len(x) != 1 {
		return 0, "", false
	}
	var xt Type
	if x[0].Literal != nil {
		xt = x[0].Literal.Type
	} else if s, ok := scope[x[0].Name]; ok {
		xt = s.t
	}
	if !xt.Fixed() || (xt.Kind != KindTensor && xt.Kind != KindState) {
		return 0, "", false // unknown: the dynamic-shape rule speaks
	}
	rank := len(xt.Shape)
	axes := []int64{-1}
	how := "axis -1 (the default)"
	if all {
		axes, how = nil, "every axis (no axes given)"
		for i := range rank {
			axes = append(axes, int64(i))
		}
	}
	if args := op.Input(param); len(args) == 1 {
		lit := args[0].Literal
		if lit == nil {
			lit = scope[args[0].Name].lit
		}
		switch {
		case lit == nil:
			axes, how = nil, param+" computed at run time: every axis counted"
			for i := range rank {
				axes = append(axes, int64(i))
			}
		case lit.NInts > 0 && lit.NInts == len(lit.Ints):
			axes, how = lit.Ints, fmt.Sprintf("%s %v of %s", param, lit.Ints, xt)
		}
	}
	seen := map[int64]bool{}
	n := int64(1)
	for _, a := range axes {
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a >= int64(rank) || seen[a] {
			continue
		}
		seen[a] = true
		d := xt.Shape[a]
		if d != 0 && n > math.MaxInt64/d {
			n = math.MaxInt64
			continue
		}
		n *= d
	}
	if rank == 0 {
		return 1, how, true
	}
	return n, how, true
}

// RulesBroken lists the rules r's violations break, sorted, each once.
func (r *PackageReport) RulesBroken() []string {
	set := map[string]bool{}
	for _, v := range r.Violations {
		set[v.Rule] = true
	}
	for _, f := range r.Functions {
		for _, v := range f.Violations {
			set[v.Rule] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
