package mlcore

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Runtime is Core ML on this machine. New returns the one for this
// platform: Core ML through purego on darwin/arm64, an *UnsupportedError
// elsewhere.
type Runtime interface {
	// Compile compiles a model package (.mlpackage directory or .mlmodel
	// file) for this machine and returns the .mlmodelc directory Core ML
	// wrote to a temporary location; the caller owns it (Cache moves it
	// into the cache). It is not cancellable once Core ML has started.
	Compile(ctx context.Context, pkg string) (string, error)
	// Load loads one function of a compiled model (.mlmodelc directory).
	Load(ctx context.Context, compiled string, opts LoadOptions) (Function, error)
}

// Function is one function of a loaded Core ML model: fixed-shape inputs
// and outputs, called on host buffers.
type Function interface {
	// Inputs and Outputs describe the function's features, sorted by name.
	Inputs() []FeatureSpec
	Outputs() []FeatureSpec
	// Predict runs the function once. inputs must hold a buffer for every
	// input and outputs one for every output, each with the feature's
	// element type and shape; Core ML reads the inputs and writes the
	// outputs in place (an output Core ML wrote elsewhere is copied in and
	// counted in Stats.OutputCopies). Predict checks ctx before it starts;
	// the Core ML call itself cannot be interrupted. Calls on one Function
	// are serialized. The buffers must not be touched by anyone else until
	// Predict returns.
	Predict(ctx context.Context, inputs, outputs map[string]Buffer) error
	// Stats returns the function's counters.
	Stats() Stats
	// Close releases the model. A closed Function refuses Predict.
	Close() error
}

// Stats counts what a Function did.
type Stats struct {
	Calls        int64 // successful Predict calls
	OutputCopies int64 // outputs Core ML wrote into memory of its own, copied into the host buffer
}

// LoadOptions says how to load a function.
type LoadOptions struct {
	// ComputeUnits says where Core ML may run it; the zero value is
	// ComputeNeuralEngine.
	ComputeUnits ComputeUnits
	// FunctionName selects a function of a multifunction package (macOS
	// 15); "" loads the default function.
	FunctionName string
}

// ComputeUnits says which processors Core ML may use. The zero value is the
// backend's default, the CPU and the Neural Engine.
type ComputeUnits int

// The settings, each mapped to one MLComputeUnits value.
const (
	ComputeNeuralEngine ComputeUnits = iota // MLComputeUnitsCPUAndNeuralEngine (macOS 13)
	ComputeGPU                              // MLComputeUnitsCPUAndGPU
	ComputeCPU                              // MLComputeUnitsCPUOnly
	ComputeAll                              // MLComputeUnitsAll: Core ML chooses
)

var computeUnitNames = [...]string{
	ComputeNeuralEngine: "neural-engine",
	ComputeGPU:          "gpu",
	ComputeCPU:          "cpu",
	ComputeAll:          "all",
}

// String returns the setting's name as ParseComputeUnits reads it.
func (c ComputeUnits) String() string {
	if c < 0 || int(c) >= len(computeUnitNames) {
		return fmt.Sprintf("ComputeUnits(%d)", int(c))
	}
	return computeUnitNames[c]
}

// ParseComputeUnits reads a setting: "neural-engine" (or "ane", or empty
// for the default), "gpu", "cpu" or "all".
func ParseComputeUnits(s string) (ComputeUnits, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "neural-engine", "ane":
		return ComputeNeuralEngine, nil
	case "gpu":
		return ComputeGPU, nil
	case "cpu":
		return ComputeCPU, nil
	case "all":
		return ComputeAll, nil
	}
	return 0, fmt.Errorf("mlcore: compute units %q: want neural-engine, gpu, cpu or all", s)
}

// mlComputeUnits returns the MLComputeUnits value, and the first macOS that
// has it ("" = any).
func (c ComputeUnits) mlComputeUnits() (int, string, error) {
	switch c {
	case ComputeNeuralEngine:
		return mlComputeUnitsCPUAndNeuralEngine, enumSince("MLComputeUnitsCPUAndNeuralEngine"), nil
	case ComputeGPU:
		return mlComputeUnitsCPUAndGPU, "", nil
	case ComputeCPU:
		return mlComputeUnitsCPUOnly, "", nil
	case ComputeAll:
		return mlComputeUnitsAll, "", nil
	}
	return 0, "", fmt.Errorf("mlcore: unknown compute units %d", int(c))
}

// FeatureSpec describes one input or output of a function, as Core ML's
// model description gives it.
type FeatureSpec struct {
	Name string
	// MultiArray is false for features that are not multi-arrays (images,
	// strings, ...), which this package cannot pass; DType and Shape are
	// then unset.
	MultiArray bool
	DType      DType
	// Shape is the constraint's shape. The backend's functions have fixed
	// shapes, and Predict requires buffers of exactly this shape.
	Shape []int
}

// String returns "name dtype[shape]".
func (f FeatureSpec) String() string {
	if !f.MultiArray {
		return f.Name + " (not a multi-array)"
	}
	return fmt.Sprintf("%s %v%v", f.Name, f.DType, f.Shape)
}

// checkIO checks buffers against a function's description before any Core
// ML call: every input and output has exactly one buffer of its feature's
// element type and shape, and no buffer names a feature the function does
// not have. subject names the function for messages.
func checkIO(subject string, ins, outs []FeatureSpec, inputs, outputs map[string]Buffer) error {
	if err := checkSide(subject, "input", ins, inputs); err != nil {
		return err
	}
	return checkSide(subject, "output", outs, outputs)
}

func checkSide(subject, side string, specs []FeatureSpec, bufs map[string]Buffer) error {
	known := make(map[string]bool, len(specs))
	for _, f := range specs {
		known[f.Name] = true
		b, ok := bufs[f.Name]
		if !ok {
			return fmt.Errorf("mlcore: %s: no buffer for %s %s (want one for every %s)", subject, side, f, side)
		}
		if !f.MultiArray {
			return fmt.Errorf("mlcore: %s: %s %q is not a multi-array; only multi-array features are supported", subject, side, f.Name)
		}
		if !b.valid() {
			return fmt.Errorf("mlcore: %s: %s %q: the buffer is invalid (use NewFloat16, NewFloat32, NewInt32 or Alloc)", subject, side, f.Name)
		}
		if b.dtype != f.DType {
			return fmt.Errorf("mlcore: %s: %s %q is %v, the buffer is %v", subject, side, f.Name, f.DType, b.dtype)
		}
		if !slices.Equal(b.shape, f.Shape) {
			return fmt.Errorf("mlcore: %s: %s %q has shape %v, the buffer %v", subject, side, f.Name, f.Shape, b.shape)
		}
	}
	var extra []string
	for name := range bufs {
		if !known[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		names := make([]string, len(specs))
		for i, f := range specs {
			names[i] = f.Name
		}
		return fmt.Errorf("mlcore: %s has no %s named %q (its %ss: %s)", subject, side, extra[0], side, strings.Join(names, ", "))
	}
	return nil
}

// sortSpecs orders feature specs by name, the order Function reports.
func sortSpecs(f []FeatureSpec) {
	slices.SortFunc(f, func(a, b FeatureSpec) int { return strings.Compare(a.Name, b.Name) })
}
