package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
	"anechat/internal/secrets"
)

// syncBuffer is a log sink the downloads' goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// startTokenHub starts the app against the fake Hub (its files' bytes on
// another host, as the Hub's CDN) with the token kept in a 0600 file, its
// log in a buffer.
func startTokenHub(t *testing.T) (*App, *recorder, *hubtest.Server, *syncBuffer) {
	t.Helper()
	s := fakeHub(t)
	s.SplitCDN(t)
	dir := t.TempDir()
	logs := &syncBuffer{}
	a := New(Options{DataDir: dir, Version: "test", HubURL: s.URL, Machine: linux16,
		Secrets: secrets.File{Path: filepath.Join(dir, secrets.TokenFile)},
		Log:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	rec := newRecorder()
	a.Startup(context.Background(), rec)
	t.Cleanup(a.Shutdown)
	if info := a.System.Info(); info.StorageError != "" {
		t.Fatalf("storage did not open: %s", info.StorageError)
	}
	a.Downloads.progressEvery, a.Downloads.retryDelay = 0, time.Millisecond
	return a, rec, s, logs
}

// TestCatalogGatedEntryWithToken: the catalog's gated entry (gated on the
// fake Hub) is refused without a token, with the link and where a token
// goes; with the token pasted in Settings (shown masked) its sizes are
// read, one click downloads it — the token sent to the Hub, never to the
// CDN — and registers it; the search and the repository's files work with
// it too; cleared, the entry is refused again.
func TestCatalogGatedEntryWithToken(t *testing.T) {
	a, rec, s, logs := startTokenHub(t)
	const entry = "gemma-3-270m-it"
	if _, err := a.Catalog.Pull(PullRequest{Entry: entry}); !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "Settings") {
		t.Fatalf("Pull without a token: %v", err)
	}
	ht, err := a.Settings.HubToken()
	if err != nil || ht.Set || !strings.Contains(ht.Where, "0600") || ht.TokensURL != hub.TokensURL {
		t.Fatalf("HubToken with none stored: %+v, %v", ht, err)
	}
	if _, err := a.Settings.SetHubToken("hf_pasted alongside"); err == nil || strings.Contains(err.Error(), "pasted alongside") {
		t.Errorf("SetHubToken(not a token): %v", err)
	}
	ht, err = a.Settings.SetHubToken("  " + hubtest.Token + "\n")
	if err != nil || !ht.Set || ht.Masked != secrets.Mask(hubtest.Token) || ht.Error != "" || ht.Account != "anechat-tester" || ht.Note != "" {
		t.Fatalf("SetHubToken = %+v, %v", ht, err)
	}
	l, err := a.Catalog.Sizes()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == entry && (e.Error != "" || !e.SizeExact || e.Fit.Size != 1185376) {
			t.Errorf("the gated entry's size with the token: %+v", e)
		}
	}
	if ms, err := a.Catalog.Search("gemma"); err != nil || len(ms) != 1 || !ms[0].Gated {
		t.Errorf("Search with the token = %+v, %v", ms, err)
	}
	if rf, err := a.Catalog.Files("unsloth/gemma-3-270m-it-GGUF"); err != nil || !rf.Gated || len(rf.Quantisations) != 1 {
		t.Errorf("Files of the gated repository with the token = %+v, %v", rf, err)
	}
	d, err := a.Catalog.Pull(PullRequest{Entry: entry})
	if err != nil || d.Name != "gemma-3-270m-it-Q4_K_M.gguf" {
		t.Fatalf("Pull with the token = %+v, %v", d, err)
	}
	d = waitDownload(t, rec, ended(d.Name))
	if d.State != DownloadDone || d.Model == nil {
		t.Fatalf("download ended %+v", d)
	}
	cdn := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Path, "/cdn/") {
			cdn++
			if r.Authorization != "" {
				t.Errorf("the CDN was sent Authorization for %s", r.Path)
			}
		} else if strings.Contains(r.Path, "/resolve/") && r.Authorization != "Bearer "+hubtest.Token {
			t.Errorf("the Hub's resolve URL %s went without the token", r.Path)
		}
	}
	if cdn == 0 {
		t.Error("no file came from the CDN")
	}
	if _, err := a.Settings.ClearHubToken(); err != nil {
		t.Fatal(err)
	}
	if ht, _ := a.Settings.HubToken(); ht.Set {
		t.Errorf("after ClearHubToken: %+v", ht)
	}
	if _, err := a.Catalog.Pull(PullRequest{Repo: "anechat-test/gated-GGUF"}); !errors.Is(err, hub.ErrGated) {
		t.Errorf("Pull after the token was cleared: %v", err)
	}
	if strings.Contains(logs.String(), hubtest.Token) {
		t.Errorf("the log holds the token:\n%s", logs.String())
	}
}

