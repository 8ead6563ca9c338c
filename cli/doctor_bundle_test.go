package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// damagedCopy copies the test bundle name into a new directory and returns
// it; the copy may be damaged at will.
func damagedCopy(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(coremlData(t, name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// setManifest rewrites dir's manifest.json through edit.
func setManifest(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "manifest.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sidecar(m map[string]any, name string) map[string]any {
	return m["sidecars"].(map[string]any)[name].(map[string]any)
}

// tinyPublished writes a CoreML-LLM bundle (model_config.json layout) of
// zeros: V=32, H=8, 2 layers of per-layer width 4, context 16.
func tinyPublished(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "published")
	V, H, L, P, C := 32, 8, 2, 4, 16
	files := map[string][]byte{
		"model_config.json":   fmt.Appendf(nil, `{"model_name":"tiny","architecture":"gemma4","hidden_size":%d,"context_length":%d,"vocab_size":%d,"num_layers":%d,"per_layer_dim":%d,"sliding_window":4,"bos_token_id":2,"eos_token_id":1}`, H, C, V, L, P),
		"embed_tokens_q8.bin": make([]byte, V*H), "embed_tokens_scales.bin": make([]byte, V*2),
		"embed_tokens_per_layer_q8.bin": make([]byte, V*L*P), "embed_tokens_per_layer_scales.bin": make([]byte, V*2),
		"per_layer_projection.bin": make([]byte, L*P*H*2),
	}
	h := fmt.Sprintf("{'descr': '<f2', 'fortran_order': False, 'shape': (%d, 4), }", C)
	h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n"
	npy := binary.LittleEndian.AppendUint16([]byte("\x93NUMPY\x01\x00"), uint16(len(h)))
	npy = append(append(npy, h...), make([]byte, 2*C*4)...)
	for _, n := range []string{"cos_sliding.npy", "sin_sliding.npy", "cos_full.npy", "sin_full.npy"} {
		files[n] = npy
	}
	for _, d := range []string{"chunk1.mlmodelc", "chunk2.mlmodelc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDoctorBundleReportsDamage: `anechat doctor --bundle` where there is
// no Neural Engine used to say "no problems found" for every damaged
// bundle (issue 21 part 6: it checked nothing; a named pipe hung it). It
// now checks the bundle in full and reports each kind of damage as a
// problem naming the file or the manifest's field.
func TestDoctorBundleReportsDamage(t *testing.T) {
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		published bool
		damage    func(t *testing.T, dir string)
		want      []string
	}{
		{"sidecar ../ path", false, func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "embed.q8"))
			write(filepath.Join(dir, "..", "embed.q8"), b)
			setManifest(t, dir, func(m map[string]any) { sidecar(m, "embed")["data"].(map[string]any)["file"] = "../embed.q8" })
		}, []string{"manifest.json", "sidecars.embed.data.file", `"../embed.q8"`}},
		{"sidecar absolute path", false, func(t *testing.T, dir string) {
			abs := filepath.Join(filepath.Dir(dir), "abs.f16")
			b, _ := os.ReadFile(filepath.Join(dir, "embed.scales.f16"))
			write(abs, b)
			setManifest(t, dir, func(m map[string]any) { sidecar(m, "embed")["scales"].(map[string]any)["file"] = abs })
		}, []string{"manifest.json", "sidecars.embed.scales.file", "abs.f16", "is not a file of the bundle"}},
		{"sidecar symlink outside", false, func(t *testing.T, dir string) {
			out := filepath.Join(filepath.Dir(dir), "elsewhere.q8")
			os.Rename(filepath.Join(dir, "per_layer.q8"), out)
			os.Symlink(out, filepath.Join(dir, "per_layer.q8"))
		}, []string{"manifest.json", "sidecars.per_layer.data.file", "outside the bundle"}},
		{"tokenizer absolute path", false, func(t *testing.T, dir string) {
			setManifest(t, dir, func(m map[string]any) { m["tokenizer"].(map[string]any)["file"] = "/etc/hostname" })
		}, []string{"manifest.json", "tokenizer", "/etc/hostname"}},
		{"chat template ../ path", false, func(t *testing.T, dir string) {
			setManifest(t, dir, func(m map[string]any) {
				m["chat_template"] = map[string]any{"format": "jinja", "file": "../chat.jinja"}
			})
		}, []string{"manifest.json", "chat_template.file", "../chat.jinja"}},
		{"source ../ path", false, func(t *testing.T, dir string) {
			setManifest(t, dir, func(m map[string]any) {
				m["source"].(map[string]any)["files"].([]any)[0].(map[string]any)["file"] = "../outside/secret.txt"
			})
		}, []string{"manifest.json", "source.files[0].file", "../outside/secret.txt"}},
		{"sidecar wrong sha256", false, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "embed.q8")
			b, _ := os.ReadFile(p)
			b[100] ^= 1
			write(p, b)
		}, []string{"embed.q8", "sha256", "sidecars.embed.data.sha256"}},
		{"tokenizer wrong sha256", false, func(t *testing.T, dir string) {
			write(filepath.Join(dir, "tokenizer.json"), []byte("{}"))
		}, []string{"tokenizer.json", "sha256"}},
		{"manifest's sha256 wrong", false, func(t *testing.T, dir string) {
			setManifest(t, dir, func(m map[string]any) {
				sidecar(m, "per_layer")["scales"].(map[string]any)["sha256"] = strings.Repeat("0", 64)
			})
		}, []string{"per_layer.scales.f16", "sidecars.per_layer.scales.sha256"}},
		{"missing sidecar", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "per_layer.q8")) }, []string{"per_layer.q8", "no such file"}},
		{"missing scales", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "embed.scales.f16")) }, []string{"embed.scales.f16", "no such file"}},
		{"missing tokenizer", false, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "tokenizer.json")) }, []string{"tokenizer.json", "no such file"}},
		{"missing package", false, func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "chunk_1.mlpackage")) }, []string{"chunk_1.mlpackage"}},
		{"empty package", false, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "chunk_2.mlpackage")
			os.RemoveAll(p)
			os.Mkdir(p, 0o755)
		}, []string{"chunk_2.mlpackage", "not a Core ML package"}},
		{"truncated sidecar", false, func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, "per_layer.q8"), 100) }, []string{"per_layer.q8", "is 100 bytes"}},
		{"empty sidecar", false, func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, "embed.q8"), 0) }, []string{"embed.q8", "is 0 bytes"}},
		{"sidecar shape disagrees with the architecture", false, func(t *testing.T, dir string) {
			setManifest(t, dir, func(m map[string]any) { sidecar(m, "embed")["rows"] = 256 })
		}, []string{"manifest.json", "sidecars.embed is 256 x 64, want 512 x 64"}},
		{"20 MB of garbage as manifest (over the cap)", false, func(t *testing.T, dir string) {
			write(filepath.Join(dir, "manifest.json"), bytes.Repeat([]byte("garbage "), (4<<20)/8+1))
		}, []string{"manifest.json", "more than the 4194304"}},
		{"manifest not JSON", false, func(t *testing.T, dir string) { write(filepath.Join(dir, "manifest.json"), []byte("{")) }, []string{"manifest.json", "not valid JSON"}},
		{"manifest is a named pipe", false, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "manifest.json"))
			testres.Mkfifo(t, filepath.Join(dir, "manifest.json"))
		}, []string{"manifest.json", "not a regular file (a named pipe)"}},
		{"sidecar is a named pipe", false, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "embed.q8"))
			testres.Mkfifo(t, filepath.Join(dir, "embed.q8"))
		}, []string{"embed.q8", "not a regular file (a named pipe)"}},
		{"tokenizer is a named pipe", false, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "tokenizer.json"))
			testres.Mkfifo(t, filepath.Join(dir, "tokenizer.json"))
		}, []string{"tokenizer.json", "not a regular file (a named pipe)"}},
		{"sidecar is a directory", false, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "embed.scales.f16"))
			os.Mkdir(filepath.Join(dir, "embed.scales.f16"), 0o755)
		}, []string{"embed.scales.f16", "not a regular file (a directory)"}},
		{"published: 16,777,216 layers, hidden 32,768, empty sidecars", true, func(t *testing.T, dir string) {
			write(filepath.Join(dir, "model_config.json"), []byte(`{"architecture":"gemma4","hidden_size":32768,"context_length":16,"vocab_size":65536,"num_layers":16777216,"per_layer_dim":16777216}`))
			for _, n := range []string{"embed_tokens_per_layer_q8.bin", "per_layer_projection.bin"} {
				os.Truncate(filepath.Join(dir, n), 0)
			}
		}, []string{"model_config.json", "num_layers = 16777216"}},
		{"published: truncated sidecar", true, func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, "embed_tokens_per_layer_q8.bin"), 7)
		}, []string{"embed_tokens_per_layer_q8.bin is 7 bytes", "model_config.json implies 256"}},
		{"published: config is a named pipe", true, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model_config.json"))
			testres.Mkfifo(t, filepath.Join(dir, "model_config.json"))
		}, []string{"model_config.json", "not a regular file (a named pipe)"}},
		{"published: RoPE table cut short", true, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "sin_full.npy")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-2)
		}, []string{"sin_full.npy", "data bytes for shape [16 4]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var dir string
			if c.published {
				dir = tinyPublished(t)
			} else {
				dir = damagedCopy(t, "gemma4-exact.bundle")
			}
			c.damage(t, dir)
			var code int
			var out string
			testres.Promptly(t, "doctor --bundle", func() error {
				code, out, _ = doctor(t, "--data-dir", t.TempDir(), "--bundle", dir)
				return nil
			})
			if code != 1 || !strings.Contains(out, "bundle:    PROBLEM: ") || strings.Contains(out, "no problems found") {
				t.Fatalf("exit %d, want 1 and a bundle problem:\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
		})
	}
	// The good bundles still pass.
	for _, dir := range []string{coremlData(t, "gemma4-exact.bundle"), tinyPublished(t)} {
		code, out, _ := doctor(t, "--data-dir", t.TempDir(), "--bundle", dir)
		if code != 0 || !strings.Contains(out, "no problems found") {
			t.Errorf("%s: exit %d:\n%s", dir, code, out)
		}
	}
}

