package hub_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
	"anechat/internal/testres"
)

const gatedRepo = "anechat-test/gated-GGUF"

// TestTokenGoesToTheHubOnly: with a token, every request to the Hub (the
// search, the information, the tree, the resolve URL) carries it, and the
// redirect to the CDN — another host — does not: the gated file downloads
// whole and checks. Without a token nothing carries one and the file is
// refused as gated.
func TestTokenGoesToTheHubOnly(t *testing.T) {
	s := hubtest.Start(t)
	s.Blobs["stories260K.gguf"] = testres.Stories(t)
	s.SplitCDN(t)
	ctx := context.Background()
	c := client(t, s).WithToken(hubtest.Token)
	if !c.HasToken() || client(t, s).HasToken() {
		t.Fatal("HasToken")
	}
	if _, err := c.Search(ctx, "gated", "", 5); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, gatedRepo, "main")
	if err != nil || info.Gated != "manual" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	tree, err := c.Tree(ctx, gatedRepo, info.SHA)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := tree.Find("gated-Q4_K_M.gguf")
	if err := c.CheckAccess(ctx, gatedRepo, info.SHA, f.Path); err != nil {
		t.Fatalf("CheckAccess with the granted token: %v", err)
	}
	hc, err := hub.Authorize(nil, s.URL, hubtest.Token)
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(t.TempDir(), "f.part")
	m := download.Meta{URL: c.ResolveURL(gatedRepo, info.SHA, f.Path), Name: "f", Total: -1, SHA256: f.LFS.SHA256}
	if err := download.Fetch(ctx, download.Options{Client: hc, Reserve: 1}, part, &m, func(*download.Meta) error { return nil }, func(int64, int64) {}); err != nil {
		t.Fatalf("download of the gated file with the token: %v", err)
	}
	if sum, err := download.Verify(ctx, part, f.LFS.SHA256); err != nil || sum != f.LFS.SHA256 {
		t.Fatalf("downloaded file: %s, %v", sum, err)
	}
	hubHost := strings.TrimPrefix(s.URL, "http://")
	cdnSeen := false
	for _, r := range s.Requests() {
		switch {
		case strings.HasPrefix(r.Path, "/cdn/"):
			cdnSeen = true
			if r.Host == hubHost || r.Authorization != "" {
				t.Errorf("CDN request %s on %s carried Authorization %q", r.Path, r.Host, r.Authorization)
			}
		case r.Authorization != "Bearer "+hubtest.Token:
			t.Errorf("Hub request %s %s without the token", r.Method, r.Path)
		}
	}
	if !cdnSeen {
		t.Fatal("the file did not come from the CDN")
	}

	// No token: nothing carries one, the gated file is refused as gated.
	mark := len(s.Requests())
	plain := client(t, s)
	if err := plain.CheckAccess(ctx, gatedRepo, info.SHA, f.Path); !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "Settings") {
		t.Errorf("CheckAccess without a token: %v", err)
	}
	m = download.Meta{URL: c.ResolveURL(gatedRepo, info.SHA, f.Path), Name: "g", Total: -1}
	err = download.Fetch(ctx, download.Options{Reserve: 1}, filepath.Join(t.TempDir(), "g.part"), &m, func(*download.Meta) error { return nil }, func(int64, int64) {})
	if err := plain.DownloadError(err, gatedRepo, info.SHA, f.Path); !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), hub.EnvToken) {
		t.Errorf("download without a token: %v", err)
	}
	for _, r := range s.Requests()[mark:] {
		if r.Authorization != "" {
			t.Errorf("%s carried %q without a token given", r.Path, r.Authorization)
		}
	}
}