// TestWrongTokenInPlainWords: a token the Hub refuses is not stored, the
// Settings page told "the token was refused"; one refused later (revoked
// after it was stored) makes the search, the catalog's sizes, a pull and a
// download by link say so and what to do; a valid token whose account did
// not accept the licence says so; the token is in none of those errors nor
// in the log.
func TestWrongTokenInPlainWords(t *testing.T) {
	a, rec, s, logs := startTokenHub(t)
	const wrong = "hf_refusedByTheFakeHub000000000000"
	var errs []string
	_, err := a.Settings.SetHubToken(wrong)
	if !errors.Is(err, hub.ErrTokenRefused) {
		t.Fatalf("SetHubToken(wrong) = %v", err)
	}
	errs = append(errs, err.Error())
	if ht, _ := a.Settings.HubToken(); ht.Set {
		t.Fatalf("a refused token was stored: %+v", ht)
	}
	// Stored, then revoked on the Hub: what each use says.
	if err := a.core.secrets().Set(wrong); err != nil {
		t.Fatal(err)
	}
	_, err = a.Catalog.Search("stories")
	if !errors.Is(err, hub.ErrTokenRefused) {
		t.Errorf("Search with a wrong token: %v", err)
	}
	errs = append(errs, err.Error())
	_, err = a.Catalog.Pull(PullRequest{Entry: "smollm2-135m-instruct"})
	if !errors.Is(err, hub.ErrTokenRefused) {
		t.Errorf("Pull with a wrong token: %v", err)
	}
	errs = append(errs, err.Error())
	l, err := a.Catalog.Sizes()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == "smollm2-135m-instruct" {
			errs = append(errs, e.Error)
		}
	}
	commit := s.Fixtures().Repos["anechat-test/gated-GGUF"].Commit
	d, err := a.Downloads.Start(DownloadRequest{URL: s.URL + "/anechat-test/gated-GGUF/resolve/" + commit + "/gated-Q4_K_M.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	d = waitDownload(t, rec, ended(d.Name))
	errs = append(errs, d.Error)
	for _, e := range errs {
		if !strings.HasPrefix(e, "the token was refused: ") || !strings.Contains(e, "Settings") || strings.Contains(e, wrong) {
			t.Errorf("error %q: want the token refused in plain words, without the token", e)
		}
	}
	if ht, err := a.Settings.SetHubToken(hubtest.UngrantedToken); err != nil || ht.Account != "anechat-other" {
		t.Fatalf("SetHubToken(a valid token) = %+v, %v", ht, err)
	}
	_, err = a.Catalog.Pull(PullRequest{Repo: "anechat-test/gated-GGUF"})
	if !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "no access") || strings.Contains(err.Error(), hubtest.UngrantedToken) {
		t.Errorf("Pull with a token not granted: %v", err)
	}
	if l := logs.String(); strings.Contains(l, wrong) || strings.Contains(l, hubtest.UngrantedToken) || !strings.Contains(l, "download failed") {
		t.Errorf("the log (want the failure, not the token):\n%s", l)
	}
}

// TestTokenStoredUncheckedOffline: with the Hub out of reach the token is
// stored all the same, saying it was not checked.
func TestTokenStoredUncheckedOffline(t *testing.T) {
	a, _, s, _ := startTokenHub(t)
	s.Close()
	ht, err := a.Settings.SetHubToken(hubtest.Token)
	if err != nil || !ht.Set || ht.Account != "" || !strings.HasPrefix(ht.Note, "stored without being checked: ") ||
		!strings.Contains(ht.Note, "could not be reached") || strings.Contains(ht.Note, hubtest.Token) {
		t.Errorf("SetHubToken offline = %+v, %v", ht, err)
	}
}
