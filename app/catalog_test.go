package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/internal/catalog"
	"anechat/internal/download"
	"anechat/internal/hub/hubtest"
	"anechat/internal/secrets"
	"anechat/internal/testres"
	"anechat/storage"
)

// startHub starts the app on data dir dir against the fake Hub s, judging
// fits against machine m, with fast retries and every progress event.
func startHub(t *testing.T, dir string, s *hubtest.Server, m catalog.Machine) (*App, *recorder) {
	t.Helper()
	// The token store is a file of the test's own (never the login keychain).
	a := New(Options{DataDir: dir, Version: "test", HubURL: s.URL, Machine: m, Secrets: secrets.File{Path: filepath.Join(dir, secrets.TokenFile)}})
	rec := newRecorder()
	a.Startup(context.Background(), rec)
	t.Cleanup(a.Shutdown)
	if info := a.System.Info(); info.StorageError != "" {
		t.Fatalf("storage did not open: %s", info.StorageError)
	}
	a.Downloads.progressEvery, a.Downloads.retryDelay = 0, time.Millisecond
	return a, rec
}

var (
	linux16 = catalog.Machine{GOOS: "linux", GOARCH: "amd64", RAM: 16 << 30}
	mac16   = catalog.Machine{GOOS: "darwin", GOARCH: "arm64", RAM: 16 << 30}
)

func fakeHub(t *testing.T) *hubtest.Server {
	s := hubtest.Start(t)
	s.Blobs["stories260K.gguf"] = testres.Stories(t)
	return s
}

// TestCatalogListFitsThisMachine: every catalog entry is listed with its
// size, memory need and fit; the Neural Engine bundle applies only on
// Apple silicon, where it is the recommended one; elsewhere it is marked
// as running elsewhere. Sizes fills in the sizes the Hub's trees give and
// says in words why an entry's could not be read.
func TestCatalogListFitsThisMachine(t *testing.T) {
	s := fakeHub(t)
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := startHub(t, t.TempDir(), s, mac16)
	l, err := mac.Catalog.List()
	if err != nil || len(l.Entries) != len(cat.Entries) || !l.NeuralEngine || l.RAM != 16<<30 {
		t.Fatalf("List on a Mac = %d entries, %+v, %v", len(l.Entries), l, err)
	}
	ane := l.Entries[0]
	if ane.Name != "gemma-4-e2b-ane" || !ane.Recommended || ane.Fit.Verdict != catalog.Fits || !ane.Fit.NeuralEngine ||
		ane.Fit.Size != cat.Entries[0].ApproxBytes || ane.SizeExact || ane.Fit.Need <= ane.Fit.Size || ane.Download != "gemma-4-e2b-ane" {
		t.Errorf("the Neural Engine entry on a 16 GB Mac: %+v", ane)
	}
	recommended := 0
	for _, e := range l.Entries {
		if e.Recommended {
			recommended++
		}
	}
	if recommended != 1 {
		t.Errorf("%d entries recommended, want 1", recommended)
	}

	a, _ := startHub(t, t.TempDir(), s, linux16)
	l, err = a.Catalog.List()
	if err != nil || l.NeuralEngine || l.Entries[0].Fit.Verdict != catalog.Elsewhere || l.Entries[0].Recommended {
		t.Fatalf("List on Linux: %+v, %v; want the Neural Engine entry marked elsewhere", l.Entries[0], err)
	}
	l, err = a.Catalog.Sizes()
	if err != nil {
		t.Fatal(err)
	}
	var smol CatalogEntry
	for _, e := range l.Entries {
		switch {
		case e.Name == "smollm2-135m-instruct":
			smol = e
		case e.Name == "gemma-3-270m-it":
			// Gated on the fake Hub: said so, with the link, and no token is stored.
			if !e.AcceptOnHub || !strings.Contains(e.Error, "gated repository") || !strings.Contains(e.Error, "Settings") {
				t.Errorf("%s (gated on the fake Hub): %+v", e.Name, e)
			}
		case e.Error == "" || !strings.Contains(e.Error, "not found"):
			t.Errorf("%s (not on the fake Hub): error %q, want not found in words", e.Name, e.Error)
		}
	}
	if smol.Error != "" || !smol.SizeExact || smol.Fit.Size != 1185376 || smol.Fit.Verdict != catalog.Fits || !smol.Recommended ||
		smol.Download != "SmolLM2-135M-Instruct-Q8_0.gguf" || smol.Link != s.URL+"/bartowski/SmolLM2-135M-Instruct-GGUF" {
		t.Errorf("smollm2 after Sizes: %+v", smol)
	}
}

