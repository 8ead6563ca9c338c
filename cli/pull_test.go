package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/app"
	"anechat/internal/hub/hubtest"
	"anechat/internal/testres"
	"anechat/storage"
)

// fakeHub starts the fake Hub with the real tiny model behind its GGUF
// repository.
func fakeHub(t *testing.T) *hubtest.Server {
	s := hubtest.Start(t)
	s.Blobs["stories260K.gguf"] = testres.Stories(t)
	return s
}

func runPullCLI(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(ctx, args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// pulledModels returns the data dir's registered models by file name, and the
// default model's name.
func pulledModels(t *testing.T, dir string) (map[string]storage.Model, string) {
	t.Helper()
	db, err := storage.Open(context.Background(), storage.DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := db.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]storage.Model{}
	for _, m := range ms {
		out[filepath.Base(m.Path)] = m
	}
	def, ok, err := db.DefaultModel(context.Background())
	if err != nil || !ok {
		return out, ""
	}
	return out, filepath.Base(def.Path)
}

// TestSearchCommand: the catalog's matches, then the Hub's GGUF and Core
// ML models with their downloads and whether they are gated; offline, the
// catalog still answers and the error says the Hub could not be reached.
func TestSearchCommand(t *testing.T) {
	s := fakeHub(t)
	code, out, errOut := runPullCLI(context.Background(), "search", "--hub", s.URL, "GGUF")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"anechat-test/stories260K-GGUF", "gguf", "1200 downloads", "anechat-test/gated-GGUF",
		"gated: accept its licence at " + s.URL + "/anechat-test/gated-GGUF first", "someone-else/stories-finetune-GGUF"} {
		if !strings.Contains(out, want) {
			t.Errorf("search GGUF does not list %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not-a-model") {
		t.Errorf("a repository of neither format was listed:\n%s", out)
	}
	code, out, _ = runPullCLI(context.Background(), "search", "--hub", s.URL, "--format", "coreml", "tiny")
	if code != 0 || !strings.Contains(out, "anechat-test/tiny-coreml") || strings.Contains(out, "stories") {
		t.Errorf("search --format coreml tiny: exit %d:\n%s", code, out)
	}
	// A repository's name: its quantisations, smallest first, then the search.
	code, out, errOut = runPullCLI(context.Background(), "search", "--hub", s.URL, "anechat-test/stories260K-GGUF")
	q8, whole := strings.Index(out, "stories260K-Q8_0.gguf"), strings.Index(out, "stories260K.gguf ")
	if code != 0 || q8 < 0 || whole < q8 || !strings.Contains(out, "1.1 MiB") || !strings.Contains(out, "anechat pull anechat-test/stories260K-GGUF stories260K-Q8_0.gguf") {
		t.Errorf("search OWNER/NAME: exit %d, %s:\n%s", code, errOut, out)
	}
	s.Close()
	code, out, errOut = runPullCLI(context.Background(), "search", "--hub", s.URL, "smollm2")
	if code != 1 || !strings.Contains(out, "smollm2-135m-instruct") || !strings.Contains(errOut, "could not be reached") {
		t.Errorf("offline: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runPullCLI(context.Background(), "search", "--format", "safetensors", "x"); code != 2 || !strings.Contains(errOut, "want gguf or coreml") {
		t.Errorf("--format safetensors: exit %d, %q", code, errOut)
	}
}

// TestPullGGUF: one GGUF file of a repository, picked by name, downloaded
// by the app's downloads, checked against the tree's sha256, registered
// and made the default; a pull interrupted part-way (Ctrl-C) resumes from
// its bytes the next time.
func TestPullGGUF(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	s.Slow(8<<10, 4*time.Millisecond)
	part := filepath.Join(dir, "models", ".downloads", "stories260K.gguf.part")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if st, err := os.Stat(part); err == nil && st.Size() > 100_000 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	code, _, errOut := runPullCLI(ctx, "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/stories260K-GGUF", "stories260K.gguf")
	cancel()
	if code != 130 || !strings.Contains(errOut, "paused: run the same command again") {
		t.Fatalf("interrupted pull: exit %d: %s", code, errOut)
	}
	st, err := os.Stat(part)
	if err != nil || st.Size() == 0 || st.Size() >= 1185376 {
		t.Fatalf("after the interruption the partial file is %v (%v): want part of the file", st, err)
	}
	s.Slow(0, 0)
	mark := len(s.Requests())
	code, out, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/stories260K-GGUF", "stories260K.gguf")
	if code != 0 {
		t.Fatalf("resumed pull: exit %d: %s", code, errOut)
	}
	t.Logf("resumed pull's stderr:\n%s", errOut)
	if !strings.Contains(errOut, "resuming the paused download") || !strings.Contains(errOut, "registered") || !strings.Contains(errOut, "(the default model)") {
		t.Errorf("stderr: %s", errOut)
	}
	resumedFrom := ""
	for _, r := range s.Requests()[mark:] {
		if strings.HasSuffix(r.Path, "/stories260K.gguf") && r.Range != "" {
			resumedFrom = r.Range
		}
	}
	if !strings.HasPrefix(resumedFrom, "bytes=") || resumedFrom == "bytes=0-" {
		t.Errorf("the resumed pull asked for %q: want the bytes after the partial file", resumedFrom)
	}
	final := filepath.Join(dir, "models", "stories260K.gguf")
	if strings.TrimSpace(out) != final {
		t.Errorf("stdout %q, want the model's path %s", out, final)
	}
	b, err := os.ReadFile(final)
	if err != nil || hubtest.SHA256(b) != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
		t.Fatalf("the model file: %d bytes, %v", len(b), err)
	}
	ms, def := pulledModels(t, dir)
	if m, ok := ms["stories260K.gguf"]; !ok || m.Kind != "gguf" || def != "stories260K.gguf" {
		t.Errorf("registered %+v, default %q", ms, def)
	}
	// Pulled again: the file in place is checked and registered, not fetched.
	mark = len(s.Requests())
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/stories260K-GGUF", "stories260K.gguf")
	if code != 0 || !strings.Contains(errOut, "its 1 file(s) match the tree") || !strings.Contains(errOut, "as model 1") {
		t.Errorf("pulled again: exit %d: %s", code, errOut)
	}
	for _, r := range s.Requests()[mark:] {
		if strings.Contains(r.Path, "/resolve/") {
			t.Errorf("pulled again, the file was fetched: %s", r.Path)
		}
	}
	if err := os.WriteFile(final, []byte("not the model"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/stories260K-GGUF", "stories260K.gguf")
	if code != 1 || !strings.Contains(errOut, "is already in the models folder but is not stories260K.gguf") {
		t.Errorf("other bytes in place: exit %d: %s", code, errOut)
	}
	// Several GGUF files and none named: the choices, with their sizes.
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/stories260K-GGUF")
	if code != 1 || !strings.Contains(errOut, "has 2 GGUF files") || !strings.Contains(errOut, "stories260K.gguf (1.1 MiB)") {
		t.Errorf("no file named: exit %d: %s", code, errOut)
	}
}

// TestPullBundle: a repository without GGUF files is a bundle: a dropped
// connection is resumed, a file whose bytes are not its sha256 fails the
// pull naming it with nothing in the models folder; the next pull resumes
// from what was checked, installs the folder at once and registers it as a
// Core ML model.
func TestPullBundle(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	const repo = "anechat-test/tiny-coreml"
	s.DropAfter(repo, "swa/chunk2.mlmodelc/weights/weight.bin", 50_000)
	s.Corrupt(repo, "swa/cos_sliding.npy", true)
	code, _, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 1 || !strings.Contains(errOut, "swa/cos_sliding.npy: sha256 mismatch") || !strings.Contains(errOut, "the files checked so far are kept: run the same command again to try again, or add --cancel to discard them") || strings.Contains(errOut, "Resume") {
		t.Fatalf("corrupt file: exit %d: %s", code, errOut)
	}
	resumed := false
	for _, r := range s.Requests() {
		resumed = resumed || strings.HasSuffix(r.Path, "/chunk2.mlmodelc/weights/weight.bin") && r.Range == "bytes=50000-"
	}
	if !resumed {
		t.Error("the dropped connection was not resumed from byte 50000")
	}
	bundle := filepath.Join(dir, "models", "tiny-coreml")
	if _, err := os.Stat(bundle); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed bundle is in the models folder: %v", err)
	}
	s.Corrupt(repo, "swa/cos_sliding.npy", false)
	code, out, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 0 || !strings.Contains(errOut, "resuming the paused download") || !strings.Contains(errOut, "checked 12 files") {
		t.Fatalf("resumed bundle: exit %d: %s", code, errOut)
	}
	t.Logf("resumed bundle's stderr:\n%s", errOut)
	if strings.TrimSpace(out) != bundle {
		t.Errorf("stdout %q, want %s", out, bundle)
	}
	for _, f := range []string{"model_config.json", "swa/chunk2.mlmodelc/weights/weight.bin", "hf_model/tokenizer.json"} {
		got, err := os.ReadFile(filepath.Join(bundle, filepath.FromSlash(f)))
		want, _ := s.Content(repo, f)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v", f, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "models", app.BundlesDir, "tiny-coreml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the work folder outlived the install: %v", err)
	}
	ms, _ := pulledModels(t, dir)
	if m, ok := ms["tiny-coreml"]; !ok || m.Kind != "coreml" {
		t.Errorf("registered %+v", ms)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 0 || !strings.Contains(errOut, "its 12 file(s) match the tree") {
		t.Errorf("pulled again: exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(bundle, "model_config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 1 || !strings.Contains(errOut, "model_config.json") || !strings.Contains(errOut, "remove or rename it first") {
		t.Errorf("a changed file in place: exit %d: %s", code, errOut)
	}
}

// TestPullCancelAndErrors: --cancel discards what an interrupted pull left
// (nothing stays in the models folder); a gated repository and a missing
// one are refused in plain words.
func TestPullCancelAndErrors(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	const repo = "anechat-test/tiny-coreml"
	s.Corrupt(repo, "swa/sin_sliding.npy", true)
	if code, _, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo); code != 1 {
		t.Fatalf("corrupt: exit %d: %s", code, errOut)
	}
	code, _, errOut := runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", repo)
	if code != 0 || !strings.Contains(errOut, "discarded the paused download of tiny-coreml") {
		t.Fatalf("--cancel: exit %d: %s", code, errOut)
	}
	filepath.WalkDir(filepath.Join(dir, "models"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left behind after --cancel: %s", p)
		}
		return nil
	})
	if code, _, errOut := runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", repo); code != 1 || !strings.Contains(errOut, "no paused download") {
		t.Errorf("--cancel with nothing to cancel: exit %d: %s", code, errOut)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/gated-GGUF")
	if code != 1 || !strings.Contains(errOut, "gated repository") || !strings.Contains(errOut, s.URL+"/anechat-test/gated-GGUF") {
		t.Errorf("gated: exit %d: %s", code, errOut)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, "anechat-test/nope")
	if code != 1 || !strings.Contains(errOut, "anechat-test/nope was not found") {
		t.Errorf("missing: exit %d: %s", code, errOut)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--data-dir", dir, "nosuch")
	if code != 2 || !strings.Contains(errOut, "neither a catalog entry") {
		t.Errorf("unknown entry: exit %d: %s", code, errOut)
	}
}

// TestPullBundleInterrupted: Ctrl-C pauses a bundle pull as the window's
// Pause would (it is the app's download): the window's services list it
// paused, from the repository's commit, with its bytes; the next pull
// resumes it from them rather than from the start, and installs it.
func TestPullBundleInterrupted(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	const repo = "anechat-test/tiny-coreml"
	s.Slow(8<<10, 4*time.Millisecond)
	parts := filepath.Join(dir, "models", app.BundlesDir, "tiny-coreml", "parts")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			var n int64
			filepath.WalkDir(parts, func(p string, d fs.DirEntry, err error) error {
				if info, ierr := os.Stat(p); err == nil && ierr == nil && strings.HasSuffix(p, ".part") {
					n += info.Size()
				}
				return nil
			})
			if n > 100_000 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	code, _, errOut := runPullCLI(ctx, "pull", "--hub", s.URL, "--data-dir", dir, repo)
	cancel()
	if code != 130 || !strings.Contains(errOut, "paused: run the same command again") || !strings.Contains(errOut, "[1/12]") {
		t.Fatalf("interrupted bundle pull: exit %d: %s", code, errOut)
	}
	w := app.New(app.Options{DataDir: dir, Headless: true, HubURL: s.URL})
	w.Startup(context.Background(), nil)
	list, err := w.Downloads.List()
	w.Shutdown()
	if err != nil || len(list) != 1 || list[0].Name != "tiny-coreml" || list[0].State != app.DownloadPaused ||
		!strings.HasPrefix(list[0].Source, repo+"@") || list[0].Received < 100_000 || list[0].Received >= list[0].Total {
		t.Fatalf("the window's downloads after Ctrl-C: %+v, %v", list, err)
	}
	s.Slow(0, 0)
	mark := len(s.Requests())
	code, out, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 0 || !strings.Contains(errOut, "resuming the paused download") || !strings.Contains(errOut, "checked 12 files") {
		t.Fatalf("resumed: exit %d: %s", code, errOut)
	}
	bundle := filepath.Join(dir, "models", "tiny-coreml")
	if strings.TrimSpace(out) != bundle {
		t.Errorf("stdout %q, want %s", out, bundle)
	}
	fetched := int64(0)
	for _, r := range s.Requests()[mark:] {
		if strings.Contains(r.Path, "/resolve/") && r.Range != "" && r.Range != "bytes=0-" {
			fetched++
		}
	}
	if fetched == 0 {
		t.Error("the resumed pull asked for no file from where the interrupted one stopped")
	}
	if ms, _ := pulledModels(t, dir); ms["tiny-coreml"].Kind != "coreml" {
		t.Errorf("registered %+v", ms)
	}
}

// TestPullCancelGGUF: --cancel discards a GGUF pull left paused by Ctrl-C
// (the app's Cancel: its partial file and sidecar go), naming the file.
func TestPullCancelGGUF(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	s.Slow(8<<10, 4*time.Millisecond)
	part := filepath.Join(dir, "models", ".downloads", "stories260K.gguf.part")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if st, err := os.Stat(part); err == nil && st.Size() > 50_000 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const repo = "anechat-test/stories260K-GGUF"
	if code, _, errOut := runPullCLI(ctx, "pull", "--hub", s.URL, "--data-dir", dir, repo, "stories260K.gguf"); code != 130 {
		t.Fatalf("interrupted pull: exit %d: %s", code, errOut)
	}
	cancel()
	code, _, errOut := runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", repo, "stories260K.gguf")
	if code != 0 || !strings.Contains(errOut, "discarded the paused download of stories260K.gguf") {
		t.Fatalf("--cancel: exit %d: %s", code, errOut)
	}
	filepath.WalkDir(filepath.Join(dir, "models"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left behind after --cancel: %s", p)
		}
		return nil
	})
}
