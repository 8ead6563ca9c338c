package app

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/storage"
)

// writeGGUF writes a tiny GGUF file declaring arch and name.
func writeGGUF(t *testing.T, path, arch, name string) {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", arch)
	w.Set("general.name", name)
	w.AddF32("token_embd.weight", []int{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScanDirFindsEachKindAndReportsBadFiles(t *testing.T) {
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "tiny.gguf"), "llama", "Tiny Llama")
	hf := filepath.Join(dir, "gemma")
	os.Mkdir(hf, 0o755)
	os.WriteFile(filepath.Join(hf, "config.json"), []byte(`{"model_type":"gemma4"}`), 0o644)
	os.WriteFile(filepath.Join(hf, "model.safetensors"), []byte("12345678{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.gguf"), []byte("GGUF but not really"), 0o644)
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a model"), 0o644)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)

	found, problems, err := ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 {
		t.Fatalf("found %+v, want the gguf file and the HF directory", found)
	}
	g, h := found[1], found[0] // sorted by path: gemma < tiny.gguf
	fp, _ := model.FingerprintFiles(filepath.Join(dir, "tiny.gguf"))
	if g.Kind != KindGGUF || g.Arch != "llama" || g.Name != "Tiny Llama" || g.Fingerprint != fp || g.SizeBytes == 0 {
		t.Errorf("gguf found as %+v (fingerprint want %s)", g, fp)
	}
	if h.Kind != KindSafetensors || h.Arch != "gemma4" || h.Name != "gemma" || h.SizeBytes != int64(len(`{"model_type":"gemma4"}`)+10) {
		t.Errorf("HF dir found as %+v", h)
	}
	if len(problems) != 1 || problems[0].Path != filepath.Join(dir, "broken.gguf") || problems[0].Error == "" {
		t.Errorf("problems %+v, want broken.gguf", problems)
	}
	if f, p, err := ScanDir(filepath.Join(dir, "missing")); err != nil || len(f) != 0 || len(p) != 0 {
		t.Errorf("missing dir: %v %v %v, want nothing", f, p, err)
	}
}

func TestModelsScanRegisterDefaultRemove(t *testing.T) {
	a, _, dir := start(t, nil)
	mdir := storage.ModelsPath(dir)
	writeGGUF(t, filepath.Join(mdir, "a.gguf"), "llama", "A")
	writeGGUF(t, filepath.Join(mdir, "b.gguf"), "llama", "B")

	res, err := a.Models.Scan()
	if err != nil || len(res.Registered) != 2 {
		t.Fatalf("Scan = %+v, %v", res, err)
	}
	list, err := a.Models.List()
	if err != nil || len(list.Models) != 2 || list.ModelsDir != mdir {
		t.Fatalf("List = %+v, %v", list, err)
	}
	first := res.Registered[0].ID
	if list.DefaultID != first {
		t.Fatalf("default %d after the first scan, want the first model %d", list.DefaultID, first)
	}
	// Scanning again updates in place: same ids, no duplicates.
	again, err := a.Models.Scan()
	if err != nil || len(again.Registered) != 2 || again.Registered[0].ID != first {
		t.Fatalf("rescan = %+v, %v", again, err)
	}
	if err := a.Models.SetDefault(res.Registered[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Models.SetDefault(999); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("SetDefault(999) = %v, want ErrNotFound", err)
	}
	// A model outside the models folder.
	other := filepath.Join(t.TempDir(), "c.gguf")
	writeGGUF(t, other, "llama", "C")
	c, err := a.Models.Register(other)
	if err != nil || c.Path != other || c.Kind != KindGGUF || c.Name != "C" {
		t.Fatalf("Register = %+v, %v", c, err)
	}
	if _, err := a.Models.Register(filepath.Join(t.TempDir())); err == nil {
		t.Fatal("Register of an empty directory succeeded")
	}
	if err := a.Models.Remove(res.Registered[1].ID); err != nil {
		t.Fatal(err)
	}
	list, _ = a.Models.List()
	if len(list.Models) != 2 || list.DefaultID != 0 {
		t.Fatalf("after removing the default: %+v, want 2 models and no default", list)
	}
}

func TestStartupScanPrefersCoreMLThenBundledSmolLM2(t *testing.T) {
	// Each case: the models folder's contents before the app starts, and the
	// model that start-up must make the default.
	coreml := func(t *testing.T, mdir string) {
		b := filepath.Join(mdir, "gemma4-e2b.mlmodelc")
		if err := os.MkdirAll(b, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(b, "model.mil"), []byte("program"), 0o644)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, mdir string)
		want  string // base name of the default; "" for none
	}{
		{"empty folder: no default", func(*testing.T, string) {}, ""},
		{"SmolLM2 beats a model sorted before it", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, "aaa.gguf"), "llama", "AAA")
			writeGGUF(t, filepath.Join(mdir, BundledChatModel), "llama", "SmolLM2")
		}, BundledChatModel},
		{"a Core ML bundle beats SmolLM2", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, BundledChatModel), "llama", "SmolLM2")
			coreml(t, mdir)
		}, "gemma4-e2b.mlmodelc"},
		{"otherwise the first by path", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, "b.gguf"), "llama", "B")
			writeGGUF(t, filepath.Join(mdir, "a.gguf"), "llama", "A")
		}, "a.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mdir := storage.ModelsPath(dir)
			if err := os.MkdirAll(mdir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, mdir)
			a := New(Options{DataDir: dir, Version: "test"})
			a.Startup(t.Context(), newRecorder())
			t.Cleanup(a.Shutdown)
			list, err := a.Models.List()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if list.DefaultID != 0 || len(list.Models) != 0 {
					t.Fatalf("empty folder: %+v, want no models and no default", list)
				}
				return
			}
			var got string
			for _, sm := range list.Models {
				if sm.ID == list.DefaultID {
					got = filepath.Base(sm.Path)
				}
			}
			if got != tc.want {
				t.Fatalf("default after start-up is %q (models %+v), want %q", got, list.Models, tc.want)
			}
		})
	}
}

func TestStartupScanKeepsAChosenDefault(t *testing.T) {
	dir := t.TempDir()
	mdir := storage.ModelsPath(dir)
	os.MkdirAll(mdir, 0o755)
	writeGGUF(t, filepath.Join(mdir, "mine.gguf"), "llama", "Mine")
	a := New(Options{DataDir: dir, Version: "test"})
	a.Startup(t.Context(), newRecorder())
	list, _ := a.Models.List()
	mine := list.DefaultID
	a.Shutdown()
	// SmolLM2 arrives later (make run fetched it): the user's default stays.
	writeGGUF(t, filepath.Join(mdir, BundledChatModel), "llama", "SmolLM2")
	b := New(Options{DataDir: dir, Version: "test"})
	b.Startup(t.Context(), newRecorder())
	t.Cleanup(b.Shutdown)
	list, err := b.Models.List()
	if err != nil || len(list.Models) != 2 || mine == 0 || list.DefaultID != mine {
		t.Fatalf("after restart: %+v, %v; want both models registered and default %d kept", list, err, mine)
	}
}
