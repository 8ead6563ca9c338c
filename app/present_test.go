package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/internal/testres"
	"anechat/storage"
)

// TestCatalogPullFindsTheModelThere: a model already in the models folder
// — registered by `anechat pull`, or put there by hand — is recognised by
// the window's one click as the command line recognises it: its files are
// checked against the tree, it is registered (once), and nothing is
// fetched; a file of other bytes under the name is refused, left as it is.
func TestCatalogPullFindsTheModelThere(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	const name = "SmolLM2-135M-Instruct-Q8_0.gguf"
	models := storage.ModelsPath(dir)
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(models, name)
	if err := os.WriteFile(final, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := startHub(t, dir, s, linux16)
	for round := 0; round < 2; round++ { // put there by hand, then registered already
		d, err := a.Catalog.Pull(PullRequest{Entry: "smollm2-135m-instruct"})
		if err != nil {
			t.Fatalf("round %d: Pull of a model in the models folder: %v", round, err)
		}
		d = settled(t, a, name)
		if d.Model == nil || d.Model.Path != final || !strings.Contains(d.Error, "already in the models folder") || !strings.Contains(d.Error, "match the tree") {
			t.Fatalf("round %d: %+v", round, d)
		}
		if err := a.Downloads.Dismiss(name); err != nil {
			t.Errorf("round %d: Dismiss: %v", round, err)
		}
	}
	list, _ := a.Models.List()
	if len(list.Models) != 1 || list.Models[0].Path != final || list.DefaultID != list.Models[0].ID {
		t.Errorf("models %+v: want the file registered once, the default", list)
	}
	for _, r := range s.Requests() {
		if strings.Contains(r.Path, "/resolve/") || strings.HasPrefix(r.Path, "/cdn/") {
			t.Errorf("a model in place was fetched: %s", r.Path)
		}
	}
	l, _ := a.Catalog.List()
	for _, e := range l.Entries {
		if e.Name == "smollm2-135m-instruct" && e.ModelID != list.Models[0].ID {
			t.Errorf("the catalog entry: %+v", e)
		}
	}
	// Other bytes under the name: refused, the file left alone.
	if err := os.WriteFile(final, []byte("not the model"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := a.Catalog.Pull(PullRequest{Entry: "smollm2-135m-instruct"})
	if err == nil {
		d = settled(t, a, name)
	}
	msg := d.Error
	if err != nil {
		msg = err.Error()
	}
	if !strings.Contains(msg, "is already in the models folder but is not "+name) || !strings.Contains(msg, "remove or rename it first") {
		t.Errorf("other bytes in place: %q", msg)
	}
	if got, _ := os.ReadFile(final); string(got) != "not the model" {
		t.Error("the file in place was changed")
	}
}

// settled waits for the download called name to be neither running nor
// verifying, and returns it.
func settled(t *testing.T, a *App, name string) Download {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		list, _ := a.Downloads.List()
		for _, d := range list {
			if d.Name == name && d.State != DownloadRunning && d.State != DownloadVerifying {
				return d
			}
		}
	}
	t.Fatalf("%s did not settle within 10s", name)
	return Download{}
}