// TestDoctorReferenceStaysInTheCheckpoint: a manifest's source.files name
// what `doctor --reference DIR` hashes. "../outside/secret.txt" had the
// file outside DIR opened and its sha256 printed, and a path to /dev/zero
// had it hash forever (issue 21 part 6). Both are refused, naming the
// manifest and the entry, before anything is opened.
func TestDoctorReferenceStaysInTheCheckpoint(t *testing.T) {
	root := t.TempDir()
	ckpt := filepath.Join(root, "ckpt")
	if err := os.CopyFS(ckpt, os.DirFS(coremlData(t, "gemma4-exact"))); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "outside"), 0o755)
	secret := []byte("the secret")
	os.WriteFile(filepath.Join(root, "outside", "secret.txt"), secret, 0o644)
	sum := sha256.Sum256(secret)
	depth := strings.Count(filepath.Clean(ckpt), string(filepath.Separator))
	zero := strings.Repeat("../", depth) + "dev/zero"
	for _, name := range []string{"../outside/secret.txt", zero} {
		t.Run(name, func(t *testing.T) {
			bundle := damagedCopy(t, "gemma4-exact.bundle")
			setManifest(t, bundle, func(m map[string]any) {
				m["source"].(map[string]any)["files"].([]any)[0].(map[string]any)["file"] = name
			})
			var code int
			var out string
			testres.Promptly(t, "doctor --reference", func() error {
				code, out, _ = doctor(t, "--data-dir", t.TempDir(), "--bundle", bundle, "--reference", ckpt)
				return nil
			})
			if code != 1 || !strings.Contains(out, "source.files[0].file") || !strings.Contains(out, filepath.Join(bundle, "manifest.json")) {
				t.Errorf("exit %d, want a problem naming the manifest and source.files[0].file:\n%s", code, out)
			}
			if strings.Contains(out, hex.EncodeToString(sum[:])) {
				t.Errorf("the sha256 of a file outside the checkpoint was printed:\n%s", out)
			}
		})
	}
}

// TestNamedPipeModels: a named pipe called evil.gguf in the models folder
// made `doctor` block forever, and `generate --model` on it too (issue 21
// part 2). Doctor now lists it as a problem and finishes; generate fails
// at once, naming it.
func TestNamedPipeModels(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "models")
	os.MkdirAll(mdir, 0o755)
	evil := filepath.Join(mdir, "evil.gguf")
	testres.Mkfifo(t, evil)
	var code int
	var out string
	testres.Promptly(t, "doctor", func() error { code, out, _ = doctor(t, "--data-dir", dir); return nil })
	if code != 1 || !strings.Contains(out, "PROBLEM: "+evil) || !strings.Contains(out, evil+" is not a regular file (a named pipe)") {
		t.Errorf("doctor: exit %d:\n%s", code, out)
	}
	var o, e bytes.Buffer
	testres.Promptly(t, "generate", func() error {
		code = Run(t.Context(), []string{"generate", "--data-dir", dir, "--model", evil, "--prompt", "hi"}, nil, &o, &e)
		return nil
	})
	if code == 0 || !strings.Contains(e.String(), evil+" is not a regular file (a named pipe)") {
		t.Errorf("generate: exit %d: %s%s", code, o.String(), e.String())
	}
}
