package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"anechat/app"
)

// pausedPulls leaves, through the window's own Pull, a paused download of
// each request in data dir dir (the fake Hub slowed, the app shut down
// part-way: what a window closed mid-download leaves).
func pausedPulls(t *testing.T, dir, hubURL string, reqs ...app.PullRequest) {
	t.Helper()
	a := app.New(app.Options{DataDir: dir, Headless: true, HubURL: hubURL})
	a.Startup(context.Background(), nil)
	for _, r := range reqs {
		if _, err := a.Catalog.Pull(r); err != nil {
			a.Shutdown()
			t.Fatalf("Pull(%+v): %v", r, err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	a.Shutdown()
}

// pausedNames lists the paused downloads of data dir dir, as the window would.
func pausedNames(t *testing.T, dir string) []string {
	t.Helper()
	a := app.New(app.Options{DataDir: dir, Headless: true})
	a.Startup(context.Background(), nil)
	defer a.Shutdown()
	list, err := a.Downloads.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range list {
		if d.State == app.DownloadPaused {
			out = append(out, d.Name)
		}
	}
	return out
}

// TestPullCancelLikeTheWindow: --cancel finds the paused download the way
// the window names it: a catalog entry by the entry's download, a
// repository's GGUF file by the file (or its quantisation); a repository
// with several paused downloads and no file named is refused, listing
// them, instead of one being discarded at random.
func TestPullCancelLikeTheWindow(t *testing.T) {
	s := fakeHub(t)
	s.Slow(4<<10, 20*time.Millisecond)
	dir := t.TempDir()
	const repo = "anechat-test/stories260K-GGUF"
	pausedPulls(t, dir, s.URL,
		app.PullRequest{Repo: repo, File: "stories260K.gguf"},
		app.PullRequest{Repo: repo, File: "Q8_0"},
		app.PullRequest{Entry: "smollm2-135m-instruct"})
	if got := strings.Join(pausedNames(t, dir), " "); got != "SmolLM2-135M-Instruct-Q8_0.gguf stories260K-Q8_0.gguf stories260K.gguf" {
		t.Fatalf("paused: %s", got)
	}
	code, _, errOut := runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", repo)
	if code != 1 || !strings.Contains(errOut, "2 paused downloads") || !strings.Contains(errOut, "stories260K-Q8_0.gguf, stories260K.gguf") {
		t.Errorf("--cancel REPO with two paused: exit %d: %s", code, errOut)
	}
	if got := len(pausedNames(t, dir)); got != 3 {
		t.Fatalf("%d paused after the refused --cancel, want 3", got)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", repo, "Q8_0")
	if code != 0 || !strings.Contains(errOut, "discarded the paused download of stories260K-Q8_0.gguf") {
		t.Errorf("--cancel REPO Q8_0: exit %d: %s", code, errOut)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", "smollm2-135m-instruct")
	if code != 0 || !strings.Contains(errOut, "discarded the paused download of SmolLM2-135M-Instruct-Q8_0.gguf") {
		t.Errorf("--cancel ENTRY: exit %d: %s", code, errOut)
	}
	if got := strings.Join(pausedNames(t, dir), " "); got != "stories260K.gguf" {
		t.Errorf("paused after both: %s", got)
	}
	code, _, errOut = runPullCLI(context.Background(), "pull", "--data-dir", dir, "--cancel", "smollm2-135m-instruct", "x.gguf")
	if code != 2 || !strings.Contains(errOut, "takes no file names") {
		t.Errorf("--cancel ENTRY FILE: exit %d: %s", code, errOut)
	}
}