// TestCatalogPullEntryRegistersTheDefault: one click on a catalog entry
// downloads its file from the Hub, checks its sha256 against the tree,
// registers it, makes it the default (there was none) and the list then
// says the entry is installed.
func TestCatalogPullEntryRegistersTheDefault(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	a, rec := startHub(t, dir, s, linux16)
	d, err := a.Catalog.Pull(PullRequest{Entry: "smollm2-135m-instruct"})
	if err != nil || d.Name != "SmolLM2-135M-Instruct-Q8_0.gguf" {
		t.Fatalf("Pull = %+v, %v", d, err)
	}
	d = waitDownload(t, rec, ended(d.Name))
	if d.State != DownloadDone || d.Model == nil {
		t.Fatalf("download ended %+v", d)
	}
	list, _ := a.Models.List()
	if len(list.Models) != 1 || list.DefaultID != d.Model.ID {
		t.Fatalf("models %+v: want the pulled model registered as the default", list)
	}
	l, _ := a.Catalog.List()
	for _, e := range l.Entries {
		if (e.ModelID != 0) != (e.Name == "smollm2-135m-instruct") || e.ModelID != 0 && e.ModelID != d.Model.ID {
			t.Errorf("entry %s: model %d", e.Name, e.ModelID)
		}
	}
	if _, err := a.Catalog.Pull(PullRequest{Entry: "no-such"}); err == nil || !strings.Contains(err.Error(), "not in the catalog") {
		t.Errorf("Pull of an unknown entry = %v", err)
	}
}

// TestCatalogSearchAndFiles: the search lists the Hub's GGUF and Core ML
// repositories; a repository's files are its quantisations (smallest
// first, with sizes and fits) or, with no GGUF file, its size as a bundle;
// a gated one says so with its link; errors are in plain words.
func TestCatalogSearchAndFiles(t *testing.T) {
	s := fakeHub(t)
	a, rec := startHub(t, t.TempDir(), s, linux16)
	ms, err := a.Catalog.Search("stories")
	if err != nil || len(ms) != 2 || ms[0].ID != "anechat-test/stories260K-GGUF" || ms[0].Format != "gguf" || ms[0].Downloads != 1200 {
		t.Fatalf("Search(stories) = %+v, %v", ms, err)
	}
	if _, err := a.Catalog.Search("  "); err == nil {
		t.Error("an empty search was sent")
	}
	f, err := a.Catalog.Files("anechat-test/stories260K-GGUF")
	if err != nil || f.Bundle || len(f.Quantisations) != 2 || f.Quantisations[0].Path != "stories260K-Q8_0.gguf" ||
		f.Quantisations[0].Size != 40000 || f.Quantisations[1].Size != 1185376 || f.Quantisations[1].Fit.Verdict != catalog.Fits {
		t.Fatalf("Files(stories) = %+v, %v", f, err)
	}
	b, err := a.Catalog.Files("anechat-test/tiny-coreml")
	if err != nil || !b.Bundle || b.Files != 12 || b.Size != 792143 || b.Fit.Verdict != catalog.Elsewhere {
		t.Fatalf("Files(tiny-coreml) = %+v, %v", b, err)
	}
	g, err := a.Catalog.Files("anechat-test/gated-GGUF")
	if err != nil || !g.Gated || g.Link != s.URL+"/anechat-test/gated-GGUF" {
		t.Fatalf("Files(gated) = %+v, %v", g, err)
	}
	if _, err := a.Catalog.Pull(PullRequest{Repo: "anechat-test/gated-GGUF"}); err == nil ||
		!strings.Contains(err.Error(), "licence must be accepted on Hugging Face") || !strings.Contains(err.Error(), g.Link) {
		t.Errorf("Pull(gated) = %v", err)
	}
	// A gated file asked for by its link: the failure says where to accept
	// the licence, as the plan's refusal does.
	d, err := a.Downloads.Start(DownloadRequest{URL: s.URL + "/anechat-test/gated-GGUF/resolve/main/gated-Q4_K_M.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if d = waitDownload(t, rec, ended(d.Name)); d.State != DownloadFailed || !strings.Contains(d.Error, "accept it") || !strings.Contains(d.Error, g.Link) {
		t.Errorf("download of a gated file ended %s: %q", d.State, d.Error)
	}
	if _, err := a.Catalog.Files("anechat-test/nothing"); err == nil || !strings.Contains(err.Error(), "was not found") {
		t.Errorf("Files(missing) = %v", err)
	}
	s.RateLimit(2)
	if _, err := a.Catalog.Search("stories"); err == nil || !strings.Contains(err.Error(), "limiting requests") {
		t.Errorf("Search rate limited = %v", err)
	}
	s.Close()
	if _, err := a.Catalog.Search("stories"); err == nil || !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("Search offline = %v", err)
	}
}

