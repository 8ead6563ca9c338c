package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/app"
	"anechat/engine/cpu"
	"anechat/internal/testres"
)

// TestBenchCPU: `anechat bench cpu --json` times every width asked for
// (width 1 added), names the kernel set this process runs and the CPU,
// and reports each width's cost against width 1's.
func TestBenchCPU(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "cpu", "--model", testres.Stories(t), "--widths", "4,2", "--reps", "2", "--context", "8", "--read-mb", "1", "--json"}
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r cpuBench
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Kernels != cpu.Kernels() || r.CPU == "" || len(r.Features) == 0 || r.Context != 8 || r.Reps != 2 || r.Bytes <= 0 || r.ReadGBps <= 0 {
		t.Errorf("report %+v", r)
	}
	if len(r.Widths) != 3 {
		t.Fatalf("widths %+v, want 1, 2, 4", r.Widths)
	}
	for i, w := range []int{1, 2, 4} {
		x := r.Widths[i]
		if x.Width != w || x.Ms <= 0 || x.MinMs <= 0 || x.MinMs > x.Ms || x.TokS <= 0 || x.WeightGBps <= 0 {
			t.Errorf("width %d: %+v", w, x)
		}
	}
	if r.Widths[0].Ratio != 1 {
		t.Errorf("width 1's ratio %v, want 1", r.Widths[0].Ratio)
	}
}

// TestBenchCPUDefaultModel: without --model the data dir's bundled chat
// model is timed (here a copy of stories260K under its name), and the
// table names the kernels.
func TestBenchCPUDefaultModel(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "models", app.BundledChatModel), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := []string{"bench", "cpu", "--data-dir", dir, "--widths", "2", "--reps", "1", "--context", "4", "--read-mb", "0"}
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{app.BundledChatModel, "kernels  " + cpu.Kernels(), "\n     1 ", "\n     2 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchCPUFlags: bad flags are usage errors that say what to give.
func TestBenchCPUFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--widths", "9"}, {"--widths", "x"}, {"--reps", "0"}, {"--context", "-1"}, {"--read-mb", "-1"},
		{"--model", testres.Stories(t), "--context", "100000"},
	} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), append([]string{"bench", "cpu", "--model", "random"}, args...), nil, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"bench", "cpu", "--model", filepath.Join(t.TempDir(), "none.gguf")}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--model") {
		t.Errorf("missing model: exit %d, stderr %q", code, errb.String())
	}
}
