package mlcore

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

func TestIsConstOp(t *testing.T) {
	for op, want := range map[string]bool{
		"const": true, "ios18.const": true,
		"constexpr_lut_to_dense": true, "ios18.constexpr_lut_to_dense": true,
		"ios16.constexpr_affine_dequantize": true, "ios18.constexpr_blockwise_shift_scale": true,
		"ios17.constexpr_sparse_to_dense": true, "constexpr_cast": true,
		"ios18.conv": false, "linear": false, "ios18.cast": false, "constant_pad": false, "ios18.constant_pad": false,
		"my.const": false, "": false,
	} {
		if got := isConstOp(op); got != want {
			t.Errorf("isConstOp(%q) = %v", op, got)
		}
	}
}

// TestSummarize: a made-up plan shaped like CoreML-LLM's chunk 4 audit (the
// vocabulary tail on the CPU), with LUT decompressions that must not count
// as compute operations, an operation on the GPU and one the plan gave no
// device.
func TestSummarize(t *testing.T) {
	ane := []Device{DeviceNeuralEngine, DeviceCPU}
	ops := []PlanOp{
		{Operator: "const", Output: "w_scale"},
		{Operator: "ios18.constexpr_lut_to_dense", Output: "lm_head_w", Preferred: DeviceCPU, HasCost: true, Cost: 0}, // runs once at load
		{Operator: "ios18.conv", Output: "q", Preferred: DeviceNeuralEngine, Supported: ane, HasCost: true, Cost: 0.25},
		{Operator: "ios18.softmax", Output: "attn", Preferred: DeviceNeuralEngine, Supported: ane, HasCost: true, Cost: 0.5},
		{Operator: "ios18.mul", Output: "logits_scaled", Preferred: DeviceCPU, Supported: []Device{DeviceCPU}, HasCost: true, Cost: 0.125},
		{Operator: "ios18.tanh", Output: "logits_tanh", Preferred: DeviceGPU, Supported: []Device{DeviceGPU, DeviceCPU}, HasCost: true, Cost: 0.0625},
		{Operator: "ios18.reduce_argmax", Output: "argmax", Preferred: DeviceCPU, Supported: []Device{DeviceCPU}},
		{Operator: "ios18.gather_along_axis", Output: "top", Preferred: DeviceNone},
		{Operator: "ios18.squeeze", Output: "odd", Preferred: DeviceUnknown, HasCost: true, Cost: 0.0625},
	}
	p := Summarize("generate_8", ops)
	want := Placement{Function: "generate_8", Ops: 7, NeuralEngine: 2, GPU: 1, CPU: 2, Unplaced: 2, ConstOps: 2,
		Cost: 1, OffANECost: 0.25,
		OffANE: []OffANEOp{
			{Output: "logits_scaled", Operator: "ios18.mul", Device: DeviceCPU, Supported: []Device{DeviceCPU}, Cost: 0.125},
			{Output: "logits_tanh", Operator: "ios18.tanh", Device: DeviceGPU, Supported: []Device{DeviceGPU, DeviceCPU}, Cost: 0.0625},
			{Output: "argmax", Operator: "ios18.reduce_argmax", Device: DeviceCPU, Supported: []Device{DeviceCPU}},
			{Output: "top", Operator: "ios18.gather_along_axis", Device: DeviceUnknown},
			{Output: "odd", Operator: "ios18.squeeze", Device: DeviceUnknown, Cost: 0.0625},
		}}
	if !placementEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	if f := p.OnNeuralEngine(); math.Abs(f-2.0/7) > 1e-12 {
		t.Errorf("on the Neural Engine: %v", f)
	}
	// The supported lists are copies, not the plan's.
	ops[4].Supported[0] = DeviceGPU
	if p.OffANE[0].Supported[0] != DeviceCPU {
		t.Error("Summarize aliases the plan's device lists")
	}
	// The JSON document doctor writes.
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	for _, key := range []string{"function", "ops", "ane", "gpu", "cpu", "unplaced", "const_ops", "estimated_cost", "off_ane_cost", "off_ane"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, raw)
		}
	}
	var back Placement
	if err := json.Unmarshal(raw, &back); err != nil || !placementEqual(back, p) {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
	// All on the Neural Engine: no list, fraction 1; an empty function too.
	all := Summarize("prefill_16", ops[2:4])
	if all.Ops != 2 || all.NeuralEngine != 2 || all.OffANE != nil || all.OnNeuralEngine() != 1 {
		t.Errorf("all on the Neural Engine: %+v", all)
	}
	if e := Summarize("main", nil); e.Ops != 0 || e.OnNeuralEngine() != 1 {
		t.Errorf("empty: %+v", e)
	}
	raw, _ = json.Marshal(all)
	var m2 map[string]any
	if json.Unmarshal(raw, &m2); m2["off_ane"] != nil {
		t.Errorf("an empty list is written: %s", raw)
	}
}

func TestSummarizePlan(t *testing.T) {
	plan := &ComputePlan{Functions: map[string][]PlanOp{
		"prefill_16": {{Operator: "ios18.conv", Preferred: DeviceNeuralEngine}},
		"generate_8": {{Operator: "ios18.conv", Preferred: DeviceCPU}},
	}}
	got := SummarizePlan(plan)
	if len(got) != 2 || got[0].Function != "generate_8" || got[0].CPU != 1 || got[1].Function != "prefill_16" || got[1].NeuralEngine != 1 {
		t.Fatalf("%+v", got)
	}
}

func placementEqual(a, b Placement) bool {
	if a.Function != b.Function || a.Ops != b.Ops || a.NeuralEngine != b.NeuralEngine || a.GPU != b.GPU || a.CPU != b.CPU ||
		a.Unplaced != b.Unplaced || a.ConstOps != b.ConstOps || math.Abs(a.Cost-b.Cost) > 1e-12 || math.Abs(a.OffANECost-b.OffANECost) > 1e-12 {
		return false
	}
	return slices.EqualFunc(a.OffANE, b.OffANE, func(x, y OffANEOp) bool {
		return x.Output == y.Output && x.Operator == y.Operator && x.Device == y.Device && slices.Equal(x.Supported, y.Supported) && x.Cost == y.Cost
	})
}
