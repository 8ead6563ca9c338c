package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/backends"
	"anechat/internal/testres"
	"anechat/storage"
)

// TestScanSkipsNamedPipes: a named pipe called evil.gguf in the models
// folder, or a bundle whose manifest.json is one, made the app's start-up
// scan (and the Models page's) block forever (issue 21 part 2). Start-up
// now finishes, registers the real model beside them, and Scan lists both
// as problems saying they are not regular files.
func TestScanSkipsNamedPipes(t *testing.T) {
	dir := t.TempDir()
	mdir := storage.ModelsPath(dir)
	bundle := filepath.Join(mdir, "evil-bundle")
	if err := os.MkdirAll(filepath.Join(bundle, "chunk_0.mlpackage"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bundle, "embed.q8"), make([]byte, 64), 0o644)
	testres.Mkfifo(t, filepath.Join(bundle, "manifest.json"))
	testres.Mkfifo(t, filepath.Join(mdir, "evil.gguf"))
	writeGGUF(t, filepath.Join(mdir, "tiny.gguf"))

	a := New(Options{DataDir: dir, Version: "test", Backends: backends.Registry()})
	testres.Promptly(t, "start-up", func() error { a.Startup(t.Context(), newRecorder()); return nil })
	t.Cleanup(a.Shutdown)
	var res ScanResult
	err := testres.Promptly(t, "Models.Scan", func() (err error) { res, err = a.Models.Scan(); return err })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Registered) != 1 || filepath.Base(res.Registered[0].Path) != "tiny.gguf" {
		t.Errorf("registered %+v, want tiny.gguf", res.Registered)
	}
	want := map[string]string{
		filepath.Join(mdir, "evil.gguf"): filepath.Join(mdir, "evil.gguf") + " is not a regular file (a named pipe)",
		bundle:                           filepath.Join(bundle, "manifest.json") + " is not a regular file (a named pipe)",
	}
	for _, p := range res.Problems {
		if w, ok := want[p.Path]; ok && strings.Contains(p.Error, w) {
			delete(want, p.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("problems %+v lack %v", res.Problems, want)
	}
}
