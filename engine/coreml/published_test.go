package coreml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/load"
)

// writeNPY writes a .npy v1 header of a float16 array of shape (and its
// zero data).
func writeNPY(t *testing.T, path string, shape ...int) {
	t.Helper()
	dims := ""
	n := 1
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
		n *= d
	}
	h := fmt.Sprintf("{'descr': '<f2', 'fortran_order': False, 'shape': (%s), }", strings.TrimSuffix(dims, " "))
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(h)))
	b = append(append(b, h...), make([]byte, 2*n)...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// publishedBundle writes a tiny bundle in the CoreML-LLM layout.
func publishedBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	V, H, L, P, C := 32, 8, 2, 4, 16
	cfg := fmt.Sprintf(`{"model_name":"tiny","architecture":"gemma4","hidden_size":%d,"context_length":%d,"vocab_size":%d,"num_layers":%d,"per_layer_dim":%d,"sliding_window":4,"bos_token_id":2,"eos_token_id":1}`, H, C, V, L, P)
	files := map[string]int{
		"embed_tokens_q8.bin": V * H, "embed_tokens_scales.bin": V * 2,
		"embed_tokens_per_layer_q8.bin": V * L * P, "embed_tokens_per_layer_scales.bin": V * 2,
		"per_layer_projection.bin": L * P * H * 2,
	}
	os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(cfg), 0o644)
	for name, n := range files {
		os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644)
	}
	for _, kind := range []string{"sliding", "full"} {
		writeNPY(t, filepath.Join(dir, "cos_"+kind+".npy"), C, 4)
		writeNPY(t, filepath.Join(dir, "sin_"+kind+".npy"), C, 4)
	}
	for _, c := range []string{"chunk1.mlmodelc", "chunk2.mlmodelc", "prefill_chunk1.mlmodelc", "prefill_chunk2.mlmodelc"} {
		os.MkdirAll(filepath.Join(dir, c), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	return dir
}

// TestReadPublished: a CoreML-LLM bundle is read and described (and says
// plainly that its decode and verify functions differ, so identity there
// is not built in, but measured); a loader without a published executor
// (this platform) refuses to run it and says so; a missing chunk or a
// sidecar of the wrong size is named.
func TestReadPublished(t *testing.T) {
	dir := publishedBundle(t)
	if !IsPublished(dir) {
		t.Fatal("not recognised")
	}
	p, err := ReadPublished(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Describe()
	for _, want := range []string{"CoreML-LLM bundle", "chunk1.mlmodelc, chunk2.mlmodelc", "prefill_chunk1.mlmodelc", "cos_sliding.npy <f2[16 4]",
		"decode and verify (verify_qK) functions are different functions", "not built in", "measured"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q: %s", want, d)
		}
	}
	src, err := load.Detect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := (Loader{}).Supports(src); err == nil || !strings.Contains(err.Error(), "CoreML-LLM") {
		t.Errorf("Supports: %v", err)
	}
	os.Rename(filepath.Join(dir, "chunk2.mlmodelc"), filepath.Join(dir, "chunk3.mlmodelc"))
	if _, err := ReadPublished(dir); err == nil || !strings.Contains(err.Error(), "chunk 2 is missing") {
		t.Errorf("missing chunk: %v", err)
	}
	os.Rename(filepath.Join(dir, "chunk3.mlmodelc"), filepath.Join(dir, "chunk2.mlmodelc"))
	os.Truncate(filepath.Join(dir, "embed_tokens_q8.bin"), 5)
	if _, err := ReadPublished(dir); !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "embed_tokens_q8.bin is 5 bytes") {
		t.Errorf("short sidecar: %v", err)
	}
}
