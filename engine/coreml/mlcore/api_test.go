package mlcore

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestComputeUnits(t *testing.T) {
	var zero LoadOptions
	if zero.ComputeUnits != ComputeNeuralEngine {
		t.Fatal("the default compute units are not the Neural Engine")
	}
	for in, want := range map[string]ComputeUnits{
		"": ComputeNeuralEngine, "neural-engine": ComputeNeuralEngine, "ANE": ComputeNeuralEngine,
		"gpu": ComputeGPU, " cpu ": ComputeCPU, "all": ComputeAll,
	} {
		got, err := ParseComputeUnits(in)
		if err != nil || got != want {
			t.Errorf("ParseComputeUnits(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseComputeUnits("tpu"); err == nil || !strings.Contains(err.Error(), "want neural-engine, gpu, cpu or all") {
		t.Errorf("tpu: %v", err)
	}
	// Each setting round-trips through its name and maps to the header's
	// MLComputeUnits value (TestTableMatchesHeaders pins those values).
	for c, want := range map[ComputeUnits]struct {
		ml    int
		since string
	}{
		ComputeNeuralEngine: {mlComputeUnitsCPUAndNeuralEngine, "13.0"},
		ComputeGPU:          {mlComputeUnitsCPUAndGPU, ""},
		ComputeCPU:          {mlComputeUnitsCPUOnly, ""},
		ComputeAll:          {mlComputeUnitsAll, ""},
	} {
		ml, since, err := c.mlComputeUnits()
		if err != nil || ml != want.ml || since != want.since {
			t.Errorf("%v: %d %q %v", c, ml, since, err)
		}
		back, err := ParseComputeUnits(c.String())
		if err != nil || back != c {
			t.Errorf("%v does not round-trip: %v %v", c, back, err)
		}
	}
	if _, _, err := ComputeUnits(9).mlComputeUnits(); err == nil {
		t.Error("unknown compute units accepted")
	}
	if ComputeUnits(9).String() != "ComputeUnits(9)" {
		t.Error(ComputeUnits(9).String())
	}
}

func TestCheckIO(t *testing.T) {
	ins := []FeatureSpec{
		{Name: "hidden", MultiArray: true, DType: Float16, Shape: []int{1, 4, 8}},
		{Name: "pos", MultiArray: true, DType: Int32, Shape: []int{4}},
	}
	outs := []FeatureSpec{{Name: "logits", MultiArray: true, DType: Float16, Shape: []int{1, 4, 16}}}
	f16 := func(shape ...int) Buffer {
		n := 1
		for _, d := range shape {
			n *= d
		}
		b, err := NewFloat16(make([]uint16, n), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pos, _ := NewInt32(make([]int32, 4), 4)
	good := func() (map[string]Buffer, map[string]Buffer) {
		return map[string]Buffer{"hidden": f16(1, 4, 8), "pos": pos}, map[string]Buffer{"logits": f16(1, 4, 16)}
	}
	in, out := good()
	if err := checkIO("fn", ins, outs, in, out); err != nil {
		t.Fatalf("valid buffers refused: %v", err)
	}
	for name, c := range map[string]struct {
		edit func(in, out map[string]Buffer)
		want string
	}{
		"missing input":  {func(in, out map[string]Buffer) { delete(in, "pos") }, `fn: no buffer for input pos int32[4]`},
		"missing output": {func(in, out map[string]Buffer) { delete(out, "logits") }, `no buffer for output logits`},
		"extra input":    {func(in, out map[string]Buffer) { in["mask"] = pos }, `fn has no input named "mask" (its inputs: hidden, pos)`},
		"extra output":   {func(in, out map[string]Buffer) { out["kv"] = pos }, `has no output named "kv"`},
		"wrong dtype":    {func(in, out map[string]Buffer) { in["pos"] = f16(4) }, `input "pos" is int32, the buffer is float16`},
		"wrong shape":    {func(in, out map[string]Buffer) { out["logits"] = f16(1, 4, 15) }, `output "logits" has shape [1 4 16], the buffer [1 4 15]`},
		"wrong rank":     {func(in, out map[string]Buffer) { in["hidden"] = f16(4, 8) }, `has shape [1 4 8], the buffer [4 8]`},
		"zero buffer":    {func(in, out map[string]Buffer) { in["hidden"] = Buffer{} }, `the buffer is invalid`},
	} {
		in, out := good()
		c.edit(in, out)
		err := checkIO("fn", ins, outs, in, out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	// A feature that is not a multi-array cannot be passed.
	img := []FeatureSpec{{Name: "image"}}
	if err := checkIO("fn", img, nil, map[string]Buffer{"image": pos}, nil); err == nil || !strings.Contains(err.Error(), "not a multi-array") {
		t.Errorf("image input: %v", err)
	}
}

type fakeNSError struct {
	domain, desc string
	code         int
}

func (e fakeNSError) Domain() string               { return e.domain }
func (e fakeNSError) Code() int                    { return e.code }
func (e fakeNSError) LocalizedDescription() string { return e.desc }

func TestCallError(t *testing.T) {
	err := callError("predictionFromFeatures:options:error:", `function "decode_4" of /m.mlmodelc`,
		fakeNSError{"com.apple.CoreML", "The input feature hidden has the wrong shape.", 0})
	want := `coreml: predictionFromFeatures:options:error: (function "decode_4" of /m.mlmodelc): The input feature hidden has the wrong shape. [com.apple.CoreML 0]`
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	var ns *NSError
	if !errors.As(err, &ns) || ns.Domain != "com.apple.CoreML" || ns.Op != "predictionFromFeatures:options:error:" {
		t.Fatalf("not an *NSError with the fields: %#v", err)
	}
	// nil result, no NSError: still an error that says so.
	err = callError("compileModelAtURL:error:", "/p.mlpackage", nil)
	if err == nil || !strings.Contains(err.Error(), "failed without an NSError") {
		t.Fatalf("no NSError: %v", err)
	}
	// An NSError with an empty description keeps domain and code.
	err = callError("initWithDictionary:error:", "", fakeNSError{"NSCocoaErrorDomain", "", 4})
	if !strings.Contains(err.Error(), "failed (no description) [NSCocoaErrorDomain 4]") {
		t.Fatalf("empty description: %v", err)
	}
}

func TestNewOffMac(t *testing.T) {
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		t.Skip("this is a Mac with Apple silicon: New opens Core ML")
	}
	rt, err := New()
	if rt != nil || err == nil {
		t.Fatalf("New() = %v, %v off a Mac", rt, err)
	}
	want := "Core ML needs macOS on Apple silicon (this is " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if !strings.Contains(err.Error(), want) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("got %v, want %q matching errors.ErrUnsupported", err, want)
	}
}

func TestOSVersion(t *testing.T) {
	for in, want := range map[string]osVersion{"15": {15}, "14.6": {14, 6}, "15.1.1\n": {15, 1, 1}} {
		got, err := parseOSVersion(in)
		if err != nil || got != want {
			t.Errorf("parseOSVersion(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "fifteen", "15.x", "1.2.3.4", "-1"} {
		if _, err := parseOSVersion(in); err == nil {
			t.Errorf("parseOSVersion(%q) accepted", in)
		}
	}
	v146 := osVersion{14, 6}
	// Table-driven: the function name needs macOS 15 (from the table).
	err := requireMethod(v146, selConfigSetFunctionName, "choosing a function of a multifunction model")
	var ve *OSVersionError
	if !errors.As(err, &ve) || err.Error() != "coreml: choosing a function of a multifunction model needs macOS 15.0; this Mac runs macOS 14.6" {
		t.Fatalf("got %v", err)
	}
	if err := requireMethod(osVersion{15, 0, 1}, selConfigSetFunctionName, ""); err != nil {
		t.Fatalf("15.0.1: %v", err)
	}
	if err := requireMethod(osVersion{10, 12}, selInit, ""); err != nil {
		t.Fatalf("an unannotated method needs no version: %v", err)
	}
	if err := requireMethod(osVersion{10, 12}, selModelWithContentsOfURL, ""); err == nil || !strings.Contains(err.Error(), "MLModel modelWithContentsOfURL:configuration:error: needs macOS 10.14") {
		t.Fatalf("default name: %v", err)
	}
	if err := requireSince(osVersion{12, 7}, "13.0", "compute units neural-engine"); err == nil {
		t.Fatal("macOS 12.7 accepted for the Neural Engine setting")
	}
}
