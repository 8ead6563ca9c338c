package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/internal/backends"
	"anechat/internal/testres"
	"anechat/storage"
)

// writeGGUF puts a real model at path: a copy of stories260K (the scan
// validates models by loading them, so a header alone would be a problem).
func writeGGUF(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeOtherGGUF puts a model at path that is not the same file as any
// other writeGGUF or writeOtherGGUF wrote: stories260K with its path's
// bytes after its tensors (which the loader does not read), so that two
// such models are two models, not one copied twice.
func writeOtherGGUF(t *testing.T, path string) {
	t.Helper()
	writeGGUF(t, path)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(filepath.Base(path)); err != nil {
		t.Fatal(err)
	}
}

func TestScanDirFindsEachKindAndReportsBadFiles(t *testing.T) {
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "tiny.gguf"))
	hf := filepath.Join(dir, "gemma")
	os.Mkdir(hf, 0o755)
	fixture := filepath.Join(testres.RepoRoot(t), "engine", "cpu", "testdata", "gemma4", "model")
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		b, _ := os.ReadFile(filepath.Join(fixture, f))
		os.WriteFile(filepath.Join(hf, f), b, 0o644)
	}
	bad := filepath.Join(dir, "bad-gemma")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type":"gemma4"}`), 0o644)
	os.WriteFile(filepath.Join(bad, "model.safetensors"), []byte("12345678{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.gguf"), []byte("GGUF but not really"), 0o644)
	// Loads as a header but not as a model: doctor used to list it as healthy.
	if err := gguf.EditFile(testres.Stories(t), filepath.Join(dir, "llamb.gguf"), map[string]any{"general.architecture": "llamb"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a model"), 0o644)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)

	reg := backends.Registry()
	found, problems, err := ScanDir(context.Background(), reg, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 {
		t.Fatalf("found %+v, want the gguf file and the HF directory", found)
	}
	h, g := found[0], found[1] // sorted by path: gemma < tiny.gguf
	if g.Format != load.GGUF || g.Arch != "llama" || g.Name != "tiny" || g.Quant != "F32" || g.SizeBytes == 0 || g.Backend != "cpu" {
		t.Errorf("gguf found as %+v", g)
	}
	if h.Format != load.Safetensors || h.Arch != "gemma4_text" || h.Name != "gemma" || h.Config.ContextLen != 256 {
		t.Errorf("HF dir found as %+v", h)
	}
	// The identity the scan registers is the one the backend runs with.
	for _, f := range found {
		m, err := reg.Open(context.Background(), f.Path, load.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if fp := m.Backend.Config().Fingerprint; fp != f.Fingerprint || fp == "" {
			t.Errorf("%s: scan fingerprint %s, backend %s", f.Path, f.Fingerprint, fp)
		}
		m.Close()
	}
	var got []string
	for _, p := range problems {
		got = append(got, filepath.Base(p.Path))
		if !strings.Contains(p.Error, p.Path) {
			t.Errorf("problem %+v does not name its file", p)
		}
	}
	if strings.Join(got, " ") != "bad-gemma broken.gguf llamb.gguf" {
		t.Errorf("problems %+v, want bad-gemma, broken.gguf and llamb.gguf", problems)
	}
	if f, p, err := ScanDir(context.Background(), reg, filepath.Join(dir, "missing")); err != nil || len(f) != 0 || len(p) != 0 {
		t.Errorf("missing dir: %v %v %v, want nothing", f, p, err)
	}
}

func TestModelsScanRegisterDefaultRemove(t *testing.T) {
	a, _, dir := start(t, nil)
	mdir := storage.ModelsPath(dir)
	writeGGUF(t, filepath.Join(mdir, "a.gguf"))
	writeOtherGGUF(t, filepath.Join(mdir, "b.gguf"))

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
	writeOtherGGUF(t, other)
	c, err := a.Models.Register(other)
	if err != nil || c.Path != other || c.Kind != KindGGUF || c.Name != "c" {
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

// TestSameFileRegisteredTwiceIsFlagged: a copy of a registered model file
// (the same sha256 under another name or folder) is refused by Register
// and Import and listed as a problem by Scan, naming the model it copies;
// the models table keeps one row. A file of the same size with other
// bytes is a model of its own.
func TestSameFileRegisteredTwiceIsFlagged(t *testing.T) {
	a, _, dir := start(t, nil)
	mdir := storage.ModelsPath(dir)
	os.MkdirAll(mdir, 0o755)
	orig := filepath.Join(mdir, "a.gguf")
	writeGGUF(t, orig)
	first, err := a.Models.Register(orig)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "renamed.gguf")
	writeGGUF(t, copied)
	var dup *DuplicateError
	if _, err := a.Models.Register(copied); !errors.As(err, &dup) || dup.Of.ID != first.ID || !strings.Contains(err.Error(), "same sha256") {
		t.Fatalf("Register of a copy = %v, want a DuplicateError naming model %d", err, first.ID)
	}
	if _, err := a.Models.Import(copied); !errors.As(err, &dup) {
		t.Fatalf("Import of a copy = %v, want a DuplicateError", err)
	}
	writeGGUF(t, filepath.Join(mdir, "b.gguf"))
	res, err := a.Models.Scan()
	if err != nil || len(res.Registered) != 1 || len(res.Problems) != 1 ||
		!strings.HasSuffix(res.Problems[0].Path, "b.gguf") || !strings.Contains(res.Problems[0].Error, "not added again") {
		t.Fatalf("Scan = %+v, %v; want a.gguf registered and b.gguf flagged", res, err)
	}
	// Registering the same path again updates it in place, as before.
	if again, err := a.Models.Register(orig); err != nil || again.ID != first.ID {
		t.Fatalf("Register of the same path = %+v, %v", again, err)
	}
	// Same size, other bytes: another model.
	other := filepath.Join(t.TempDir(), "other.gguf")
	writeGGUF(t, other)
	b, _ := os.ReadFile(other)
	b[len(b)-1] ^= 0xff
	os.WriteFile(other, b, 0o644)
	if m, err := a.Models.Register(other); err != nil || m.ID == first.ID {
		t.Fatalf("Register of another file of the same size = %+v, %v", m, err)
	}
	list, _ := a.Models.List()
	if len(list.Models) != 2 {
		t.Fatalf("%d models registered, want 2", len(list.Models))
	}
	if metaOf(list.Models[0]).SHA256 == "" && metaOf(list.Models[1]).SHA256 == "" {
		t.Error("no sha256 kept in the meta of the models compared")
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
		tok, _ := os.ReadFile(filepath.Join(testres.RepoRoot(t), "engine", "cpu", "testdata", "gemma4", "model", "tokenizer.json"))
		os.WriteFile(filepath.Join(b, "tokenizer.json"), tok, 0o644)
	}
	// The Core ML backend is not in this build: a stand-in that opens
	// bundles lets the scan register one, as a darwin build would.
	reg := load.NewRegistry(bundleBackend{}, cpu.Loader{})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, mdir string)
		want  string // base name of the default; "" for none
	}{
		{"empty folder: no default", func(*testing.T, string) {}, ""},
		{"SmolLM2 beats a model sorted before it", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, "aaa.gguf"))
			writeGGUF(t, filepath.Join(mdir, BundledChatModel))
		}, BundledChatModel},
		{"a Core ML bundle beats SmolLM2", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, BundledChatModel))
			coreml(t, mdir)
		}, "gemma4-e2b.mlmodelc"},
		{"otherwise the first by path", func(t *testing.T, mdir string) {
			writeGGUF(t, filepath.Join(mdir, "b.gguf"))
			writeGGUF(t, filepath.Join(mdir, "a.gguf"))
		}, "a.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mdir := storage.ModelsPath(dir)
			if err := os.MkdirAll(mdir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, mdir)
			a := New(Options{DataDir: dir, Version: "test", Backends: reg})
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
	writeGGUF(t, filepath.Join(mdir, "mine.gguf"))
	a := New(Options{DataDir: dir, Version: "test"})
	a.Startup(t.Context(), newRecorder())
	list, _ := a.Models.List()
	mine := list.DefaultID
	a.Shutdown()
	// SmolLM2 arrives later (make run fetched it): the user's default stays.
	writeOtherGGUF(t, filepath.Join(mdir, BundledChatModel))
	b := New(Options{DataDir: dir, Version: "test"})
	b.Startup(t.Context(), newRecorder())
	t.Cleanup(b.Shutdown)
	list, err := b.Models.List()
	if err != nil || len(list.Models) != 2 || mine == 0 || list.DefaultID != mine {
		t.Fatalf("after restart: %+v, %v; want both models registered and default %d kept", list, err, mine)
	}
}

