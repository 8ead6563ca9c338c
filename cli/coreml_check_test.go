package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/internal/testres"
)

func coremlData(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testres.RepoRoot(t), "build", "testdeps", "coreml", name)
	return testres.Require(t, p, "Core ML test bundles", "run build/scripts/deps-coreml.sh and deps-coremlhost.sh (make test runs them)")
}

// TestDoctorBundle: `anechat doctor --bundle` with the reference executor
// loads the bundle, finds speculation on and off byte-identical and the
// generation functions' rows independent, and prints latency per call
// kind and width; without a Neural Engine and without --reference it says
// plainly that the Neural Engine is not available and what runs instead.
func TestDoctorBundle(t *testing.T) {
	bundle := coremlData(t, "gemma4-exact.bundle")
	code, out, errOut := doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle, "--reference", coremlData(t, "gemma4-exact"), "--tokens", "16")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"runs on:   reference (CPU kernels, float32)", "identity:  yes: 5 of 5 prompts byte-identical",
		"rows:      yes:", "generate  1 rows:", "prefill  16 rows:", "tok/s speculation off", "call ms:   w1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		return
	}
	code, out, _ = doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle)
	if code != 0 || !strings.Contains(out, "the Neural Engine is not available on "+runtime.GOOS) || !strings.Contains(out, "the CPU backend runs every model") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

// TestDoctorBundleRefusesDamage: a damaged bundle is a problem naming the
// file.
func TestDoctorBundleRefusesDamage(t *testing.T) {
	code, out, _ := doctor(t, "--data-dir", t.TempDir(), "--bundle", t.TempDir(), "--reference", coremlData(t, "gemma4-exact"))
	if code == 0 || !strings.Contains(out, "PROBLEM") {
		t.Errorf("an empty directory passed: exit %d\n%s", code, out)
	}
}

// TestBenchCoreML: the same figures as JSON and as tables.
func TestBenchCoreML(t *testing.T) {
	var o, e bytes.Buffer
	args := []string{"bench", "coreml", "--bundle", coremlData(t, "stories.bundle"), "--reference", testres.Stories(t), "--tokens", "16", "--row-checks", "4", "--json"}
	if code := Run(context.Background(), args, nil, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	var rep coremlReport
	if err := json.Unmarshal(o.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, o.String())
	}
	if rep.Prompts != len(checkPrompts) || rep.Identical != rep.Prompts || rep.RowChecks != 4 || rep.RowSameBits != 4 || len(rep.Latency) == 0 || rep.CostsByWidth[8] <= 0 {
		t.Errorf("report %+v", rep)
	}
	// The placement field is there, absent with its reason off Core ML.
	if rep.Placement != nil || !strings.Contains(rep.PlacementAbsent, "MLComputePlan") {
		t.Errorf("placement %v, absent %q", rep.Placement, rep.PlacementAbsent)
	}
	o.Reset()
	if code := Run(context.Background(), args[:len(args)-1], nil, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	for _, want := range []string{"call kind", "rows", "mean ms", "identical", "same bits", "tok/s on"} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, o.String())
		}
	}
}

