package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"anechat/internal/testres"
)

func coremlData(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testres.RepoRoot(t), "build", "testdeps", "coreml", name)
	return testres.Require(t, p, "Core ML test bundles", "run build/scripts/deps-coreml.sh and deps-coremlhost.sh (make test runs them)")
}

// TestDoctorBundle: `anechat doctor --bundle` with the reference runner
// loads the bundle, finds speculation on and off byte-identical and the
// generation function's rows independent, and prints latency per call
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
		{coremlChunk{Functions: [2]string{"generate", "prefill"}, LoadSeconds: [2]float64{1.2, 0.8}}, "generate loaded in 1.20 s, prefill in 0.80 s"},
		{coremlChunk{Functions: [2]string{"decode_q1", "verify_qK"}, LoadSeconds: [2]float64{0.5, 0.25}}, "decode_q1 loaded in 0.50 s, verify_qK in 0.25 s"},
		{coremlChunk{Functions: [2]string{"prefill", ""}, LoadSeconds: [2]float64{2, 0}}, "prefill loaded in 2.00 s"},
		{coremlChunk{Functions: [2]string{"decode_q1", ""}, LoadSeconds: [2]float64{0.3, 0}}, "decode_q1 loaded in 0.30 s"},
		{coremlChunk{}, "no function loaded"},
	} {
		if got := tc.c.loads(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
