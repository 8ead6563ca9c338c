package coreml

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyBundle copies a test bundle into a temporary directory (the copy
// may be damaged at will).
func copyBundle(t *testing.T, name string) string {
	t.Helper()
	src := testData(t, name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// editManifest rewrites dir's manifest.json through edit (on the decoded
// JSON object).
func editManifest(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, ManifestName)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func chunk0Function(m map[string]any, i int) map[string]any {
	return m["chunks"].([]any)[0].(map[string]any)["functions"].([]any)[i].(map[string]any)
}

// TestOpenBundleRefuses: a bundle that is incomplete, damaged, of another
// version or inconsistent is refused with an error wrapping ErrBundle that
// names the file and what is wrong; the good bundle opens.
func TestOpenBundleRefuses(t *testing.T) {
	ctx := context.Background()
	good := openTestBundle(t, "gemma4-exact.bundle")
	good.Close()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string // substrings of the error
	}{
		{"no manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ManifestName)) }, []string{"manifest.json", "no such file"}},
		{"not JSON", func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, ManifestName), []byte("{"), 0o644) }, []string{"manifest.json", "not valid JSON"}},
		{"another format", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format"] = "something-else" })
		}, []string{"manifest.json", `format "something-else"`}},
		{"unknown version", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format_version"] = 3 })
		}, []string{"manifest.json", "format_version 3 is unknown"}},
		{"version 1", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format_version"] = 1 })
		}, []string{"manifest.json", "format_version 1", "rebuild the bundle with `make bundle`"}},
		{"argmax block", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["geometry"].(map[string]any)["argmax_block"] = 100 })
		}, []string{"geometry.argmax_block 100"}},
		{"no sample function", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				c := m["chunks"].([]any)[2].(map[string]any)
				fns := c["functions"].([]any)
				c["functions"] = []any{fns[0], fns[2]}
			})
		}, []string{"chunks[2] has 2 functions, want generate, sample, prefill"}},
		{"old outputs", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				f := m["chunks"].([]any)[2].(map[string]any)["functions"].([]any)[0].(map[string]any)
				f["outputs"] = append(f["outputs"].([]any), map[string]any{"name": "logits", "shape": []any{1, 8, 512}, "dtype": "fp16"})
			})
		}, []string{"chunks[2]", "generate_8", `"logits" is not part of the format`}},
		{"missing sidecar", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "embed.q8")) }, []string{"embed.q8", "no such file"}},
		{"truncated sidecar", func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, "per_layer.q8"), 100) }, []string{"per_layer.q8", "is 100 bytes"}},
		{"damaged sidecar", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "embed.scales.f16")
			b, _ := os.ReadFile(p)
			b[7] ^= 1
			os.WriteFile(p, b, 0o644)
		}, []string{"embed.scales.f16", "sha256", "differs"}},
		{"damaged tokenizer", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
		}, []string{"tokenizer.json", "sha256"}},
		{"missing package", func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "chunk_1.mlpackage")) }, []string{"chunk_1.mlpackage", "missing"}},
		{"shape mismatch", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				in := chunk0Function(m, 0)["inputs"].([]any)[0].(map[string]any)
				in["shape"] = []any{1, 7, 64}
			})
		}, []string{"chunks[0]", "inputs", `"hidden_in" is fp16[1 7 64], want fp16[1 8 64]`}},
		{"undeclared output", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				f := chunk0Function(m, 1)
				f["outputs"] = append(f["outputs"].([]any), map[string]any{"name": "extra", "shape": []any{1}, "dtype": "fp16"})
			})
		}, []string{"chunks[0]", "outputs", `"extra" is not part of the format`}},
		{"rope of another architecture", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				r := m["arch"].(map[string]any)["ropes"].(map[string]any)["full"].(map[string]any)
				r["freq_dim"] = r["freq_dim"].(float64) / 2
			})
		}, []string{"arch.ropes", "not the rotation"}},
		{"embedding scale", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				m["sidecars"].(map[string]any)["embed"].(map[string]any)["value_scale"] = 1.0
			})
		}, []string{"sidecars.embed.value_scale"}},
		{"chunk plan", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				m["chunks"].([]any)[1].(map[string]any)["layers"] = []any{3, 4}
			})
		}, []string{"chunks[1].layers"}},
		{"sliding slots", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["geometry"].(map[string]any)["sliding_slots"] = 16 })
		}, []string{"geometry.sliding_slots 16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyBundle(t, "gemma4-exact.bundle")
			tc.damage(t, dir)
			b, err := OpenBundle(ctx, dir, nil)
			if err == nil {
				b.Close()
				t.Fatal("the damaged bundle opened")
			}
			if !errors.Is(err, ErrBundle) {
				t.Errorf("error does not wrap ErrBundle: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOpenBundleCancel: checksumming stops when ctx is cancelled.
func TestOpenBundleCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenBundle(ctx, testData(t, "gemma4-exact.bundle"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenBundle on a cancelled context: %v", err)
	}
}

// FuzzReadManifest: no manifest, however damaged, makes ReadManifest or the
// architecture check panic.
func FuzzReadManifest(f *testing.F) {
	for _, name := range []string{"gemma4-exact.bundle", "stories.bundle"} {
		p := filepath.Join(testDataDir(f), name, ManifestName)
		if raw, err := os.ReadFile(p); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"format":"anechat-coreml-bundle","format_version":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestName), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err == nil {
			planFor(m)
		}
	})
}