// TestCoreMLChunkLoads: a chunk's load line names the functions it timed,
// in load order, and only those (a published prefill chunk has one, a
// chunk whose verify function did not load only its decode function).
func TestCoreMLChunkLoads(t *testing.T) {
	for _, tc := range []struct {
		c    coremlChunk
		want string
	}{
		{coremlChunk{Functions: [3]string{"generate", "prefill"}, LoadSeconds: [3]float64{1.2, 0.8}}, "generate loaded in 1.20 s, prefill in 0.80 s"},
		{coremlChunk{Functions: [3]string{"generate", "sample", "prefill"}, LoadSeconds: [3]float64{1.2, 0.5, 0.8}}, "generate loaded in 1.20 s, sample in 0.50 s, prefill in 0.80 s"},
		{coremlChunk{Functions: [3]string{"decode_q1", "verify_qK"}, LoadSeconds: [3]float64{0.5, 0.25}}, "decode_q1 loaded in 0.50 s, verify_qK in 0.25 s"},
		{coremlChunk{Functions: [3]string{"prefill", ""}, LoadSeconds: [3]float64{2, 0}}, "prefill loaded in 2.00 s"},
		{coremlChunk{Functions: [3]string{"decode_q1", ""}, LoadSeconds: [3]float64{0.3, 0}}, "decode_q1 loaded in 0.30 s"},
		{coremlChunk{}, "no function loaded"},
	} {
		if got := tc.c.loads(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestDoctorBundleJSON: `doctor --bundle DIR --json` writes one JSON
// document with the checks, the problems and the bundle's report (identity
// with speculation on and off, latency per call and width). Where Core ML
// cannot run, placement is absent and the document says why, and the text
// report does not end in a bare "no problems found".
func TestDoctorBundleJSON(t *testing.T) {
	bundle := coremlData(t, "gemma4-exact.bundle")
	code, out, errOut := doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle, "--reference", coremlData(t, "gemma4-exact"), "--tokens", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var doc doctorDocument
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	b := doc.Bundle
	if b == nil || b.Bundle != bundle || b.Prompts != len(checkPrompts) || b.Identical != b.Prompts || len(b.Latency) == 0 || len(b.CostsByWidth) == 0 || b.RowChecks == 0 {
		t.Fatalf("bundle report %+v", b)
	}
	if doc.Platform != runtime.GOOS+"/"+runtime.GOARCH || len(doc.Problems) != 0 || len(doc.Checks) == 0 {
		t.Errorf("document %+v", doc)
	}
	// The reference executor is not Core ML: no placement, and why.
	if b.Placement != nil || !strings.Contains(b.PlacementAbsent, "MLComputePlan") || !strings.Contains(b.PlacementAbsent, "macOS 14.4") ||
		!strings.Contains(b.PlacementAbsent, "reference (CPU kernels, float32)") {
		t.Errorf("placement %v, absent %q", b.Placement, b.PlacementAbsent)
	}
	if len(doc.NotChecked) != 1 || !strings.Contains(doc.NotChecked[0], "where the bundle's operations run") {
		t.Errorf("not checked: %q", doc.NotChecked)
	}
	var raw map[string]map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, key := range []string{"identical", "prompts", "call_ms_by_width", "latency", "placement_absent"} {
		if _, ok := raw["bundle"][key]; !ok {
			t.Errorf("the bundle report lacks %q", key)
		}
	}
	if _, ok := raw["bundle"]["placement"]; ok {
		t.Error("an absent placement is written")
	}
	// The text report says what it could not check.
	_, out, _ = doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle, "--reference", coremlData(t, "gemma4-exact"), "--tokens", "4")
	if !strings.Contains(out, "placement: not checked:") || !strings.Contains(out, "NOT checked: where the bundle's operations run") || strings.HasSuffix(out, "no problems found\n") {
		t.Errorf("text report:\n%s", out)
	}
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		return
	}
	// No Neural Engine and no reference: the document still names the
	// bundle, why nothing ran, and why there is no placement.
	code, out, _ = doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle, "--json")
	doc = doctorDocument{}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Bundle == nil || !strings.Contains(doc.Bundle.Note, "Neural Engine is not available") ||
		!strings.Contains(doc.Bundle.PlacementAbsent, "needs a Mac") || len(doc.NotChecked) == 0 {
		t.Errorf("exit %d, %v: %s", code, err, out)
	}
}

// TestPrintPlacement: doctor's placement lines and bench's table, from a
// report as a Mac would fill it: per chunk and function the operations on
// each device, the estimated cost, and the operations that left the
// Neural Engine (at most maxOffANEShown listed; the JSON has them all).
func TestPrintPlacement(t *testing.T) {
	var off []mlcore.OffANEOp
	for i := range maxOffANEShown + 3 {
		off = append(off, mlcore.OffANEOp{Output: fmt.Sprintf("tail_%d", i), Operator: "ios18.mul", Device: mlcore.DeviceCPU, Cost: 0.0001})
	}
	rep := &coremlReport{Bundle: "b", Executor: "Core ML (neural-engine)", Placement: []coreml.ChunkPlacement{
		{Package: "/x/chunk_0.mlpackage", Functions: []mlcore.Placement{{Function: "generate_8", Ops: 1058, NeuralEngine: 1058, Cost: 0.31}}},
		{Package: "/x/chunk_2.mlpackage", Functions: []mlcore.Placement{{Function: "generate_8", Ops: 841, NeuralEngine: 826, CPU: 15, Cost: 0.42, OffANECost: 0.0015, OffANE: off}}},
	}, SharedBuffers: &sharedBuffers{Backed: 70, Fallback: 2, Predictions: 300, OutputCopies: 4}}
	var w bytes.Buffer
	printCoreMLReport(&w, rep, false)
	out := w.String()
	for _, want := range []string{
		"chunk_0.mlpackage generate_8: 1058 of 1058 ops on the Neural Engine (100.0%), 0 GPU, 0 CPU, 0 unplaced; estimated cost 0.3100",
		"chunk_2.mlpackage generate_8: 826 of 841 ops on the Neural Engine (98.2%), 0 GPU, 15 CPU",
		"cpu     ios18.mul                    tail_0 (cost 0.0001)",
		"... and 3 more (doctor --json lists them all)",
		"buffers:   70 IOSurface-backed (KV caches and outputs the host reads), 2 fell back to plain memory; 4 of the outputs of 300 Core ML calls were copied in",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lines lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tail_12") {
		t.Errorf("more than %d operations listed:\n%s", maxOffANEShown, out)
	}
	w.Reset()
	printCoreMLReport(&w, rep, true)
	if !strings.Contains(w.String(), "off-ANE cost") || !strings.Contains(w.String(), "chunk_2.mlpackage") || !strings.Contains(w.String(), "826") {
		t.Errorf("bench table:\n%s", w.String())
	}
}