// TestAuthorizeStripsOtherHosts: a header set by the caller on a request
// to another host is removed, and the Hub's origin is its scheme, host and
// port (the same host on another port is another origin).
func TestAuthorizeStripsOtherHosts(t *testing.T) {
	var seen []string
	rt := roundTripper(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.URL.Host+"="+r.Header.Get("Authorization"))
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	hc, err := hub.Authorize(&http.Client{Transport: rt}, "https://hub.example:443", "hf_secret_token_123")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://hub.example:443/api/models", "https://hub.example:8443/x", "http://hub.example:443/x", "https://cdn.example/x"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer leaked")
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	want := []string{"hub.example:443=Bearer hf_secret_token_123", "hub.example:8443=", "hub.example:443=", "cdn.example="}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("headers sent: %v\nwant %v", seen, want)
	}
	if same, _ := hub.Authorize(http.DefaultClient, "https://hub.example", ""); same != http.DefaultClient {
		t.Error("no token: the client must be the one given")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTokenRefusedAndNotGranted: a token the Hub does not know is refused
// on every request ("the token was refused", the Hub's reason, what to do),
// a valid token whose account did not accept the licence is told so; the
// token is in no error.
func TestTokenRefusedAndNotGranted(t *testing.T) {
	s := hubtest.Start(t)
	ctx := context.Background()
	const wrong = "hf_thisTokenIsNotKnownAnywhere00000"
	bad := client(t, s).WithToken(wrong)
	_, err := bad.Search(ctx, "stories", "", 5)
	if !errors.Is(err, hub.ErrTokenRefused) || !strings.HasPrefix(err.Error(), "the token was refused: ") ||
		!strings.Contains(err.Error(), "Invalid credentials") || !strings.Contains(err.Error(), "Settings") || strings.Contains(err.Error(), wrong) {
		t.Errorf("search with a wrong token: %v", err)
	}
	commit := s.Fixtures().Repos[gatedRepo].Commit
	if err := bad.CheckAccess(ctx, gatedRepo, commit, "gated-Q4_K_M.gguf"); !errors.Is(err, hub.ErrTokenRefused) {
		t.Errorf("CheckAccess with a wrong token: %v", err)
	}
	err = bad.DownloadError(&download.StatusError{URL: "u", Code: 401, Status: "401 Unauthorized"}, gatedRepo, commit, "gated-Q4_K_M.gguf")
	if !errors.Is(err, hub.ErrTokenRefused) || strings.Contains(err.Error(), wrong) {
		t.Errorf("a download's 401 with a token: %v", err)
	}
	other := client(t, s).WithToken(hubtest.UngrantedToken)
	err = other.CheckAccess(ctx, gatedRepo, commit, "gated-Q4_K_M.gguf")
	if !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "account of your Hugging Face token has no access") ||
		!strings.Contains(err.Error(), s.URL+"/"+gatedRepo) || strings.Contains(err.Error(), hubtest.UngrantedToken) {
		t.Errorf("CheckAccess with a token not granted: %v", err)
	}
	// A token is used for open repositories too, and changes nothing there.
	if err := other.CheckAccess(ctx, "anechat-test/tiny-coreml", s.Fixtures().Repos["anechat-test/tiny-coreml"].Commit, "model_config.json"); err != nil {
		t.Errorf("open repository with a token: %v", err)
	}
}

// TestTokenFromEnv reads HF_TOKEN, trimmed.
func TestTokenFromEnv(t *testing.T) {
	t.Setenv(hub.EnvToken, " hf_fromTheEnvironment \n")
	if got := hub.TokenFromEnv(); got != "hf_fromTheEnvironment" {
		t.Errorf("TokenFromEnv = %q", got)
	}
	os.Unsetenv(hub.EnvToken)
	if got := hub.TokenFromEnv(); got != "" {
		t.Errorf("unset: %q", got)
	}
}

// TestWhoAmI: the Hub names a token's account; a token it refuses is
// ErrTokenRefused, without the token in the error.
func TestWhoAmI(t *testing.T) {
	s := hubtest.Start(t)
	ctx := context.Background()
	if name, err := client(t, s).WithToken(hubtest.Token).WhoAmI(ctx); err != nil || name != "anechat-tester" {
		t.Errorf("WhoAmI(granted) = %q, %v", name, err)
	}
	const wrong = "hf_unknownToTheFakeHub000000000"
	if _, err := client(t, s).WithToken(wrong).WhoAmI(ctx); !errors.Is(err, hub.ErrTokenRefused) || strings.Contains(err.Error(), wrong) {
		t.Errorf("WhoAmI(wrong) = %v", err)
	}
	if _, err := client(t, s).WhoAmI(ctx); err == nil {
		t.Error("WhoAmI without a token answered")
	}
}
