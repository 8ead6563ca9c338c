package hub_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
)

func client(t *testing.T, s *hubtest.Server) *hub.Client {
	t.Helper()
	c, err := hub.New(s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSearch: the search asks per format, keeps the Hub's fields (gated as
// a word), drops what no format filter matched, most downloaded first.
func TestSearch(t *testing.T) {
	s := hubtest.Start(t)
	c := client(t, s)
	ms, err := c.Search(context.Background(), "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID+":"+string(m.Format)+":"+string(m.Gated))
	}
	want := "anechat-test/stories260K-GGUF:gguf: anechat-test/tiny-coreml:coreml: anechat-test/gated-GGUF:gguf:manual unsloth/gemma-3-270m-it-GGUF:gguf:auto bartowski/SmolLM2-135M-Instruct-GGUF:gguf: someone-else/stories-finetune-GGUF:gguf:"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("search: %s\nwant %s", got, want)
	}
	ms, err = c.Search(context.Background(), "STORIES", hub.GGUF, 1)
	if err != nil || len(ms) != 1 || ms[0].ID != "anechat-test/stories260K-GGUF" || ms[0].Downloads != 1200 {
		t.Errorf("search STORIES gguf limit 1: %+v, %v", ms, err)
	}
	// The query the Hub's clients send: the text, the format's tag, the
	// order, and the fields wanted (gated is not in the default answer).
	asked := false
	for _, r := range s.Requests() {
		if r.Path == "/api/models" && strings.Contains(r.Query, "search=") {
			asked = true
			for _, want := range []string{"search=STORIES", "filter=gguf", "sort=downloads", "direction=-1", "limit=1", "expand=gated", "expand=downloads"} {
				if !strings.Contains(r.Query, want) {
					t.Errorf("search query %q lacks %s", r.Query, want)
				}
			}
		}
	}
	if !asked {
		t.Error("the search for STORIES did not reach /api/models")
	}
}

// TestInfoAndTree: a branch resolves to its commit; the tree of that commit
// is read across pages (the Link header) with sizes, LFS sha256 and Git
// blob ids, directories left out.
func TestInfoAndTree(t *testing.T) {
	s := hubtest.Start(t)
	s.PageSize = 3
	c := client(t, s)
	ctx := context.Background()
	info, err := c.Info(ctx, "anechat-test/tiny-coreml", "main")
	if err != nil {
		t.Fatal(err)
	}
	want := s.Fixtures().Repos["anechat-test/tiny-coreml"].Commit
	if info.SHA != want || info.Gated != "" {
		t.Fatalf("info: sha %q gated %q, want %q", info.SHA, info.Gated, want)
	}
	tree, err := c.Tree(ctx, "anechat-test/tiny-coreml", info.SHA)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Files) != 13 {
		t.Fatalf("tree: %d files, want 13: %+v", len(tree.Files), tree.Files)
	}
	pages := 0
	for _, r := range s.Requests() {
		if strings.Contains(r.Path, "/tree/") {
			pages++
		}
	}
	if pages < 5 {
		t.Errorf("the tree took %d pages; with 3 entries a page it needs at least 5", pages)
	}
	w, ok := tree.Find("swa/chunk1.mlmodelc/weights/weight.bin")
	if !ok || w.LFS == nil || w.Size != 300000 || w.LFS.SHA256 != hubtest.SHA256(hubtest.Bytes("anechat-test/tiny-coreml", w.Path, w.Size)) {
		t.Errorf("weight.bin: %+v %+v", w, w.LFS)
	}
	cfg, ok := tree.Find("model_config.json")
	b, _ := s.Content("anechat-test/tiny-coreml", "model_config.json")
	if !ok || cfg.LFS != nil || cfg.OID != hubtest.GitBlobID(b) || cfg.Size != int64(len(b)) {
		t.Errorf("model_config.json: %+v", cfg)
	}
	if _, ok := tree.Find("swa"); ok {
		t.Error("a directory is listed as a file")
	}
	g, err := c.Info(ctx, "anechat-test/gated-GGUF", "")
	if err != nil || g.Gated != "manual" {
		t.Errorf("gated info: %+v, %v", g, err)
	}
}

