package mlcore

import (
	"context"
	"regexp"
	"slices"
	"strings"
)

// Compute plans: where Core ML says each operation of an ML Program runs.
//
// MLComputePlan (macOS 14.4) loads a compiled model's plan for a
// configuration and answers, per operation, the preferred compute device,
// the devices that could run it, and an estimated cost. The walk over the
// plan is darwin code (plan_darwin_arm64.go); what it yields is the plain
// Go ComputePlan below, and everything from there on (which operations
// count, which left the Neural Engine, the totals) is this file's, tested
// on Linux with made-up plans.

// Device is a compute device of a compute plan.
type Device string

// The devices. DeviceNone is an operation the plan gave no usage for
// (Chromium's WebNN notes this "can happen on a 0 weight operation": const
// ops); DeviceUnknown is a device of a class this package does not know.
const (
	DeviceNeuralEngine Device = "ane"
	DeviceGPU          Device = "gpu"
	DeviceCPU          Device = "cpu"
	DeviceUnknown      Device = "unknown"
	DeviceNone         Device = ""
)

// PlanOp is one operation of an ML Program, as its compute plan describes
// it.
type PlanOp struct {
	// Operator is the operator's name, e.g. "ios18.conv" or "const".
	Operator string
	// Output is the name of its first output ("" when it has none): the
	// name the converter gave the value, which says where in the model the
	// operation is.
	Output string
	// Preferred is the device Core ML prefers for it; Supported the devices
	// that can run it.
	Preferred Device
	Supported []Device
	// Cost is MLComputePlanCost.weight, "the estimated workload of
	// executing the operation over the total model execution", in [0, 1];
	// HasCost is false when the plan gave none.
	Cost    float64
	HasCost bool
}

// ComputePlan is a compiled model's compute plan read into Go: every
// function of its program, with its operations in program order (nested
// blocks of loops and conditionals flattened after the operation that owns
// them).
type ComputePlan struct {
	Functions map[string][]PlanOp
}

// A Planner loads compute plans: Core ML on macOS 14.4 or later (New's
// Runtime implements it there; before 14.4 it returns an *OSVersionError).
type Planner interface {
	// ComputePlan loads the plan of the compiled model (.mlmodelc
	// directory) for compute units. It waits for Core ML's completion
	// handler until ctx ends; Core ML's work cannot be interrupted, only
	// abandoned.
	ComputePlan(ctx context.Context, compiled string, units ComputeUnits) (*ComputePlan, error)
}

// Placement is where one function's operations run, summarised from its
// compute plan: what `anechat doctor --bundle` prints and records.
type Placement struct {
	Function string `json:"function"`
	// Ops counts the compute operations: every operation except const and
	// constexpr_* ones (isConstOp), which materialise weights at load and
	// run on no device.
	Ops          int `json:"ops"`
	NeuralEngine int `json:"ane"`
	GPU          int `json:"gpu"`
	CPU          int `json:"cpu"`
	// Unplaced counts compute operations the plan gave no device, or a
	// device of an unknown class.
	Unplaced int `json:"unplaced"`
	// ConstOps counts the operations left out of Ops.
	ConstOps int `json:"const_ops"`
	// Cost is the plan's estimated cost of the function, the sum of every
	// operation's MLComputePlanCost.weight; OffANECost the part of it spent
	// off the Neural Engine.
	Cost       float64 `json:"estimated_cost"`
	OffANECost float64 `json:"off_ane_cost"`
	// OffANE lists the compute operations whose preferred device is not
	// the Neural Engine, in program order.
	OffANE []OffANEOp `json:"off_ane,omitempty"`
}

// OffANEOp is a compute operation that left the Neural Engine.
type OffANEOp struct {
	Output    string   `json:"output"`
	Operator  string   `json:"operator"`
	Device    Device   `json:"device"`
	Supported []Device `json:"supported,omitempty"`
	Cost      float64  `json:"cost"`
}

// iosPrefix is the opset prefix Core ML puts on operator names
// ("ios18.constexpr_lut_to_dense").
var iosPrefix = regexp.MustCompile(`^ios[0-9]+\.`)

// isConstOp reports whether an operator only materialises a constant:
// "const" and every "constexpr_*" (LUT, affine, blockwise, sparse, cast
// decompression), with or without the iosNN. prefix. CoreML-LLM's audit
// counted "ios18.constexpr_lut_to_dense" as compute ops at first, which
// "produced a misleading 91-94%" on the Neural Engine
// (docs/MAC_BENCH_2026-04-19.md, research-ane.md §6); its Swift audit
// strips the prefix and skips these names.
func isConstOp(operator string) bool {
	name := iosPrefix.ReplaceAllString(operator, "")
	return name == "const" || strings.HasPrefix(name, "constexpr_")
}

// Summarize counts a function's operations by preferred device, leaving
// out constant operations, lists those that left the Neural Engine and
// sums the estimated cost.
func Summarize(function string, ops []PlanOp) Placement {
	p := Placement{Function: function}
	for _, op := range ops {
		if op.HasCost {
			p.Cost += op.Cost
		}
		if isConstOp(op.Operator) {
			p.ConstOps++
			continue
		}
		p.Ops++
		switch op.Preferred {
		case DeviceNeuralEngine:
			p.NeuralEngine++
			continue
		case DeviceGPU:
			p.GPU++
		case DeviceCPU:
			p.CPU++
		default:
			p.Unplaced++
		}
		if op.HasCost {
			p.OffANECost += op.Cost
		}
		dev := op.Preferred
		if dev == DeviceNone {
			dev = DeviceUnknown
		}
		p.OffANE = append(p.OffANE, OffANEOp{Output: op.Output, Operator: op.Operator, Device: dev,
			Supported: slices.Clone(op.Supported), Cost: op.Cost})
	}
	return p
}

// SummarizePlan summarises every function of a plan, sorted by name.
func SummarizePlan(plan *ComputePlan) []Placement {
	names := make([]string, 0, len(plan.Functions))
	for name := range plan.Functions {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Placement, len(names))
	for i, name := range names {
		out[i] = Summarize(name, plan.Functions[name])
	}
	return out
}

// OnNeuralEngine is the fraction of compute operations preferring the
// Neural Engine (1 for a function of none).
func (p Placement) OnNeuralEngine() float64 {
	if p.Ops == 0 {
		return 1
	}
	return float64(p.NeuralEngine) / float64(p.Ops)
}