// TestBundleDownloadThroughDownloads: a whole repository downloads as one
// Download with every file's progress: a dropped connection is resumed, a
// file with a wrong sha256 pauses the set saying so (its bytes dropped,
// the others kept), a pause survives an app restart and Resume finishes
// it, the folder lands in the models folder only once complete, and
// nothing of the work folder is left.
func TestBundleDownloadThroughDownloads(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	repo := "anechat-test/tiny-coreml"
	s.DropAfter(repo, "embed_tokens_q8.bin", 50000)
	s.Corrupt(repo, "swa/cos_sliding.npy", true)
	a, rec := startHub(t, dir, s, linux16)
	d, err := a.Catalog.Pull(PullRequest{Repo: repo})
	if err != nil || d.Name != "tiny-coreml" || len(d.Files) != 12 || !strings.HasPrefix(d.Source, repo+"@") {
		t.Fatalf("Pull(bundle) = %+v, %v", d, err)
	}
	d = waitDownload(t, rec, func(d Download) bool { return d.Name == "tiny-coreml" && d.State == DownloadPaused })
	if !strings.Contains(d.Error, "swa/cos_sliding.npy") || !strings.Contains(d.Error, "Resume") {
		t.Fatalf("paused with %q, want the bad file named", d.Error)
	}
	dest := filepath.Join(storage.ModelsPath(dir), "tiny-coreml")
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bundle folder is in the models folder before it is complete (%v)", err)
	}
	done := 0
	for _, f := range d.Files {
		if f.State == download.FileDone {
			done++
		}
	}
	if done == 0 || done == len(d.Files) {
		t.Fatalf("%d of %d files done at the pause", done, len(d.Files))
	}
	// The dropped connection was retried from where it stopped.
	ranged := false
	for _, r := range s.Requests() {
		if strings.HasSuffix(r.Path, "embed_tokens_q8.bin") && strings.HasPrefix(r.Range, "bytes=") {
			ranged = true
		}
	}
	if !ranged {
		t.Error("the dropped file was not resumed with a Range request")
	}

	// A restart: the paused bundle is listed again with its progress.
	a.Shutdown()
	s.Corrupt(repo, "swa/cos_sliding.npy", false)
	b, rec2 := startHub(t, dir, s, linux16)
	list, err := b.Downloads.List()
	if err != nil || len(list) != 1 || list[0].Name != "tiny-coreml" || list[0].State != DownloadPaused || list[0].Received == 0 || len(list[0].Files) != 12 {
		t.Fatalf("after a restart: %+v, %v", list, err)
	}
	if _, err := b.Downloads.Resume("tiny-coreml"); err != nil {
		t.Fatal(err)
	}
	d = waitDownload(t, rec2, ended("tiny-coreml"))
	if d.Received != d.Total {
		t.Fatalf("ended %+v", d)
	}
	// The fake bundle's bytes are no model: it is installed, checked, and
	// the registration says why it is not a model (or, read as a Core ML
	// bundle this build cannot run, registers it saying so).
	t.Logf("ended %s: %s", d.State, d.Error)
	if d.State == DownloadFailed && !strings.Contains(d.Error, "every file checked") {
		t.Errorf("failed with %q", d.Error)
	}
	for _, f := range d.Files {
		if f.State != download.FileDone {
			t.Errorf("file %s %s", f.Path, f.State)
		}
	}
	want, _ := s.Content(repo, "swa/chunk1.mlmodelc/weights/weight.bin")
	got, err := os.ReadFile(filepath.Join(dest, "swa/chunk1.mlmodelc/weights/weight.bin"))
	if err != nil || string(got) != string(want) {
		t.Fatalf("installed file differs (%v)", err)
	}
	if names, _ := download.ListSets(filepath.Join(storage.ModelsPath(dir), BundlesDir)); len(names) != 0 {
		t.Errorf("work folders left: %v", names)
	}
}