// bundleBackend stands in for the Core ML backend in the start-up
// preference test: it opens any bundle as a model that cannot run.
type bundleBackend struct{}

func (bundleBackend) Name() string { return "coreml-stand-in" }

func (bundleBackend) Supports(src load.Source) error {
	if src.Format != load.CoreML {
		return errors.New("not a bundle")
	}
	return nil
}

func (bundleBackend) Open(_ context.Context, src load.Source, _ load.Options) (model.Backend, error) {
	return standIn{model.Config{Arch: "gemma4", VocabSize: 1 << 16, ContextLen: 64, Fingerprint: src.Fingerprint}}, nil
}

type standIn struct{ cfg model.Config }

func (s standIn) Config() model.Config { return s.cfg }
func (standIn) Widths() []int          { return []int{8} }
func (standIn) Forward(context.Context, []int32, int, *kv.Cache, model.Output) (model.Result, error) {
	return model.Result{}, errors.New("stand-in backend runs nothing")
}

// Models are inspected at start: a GGUF whose chat template is a bomb
// (issue 21) made the scan, and so the app's start, die of memory or hang.
// Now each one is a problem saying why, and the model next to them is
// found as usual.
func TestScanDirListsHostileTemplatesAsProblems(t *testing.T) {
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "good.gguf"))
	for name, tmpl := range map[string]string{
		// The repr of a list of 2,000 references to a 16 MB string: ~32 GB.
		"oom.gguf": "{% set s = 'x' * 16000000 %}{{ [s] * 2000 }}",
		// A rune count of a 16 MB string per loop turn, a million turns.
		"hang.gguf": "{% set s = 'x' * 16000000 %}{% for i in range(1000000) %}{% set n = s|length %}{% endfor %}",
	} {
		if err := gguf.EditFile(testres.Stories(t), filepath.Join(dir, name), map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
			t.Fatal(err)
		}
	}
	found, problems, err := ScanDir(context.Background(), backends.Registry(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || filepath.Base(found[0].Path) != "good.gguf" {
		t.Errorf("found %+v, want good.gguf", found)
	}
	if len(problems) != 2 {
		t.Fatalf("problems %+v, want hang.gguf and oom.gguf", problems)
	}
	for _, p := range problems {
		if !strings.Contains(p.Error, p.Path) || !strings.Contains(p.Error, "chat template failed") || !strings.Contains(p.Error, "line 1: template ") {
			t.Errorf("problem %+v does not name its file, its template and the limit", p)
		}
	}
}