// TestErrors: each failure is its kind, in plain words naming what to do.
func TestErrors(t *testing.T) {
	s := hubtest.Start(t)
	c := client(t, s)
	ctx := context.Background()
	check := func(name string, err error, kind error, words ...string) {
		t.Helper()
		var he *hub.Error
		if !errors.Is(err, kind) || !errors.As(err, &he) {
			t.Errorf("%s: %v, want %v", name, err, kind)
			return
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
	}
	_, err := c.Info(ctx, "anechat-test/no-such-repo", "main")
	check("missing repo", err, hub.ErrNotFound, "anechat-test/no-such-repo was not found")
	_, err = c.Info(ctx, "anechat-test/tiny-coreml", "v9")
	check("missing revision", err, hub.ErrNotFound, `no revision "v9"`)
	s.RateLimit(1)
	_, err = c.Search(ctx, "x", hub.GGUF, 5)
	check("rate limited", err, hub.ErrRateLimited, "try again in 7s")
	var he *hub.Error
	if errors.As(err, &he) && he.RetryAfter != 7*time.Second {
		t.Errorf("retry after %v, want 7s", he.RetryAfter)
	}
	if _, err := c.Tree(ctx, "anechat-test/tiny-coreml", "main"); err == nil {
		t.Error("a tree of a branch name was read: it must be of a commit")
	}
	for _, bad := range []string{"../etc", "a/b/c", "a", "-x/y", "a/.."} {
		if _, err := c.Info(ctx, bad, ""); err == nil {
			t.Errorf("repository %q accepted", bad)
		}
	}
	s.Close()
	_, err = c.Search(ctx, "x", hub.GGUF, 5)
	check("offline", err, hub.ErrOffline, "could not be reached", "127.0.0.1")
}

// TestBaseURL: --hub wins over ANECHAT_HUB, which wins over the default;
// the Hub must be https or on this machine.
func TestBaseURL(t *testing.T) {
	t.Setenv(hub.EnvURL, "")
	if got := hub.BaseURL(""); got != hub.DefaultURL {
		t.Errorf("default: %s", got)
	}
	t.Setenv(hub.EnvURL, "https://mirror.example")
	if got := hub.BaseURL(""); got != "https://mirror.example" {
		t.Errorf("env: %s", got)
	}
	if got := hub.BaseURL("http://127.0.0.1:9"); got != "http://127.0.0.1:9" {
		t.Errorf("flag: %s", got)
	}
	if _, err := hub.New("http://mirror.example", nil); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http to another machine: %v", err)
	}
	c, err := hub.New("https://huggingface.co/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ResolveURL("o/r", "main", "dir/a b.gguf"); got != "https://huggingface.co/o/r/resolve/main/dir/a%20b.gguf" {
		t.Errorf("resolve URL %s", got)
	}
	if got := c.RepoURL("google/gemma"); got != "https://huggingface.co/google/gemma" {
		t.Errorf("repo URL %s", got)
	}
}

// TestDownloadError: a file download's failure in the Hub's words: the
// gated repository's resolve answer (401) with the link to accept the
// licence, a file gone (404), a server nowhere to be reached.
func TestDownloadError(t *testing.T) {
	s := hubtest.Start(t)
	c := client(t, s)
	ctx := context.Background()
	fetch := func(u string) error {
		m := download.Meta{URL: u, Name: "f", Total: -1}
		return download.Fetch(ctx, download.Options{Reserve: 1}, filepath.Join(t.TempDir(), "f.part"), &m,
			func(*download.Meta) error { return nil }, func(int64, int64) {})
	}
	const gated = "anechat-test/gated-GGUF"
	commit := s.Fixtures().Repos[gated].Commit
	err := c.DownloadError(fetch(c.ResolveURL(gated, commit, "gated-Q4_K_M.gguf")), gated, commit, "gated-Q4_K_M.gguf")
	if !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), s.URL+"/"+gated) || !strings.Contains(err.Error(), "accept it") {
		t.Errorf("gated file: %v", err)
	}
	const repo = "anechat-test/tiny-coreml"
	commit = s.Fixtures().Repos[repo].Commit
	err = c.DownloadError(fetch(c.ResolveURL(repo, commit, "gone.bin")), repo, commit, "gone.bin")
	if !errors.Is(err, hub.ErrNotFound) || !strings.Contains(err.Error(), "has no file gone.bin") {
		t.Errorf("missing file: %v", err)
	}
	other := errors.New("disk full")
	if got := c.DownloadError(other, repo, commit, "x"); got != other {
		t.Errorf("an error the Hub does not explain was changed: %v", got)
	}
	s.Close()
	err = c.DownloadError(fetch(c.ResolveURL(repo, commit, "model_config.json")), repo, commit, "model_config.json")
	if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("offline: %v", err)
	}
}

// TestGate: the Hub's "gated" is false, "auto" or "manual".
func TestGate(t *testing.T) {
	for in, want := range map[string]hub.Gate{`false`: "", `null`: "", `"auto"`: "auto", `"manual"`: "manual", `true`: "auto"} {
		var g hub.Gate
		if err := g.UnmarshalJSON([]byte(in)); err != nil || g != want {
			t.Errorf("%s: %q, %v", in, g, err)
		}
	}
	var g hub.Gate
	if err := g.UnmarshalJSON([]byte(`3`)); err == nil {
		t.Error("gated 3 accepted")
	}
}