// TestBundleDownloadCancelLeavesNothing: cancelling a bundle mid-file (and
// one paused, after a restart) removes its work folder; nothing reaches
// the models folder.
func TestBundleDownloadCancelLeavesNothing(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	repo := "anechat-test/tiny-coreml"
	s.Slow(4096, 5*time.Millisecond)
	a, rec := startHub(t, dir, s, linux16)
	if _, err := a.Catalog.Pull(PullRequest{Repo: repo}); err != nil {
		t.Fatal(err)
	}
	waitDownload(t, rec, func(d Download) bool { return d.Name == "tiny-coreml" && d.Received > 0 })
	if _, err := a.Downloads.Pause("tiny-coreml"); err != nil {
		t.Fatal(err)
	}
	a.Shutdown()
	b, _ := startHub(t, dir, s, linux16)
	if err := b.Downloads.Cancel("tiny-coreml"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Catalog.Pull(PullRequest{Repo: repo}); err != nil {
		t.Fatal(err)
	}
	if err := b.Downloads.Cancel("tiny-coreml"); err != nil {
		t.Fatal(err)
	}
	models, _ := os.ReadDir(storage.ModelsPath(dir))
	for _, e := range models {
		if e.Name() != downloadsDir {
			sub, _ := os.ReadDir(filepath.Join(storage.ModelsPath(dir), e.Name()))
			if e.Name() != BundlesDir || len(sub) != 0 {
				t.Errorf("left in the models folder: %s (%d entries)", e.Name(), len(sub))
			}
		}
	}
	if l, _ := b.Downloads.List(); len(l) != 0 {
		t.Errorf("downloads listed after cancel: %+v", l)
	}
}

// TestCatalogPullResumesThePausedDownload: pulling a model whose download
// is paused (by the window, or by `anechat pull` interrupted) resumes it
// from its bytes when it is the same commit's, and refuses when the
// paused one fetches from elsewhere, naming both.
func TestCatalogPullResumesThePausedDownload(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	repo := "anechat-test/tiny-coreml"
	s.Slow(4096, 2*time.Millisecond)
	a, rec := startHub(t, dir, s, linux16)
	if _, err := a.Catalog.Pull(PullRequest{Repo: repo}); err != nil {
		t.Fatal(err)
	}
	waitDownload(t, rec, func(d Download) bool { return d.Name == "tiny-coreml" && d.Received > 50_000 })
	paused, err := a.Downloads.Pause("tiny-coreml")
	if err != nil || paused.State != DownloadPaused {
		t.Fatalf("Pause = %+v, %v", paused, err)
	}
	s.Slow(0, 0)
	mark := len(s.Requests())
	d, err := a.Catalog.Pull(PullRequest{Repo: repo})
	if err != nil || d.State != DownloadRunning || d.Received < paused.Received {
		t.Fatalf("Pull of the paused bundle = %+v, %v: want it resumed from %d bytes", d, err, paused.Received)
	}
	d = waitDownload(t, rec, func(d Download) bool {
		return d.Name == "tiny-coreml" && (d.State == DownloadDone || d.State == DownloadFailed)
	})
	if d.Received != d.Total {
		t.Fatalf("ended %+v", d)
	}
	ranged := false
	for _, r := range s.Requests()[mark:] {
		for _, f := range paused.Files {
			if f.State == download.FileDone && strings.HasSuffix(r.Path, "/"+f.Path) {
				t.Errorf("the resumed pull fetched a file the paused one had checked: %s", r.Path)
			}
		}
		ranged = ranged || strings.Contains(r.Path, "/resolve/") && strings.HasPrefix(r.Range, "bytes=") && r.Range != "bytes=0-"
	}
	if !ranged {
		t.Error("the resumed pull asked for no file from where the paused one stopped")
	}

	// A file of the repository's branch, not of the commit Pull pins.
	s.Slow(4096, 2*time.Millisecond)
	gguf := "anechat-test/stories260K-GGUF"
	if _, err := a.Downloads.Start(DownloadRequest{URL: s.URL + "/" + gguf + "/resolve/main/stories260K.gguf", FileName: "stories260K.gguf"}); err != nil {
		t.Fatal(err)
	}
	waitDownload(t, rec, func(d Download) bool { return d.Name == "stories260K.gguf" && d.Received > 0 })
	if _, err := a.Downloads.Pause("stories260K.gguf"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Catalog.Pull(PullRequest{Repo: gguf, File: "stories260K.gguf"})
	if err == nil || !strings.Contains(err.Error(), "/resolve/main/stories260K.gguf is paused, not from") || !strings.Contains(err.Error(), "cancel it first") {
		t.Errorf("Pull with another source's download paused = %v", err)
	}
}
