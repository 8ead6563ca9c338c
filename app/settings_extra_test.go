package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/storage"
)

// fakeBundle makes a Core ML bundle folder (its tokenizer and a program
// file): Detect reads it, no backend of a Linux build runs it.
func fakeBundle(t *testing.T, dir string) string {
	t.Helper()
	b := filepath.Join(dir, "gemma4-e2b.mlmodelc")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(b, "model.mil"), []byte("program"), 0o644)
	os.WriteFile(filepath.Join(b, "manifest.json"), []byte(`{"architecture": "gemma4"}`), 0o644)
	return b
}

func TestImportCoreMLBundleSaysItCannotRunHere(t *testing.T) {
	a, _, dir := start(t, &scripted{pieces: []string{"x"}})
	res, err := a.Models.Import(fakeBundle(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Runnable || res.Backend != "" || !strings.Contains(res.Note, "Core ML") || res.Model.Kind != KindCoreML || res.Model.Name != "gemma4-e2b" {
		t.Fatalf("Import(bundle) = %+v", res)
	}
	if m := metaOf(res.Model); m.Arch != "gemma4" || m.Unsupported != res.Note {
		t.Fatalf("bundle meta %+v", m)
	}
	// Listed, but never made the default, and a chat on it says why.
	list, _ := a.Models.List()
	if len(list.Models) != 1 || list.DefaultID != 0 {
		t.Fatalf("models %+v default %d", list.Models, list.DefaultID)
	}
	if err := a.Models.SetDefault(res.Model.ID); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "cannot run here") {
		t.Fatalf("SetDefault(bundle): %v", err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{ModelID: res.Model.ID})
	if _, err := a.Chat.Send(c.ID, "hi"); err == nil || !strings.Contains(err.Error(), "cannot run here") {
		t.Fatalf("Send on the bundle: %v", err)
	}
	if th, _ := a.Chat.Thread(c.ID); len(th.Messages) != 0 {
		t.Fatalf("a refused send stored %d messages", len(th.Messages))
	}
	// A runnable model imports as one; a broken file is an error.
	gg := filepath.Join(t.TempDir(), "tiny.gguf")
	writeGGUF(t, gg)
	res, err = a.Models.Import(gg)
	if err != nil || !res.Runnable || res.Backend != "cpu" || res.Note != "" {
		t.Fatalf("Import(gguf) = %+v, %v", res, err)
	}
	if list, _ := a.Models.List(); list.DefaultID != res.Model.ID {
		t.Fatalf("the runnable import did not become the default: %+v", list)
	}
	bad := filepath.Join(dir, "broken.gguf")
	os.WriteFile(bad, []byte("GGUF nonsense"), 0o644)
	if _, err := a.Models.Import(bad); err == nil || !strings.Contains(err.Error(), "broken.gguf") {
		t.Fatalf("Import(broken) = %v", err)
	}
	if _, err := a.Models.Import(" "); err == nil {
		t.Fatal("Import of no path succeeded")
	}
}

func TestCacheUsageAndClear(t *testing.T) {
	a, _, dir := start(t, nil)
	d, _ := a.core.db()
	ctx := context.Background()
	kvDir := storage.KVPath(dir)
	p, _ := a.Library.Create(PromptInput{Title: "prepared", Body: "b"})
	var ids []int64
	for i, size := range []int64{1000, 2000, 4000} {
		name := []string{"a.kv", "b.kv", "c.kv"}[i]
		os.WriteFile(filepath.Join(kvDir, name), make([]byte, size), 0o644)
		s, err := d.InsertSnapshot(ctx, storage.SnapshotInput{FilePath: name, ModelFingerprint: "m", TokenizerFingerprint: "t",
			TokenCount: 64, Bytes: size, BlockHashes: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if err := d.SetPromptSnapshot(ctx, p.ID, ids[2]); err != nil {
		t.Fatal(err)
	}
	u, err := a.Settings.Cache()
	if err != nil || u.UsedBytes != 7000 || u.Snapshots != 3 || u.Pinned != 1 || u.PinnedBytes != 4000 || u.QuotaBytes != storage.DefaultKVQuotaBytes || u.Dir != kvDir {
		t.Fatalf("Cache() = %+v, %v", u, err)
	}
	res, err := a.Settings.ClearCache(false)
	if err != nil || res.Removed != 2 || res.FreedBytes != 3000 || res.Usage.UsedBytes != 4000 || len(res.Problems) != 0 {
		t.Fatalf("ClearCache(false) = %+v, %v", res, err)
	}
	for _, n := range []string{"a.kv", "b.kv"} {
		if _, err := os.Stat(filepath.Join(kvDir, n)); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", n, err)
		}
	}
	if got, _ := a.Library.Get(p.ID); got.PinnedSnapshotID != ids[2] {
		t.Fatalf("the prepared prompt lost its snapshot: %+v", got)
	}
	res, err = a.Settings.ClearCache(true)
	if err != nil || res.Removed != 1 || res.Usage.UsedBytes != 0 {
		t.Fatalf("ClearCache(true) = %+v, %v", res, err)
	}
	if got, _ := a.Library.Get(p.ID); got.PinnedSnapshotID != 0 || got.Snapshot != nil {
		t.Fatalf("after clearing pinned snapshots the prompt says %+v", got)
	}
}

func TestThemeAndSettingsValidation(t *testing.T) {
	a, _, _ := start(t, nil)
	p, _ := a.Settings.Get()
	if p.Theme != ThemeSystem || p.ModelTitles || p.DefaultSystemPrompt != "" {
		t.Fatalf("defaults %+v", p)
	}
	p.Theme = ThemeDark
	if got, err := a.Settings.Update(p); err != nil || got.Theme != ThemeDark {
		t.Fatalf("Update(dark) = %+v, %v", got, err)
	}
	p.Theme = "purple"
	if _, err := a.Settings.Update(p); err == nil || !strings.Contains(err.Error(), `theme "purple"`) {
		t.Fatalf("theme purple: %v", err)
	}
	p.Theme = ThemeLight
	p.DefaultSystemPrompt = strings.Repeat("x", maxSystemPrompt+1)
	if _, err := a.Settings.Update(p); err == nil || !strings.Contains(err.Error(), "default system prompt") {
		t.Fatalf("huge system prompt: %v", err)
	}
	if got, _ := a.Settings.Reset(); got.Theme != ThemeSystem {
		t.Fatalf("Reset theme %q", got.Theme)
	}
}

func TestWindowStateIsRemembered(t *testing.T) {
	dir := t.TempDir()
	if got := LoadWindowState(context.Background(), dir); got != DefaultWindow {
		t.Fatalf("first start: %+v, want %+v", got, DefaultWindow)
	}
	a, _, _ := startIn(t, dir, nil)
	if err := a.SaveWindowState(WindowState{Width: 1400, Height: 900, Maximised: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveWindowState(WindowState{Width: 10, Height: 900}); err == nil {
		t.Fatal("a 10 px wide window was stored")
	}
	a.Shutdown()
	if got := LoadWindowState(context.Background(), dir); got != (WindowState{Width: 1400, Height: 900, Maximised: true, Theme: ThemeSystem}) {
		t.Fatalf("after a restart: %+v", got)
	}
	// A value out of range in the database opens the default window.
	d, err := storage.Open(context.Background(), storage.DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	d.SetSetting(context.Background(), keyWindow, WindowState{Width: 99999, Height: 5})
	d.Close()
	if got := LoadWindowState(context.Background(), dir); got != DefaultWindow {
		t.Fatalf("corrupt state: %+v", got)
	}
}

func TestTheStoredThemeIsThereBeforeThePageRuns(t *testing.T) {
	dir := t.TempDir()
	a, _, _ := startIn(t, dir, nil)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "asset "+r.URL.Path) })
	h := a.ThemeScript(next)
	get := func(path string) (string, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Body.String(), rec.Header().Get("Content-Type")
	}
	if body, _ := get("/index.html"); body != "asset /index.html" {
		t.Fatalf("other assets: %q", body)
	}
	if body, ct := get(ThemeScriptPath); !strings.Contains(body, "delete document.documentElement.dataset.theme") || !strings.HasPrefix(ct, "text/javascript") {
		t.Fatalf("system theme script %q (%s)", body, ct)
	}
	p, _ := a.Settings.Get()
	p.Theme = ThemeDark
	if _, err := a.Settings.Update(p); err != nil {
		t.Fatal(err)
	}
	if body, _ := get(ThemeScriptPath); body != "document.documentElement.dataset.theme = \"dark\";\n" {
		t.Fatalf("dark theme script %q", body)
	}
	a.Shutdown()
	// The next start opens the window with it.
	if got := LoadWindowState(context.Background(), dir); got.Theme != ThemeDark || got.Width != DefaultWindow.Width {
		t.Fatalf("window state after choosing dark: %+v", got)
	}
}

func TestSystemBackendOpenDataDirAndFirstRun(t *testing.T) {
	var opened []string
	dir := t.TempDir()
	a := New(Options{DataDir: dir, Open: func(_ context.Context, p string) error { opened = append(opened, p); return nil }})
	a.Startup(context.Background(), newRecorder())
	t.Cleanup(a.Shutdown)
	b, err := a.System.Backend()
	if err != nil || b.Backend != "" || !strings.Contains(b.Why, "no default model") || len(b.Available) == 0 || b.CoreML == "" {
		t.Fatalf("Backend() without a model = %+v, %v", b, err)
	}
	fr, err := a.System.FirstRun()
	if err != nil || !fr.Empty || fr.DefaultModel != nil || fr.NoModel == "" || len(fr.Examples) != 3 || fr.ModelsDir != storage.ModelsPath(dir) {
		t.Fatalf("FirstRun() without a model = %+v, %v", fr, err)
	}
	mdl := withModel(t, a, dir)
	b, err = a.System.Backend()
	// Why names the file's kind; where Core ML runs is CoreML's, said once.
	if err != nil || b.Backend != "cpu" || b.Model != mdl.Name || !strings.HasPrefix(b.Why, "it is a GGUF file; Core ML runs only Core ML bundles") || strings.Contains(b.Why, b.CoreML) {
		t.Fatalf("Backend() = %+v, %v", b, err)
	}
	fr, _ = a.System.FirstRun()
	if fr.DefaultModel == nil || fr.DefaultModel.ID != mdl.ID || fr.NoModel != "" {
		t.Fatalf("FirstRun() = %+v", fr)
	}
	for _, e := range fr.Examples {
		if e.Title == "" || e.Text == "" {
			t.Fatalf("example %+v", e)
		}
	}
	a.Chat.CreateConversation(NewConversation{})
	if fr, _ := a.System.FirstRun(); fr.Empty {
		t.Fatal("FirstRun says empty with a conversation")
	}
	if err := a.System.OpenDataDir(); err != nil || len(opened) != 1 || opened[0] != dir {
		t.Fatalf("OpenDataDir: %v, opened %v", err, opened)
	}
	c := New(Options{DataDir: dir, Open: func(context.Context, string) error { return errors.New("no file manager") }})
	c.Startup(context.Background(), newRecorder())
	t.Cleanup(c.Shutdown)
	if err := c.System.OpenDataDir(); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no file manager") {
		t.Fatalf("a failing opener: %v", err)
	}
	if _, err := a.System.ChooseFolder("x"); err == nil {
		t.Fatal("ChooseFolder without a window succeeded")
	}
}

func TestLaunchEnvRestoresTheUsersXDG(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data/anechat/webview")
	t.Setenv(OriginalEnvPrefix+"XDG_DATA_HOME", "/home/u/.local/share")
	t.Setenv("XDG_CACHE_HOME", "/data/anechat/cache")
	t.Setenv(OriginalEnvPrefix+"XDG_CACHE_HOME", "")
	env := "\n" + strings.Join(launchEnv(), "\n") + "\n"
	if !strings.Contains(env, "\nXDG_DATA_HOME=/home/u/.local/share\n") || strings.Contains(env, "XDG_CACHE_HOME") || strings.Contains(env, OriginalEnvPrefix) {
		t.Fatalf("launch environment:\n%s", env)
	}
}
