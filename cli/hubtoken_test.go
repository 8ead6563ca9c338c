package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
	"anechat/internal/secrets"
)

// TestPullGatedWithToken: a gated repository is refused without a token,
// saying where one goes; with $HF_TOKEN of an account that accepted the
// licence it downloads — the token sent to the Hub, never to the CDN its
// files come from — checks and registers; a token the Hub refuses says so
// in plain words, and the token is printed nowhere.
func TestPullGatedWithToken(t *testing.T) {
	s := fakeHub(t)
	s.SplitCDN(t)
	dir := t.TempDir()
	const repo = "anechat-test/gated-GGUF"
	t.Setenv(hub.EnvToken, "")
	code, _, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 1 || !strings.Contains(errOut, "gated repository") || !strings.Contains(errOut, hub.EnvToken) {
		t.Fatalf("no token: exit %d: %s", code, errOut)
	}
	const wrong = "hf_theFakeHubKnowsNothingOfThis0000"
	t.Setenv(hub.EnvToken, wrong)
	code, out, errOut := runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 1 || !strings.Contains(errOut, "the token was refused: ") || strings.Contains(out+errOut, wrong) {
		t.Errorf("wrong token: exit %d: %s", code, errOut)
	}
	code, out, errOut = runPullCLI(context.Background(), "search", "--hub", s.URL, "gated")
	if code != 1 || !strings.Contains(errOut, "the token was refused: ") || strings.Contains(out+errOut, wrong) {
		t.Errorf("search with a wrong token: exit %d: %s%s", code, out, errOut)
	}
	t.Setenv(hub.EnvToken, hubtest.UngrantedToken)
	code, _, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 1 || !strings.Contains(errOut, "has no access to it yet") {
		t.Errorf("token not granted: exit %d: %s", code, errOut)
	}
	t.Setenv(hub.EnvToken, hubtest.Token)
	mark := len(s.Requests())
	code, out, errOut = runPullCLI(context.Background(), "pull", "--hub", s.URL, "--data-dir", dir, repo)
	if code != 0 || strings.TrimSpace(out) != filepath.Join(dir, "models", "gated-Q4_K_M.gguf") || strings.Contains(out+errOut, hubtest.Token) {
		t.Fatalf("granted token: exit %d: %s%s", code, out, errOut)
	}
	cdn := 0
	for _, r := range s.Requests()[mark:] {
		switch {
		case strings.HasPrefix(r.Path, "/cdn/"):
			cdn++
			if r.Authorization != "" {
				t.Errorf("the CDN got Authorization for %s", r.Path)
			}
		case r.Authorization != "Bearer "+hubtest.Token:
			t.Errorf("%s %s went to the Hub without the token", r.Method, r.Path)
		}
	}
	if ms, _ := pulledModels(t, dir); cdn == 0 || ms["gated-Q4_K_M.gguf"].Kind != "gguf" {
		t.Errorf("CDN requests %d, registered %+v", cdn, ms)
	}
}

// TestSearchUsesTheStoredToken: without $HF_TOKEN, `anechat search` sends
// the token stored in Settings for the data dir (here the 0600 file).
func TestSearchUsesTheStoredToken(t *testing.T) {
	s := fakeHub(t)
	dir := t.TempDir()
	t.Setenv(hub.EnvToken, "")
	fileStore(t, dir)
	if err := secrets.Default(dir).Set(hubtest.Token); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPullCLI(context.Background(), "search", "--hub", s.URL, "--data-dir", dir, "gated")
	if code != 0 || !strings.Contains(out, "anechat-test/gated-GGUF") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, r := range s.Requests() {
		if r.Authorization != "Bearer "+hubtest.Token {
			t.Errorf("%s went without the stored token", r.Path)
		}
	}
}

// TestDoctorShowsTheTokenMasked: doctor says which token is sent ($HF_TOKEN
// or the stored one), masked; the token itself is in no line.
func TestDoctorShowsTheTokenMasked(t *testing.T) {
	dir := t.TempDir()
	fileStore(t, dir)
	t.Setenv(hub.EnvToken, "")
	code, out, _ := doctor(t, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "hub token: none") {
		t.Errorf("no token: exit %d:\n%s", code, out)
	}
	if err := secrets.Default(dir).Set(hubtest.Token); err != nil {
		t.Fatal(err)
	}
	code, out, _ = doctor(t, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "hub token: "+secrets.Mask(hubtest.Token)+", kept in") || strings.Contains(out, hubtest.Token) {
		t.Errorf("stored token: exit %d:\n%s", code, out)
	}
	t.Setenv(hub.EnvToken, hubtest.UngrantedToken)
	code, out, _ = doctor(t, "--data-dir", dir, "--json")
	if code != 0 || !strings.Contains(out, "$HF_TOKEN ("+secrets.Mask(hubtest.UngrantedToken)+")") || strings.Contains(out, hubtest.UngrantedToken) {
		t.Errorf("HF_TOKEN: exit %d:\n%s", code, out)
	}
	t.Setenv(hub.EnvToken, "hf_not a token")
	code, out, errOut := doctor(t, "--data-dir", dir)
	if code != 1 || strings.Contains(out+errOut, "not a token") {
		t.Errorf("HF_TOKEN that is no token: exit %d:\n%s%s", code, out, errOut)
	}
}

// fileStore skips the test where the stored token is not a file of the
// data dir (macOS: the user's keychain, which a test must not touch).
func fileStore(t *testing.T, dir string) {
	t.Helper()
	if _, ok := secrets.Default(dir).(secrets.File); !ok {
		t.Skip("the stored token is in the login keychain here: not touched by tests")
	}
}
