package pull_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"anechat/internal/catalog"
	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
	"anechat/internal/pull"
)

// testCatalog has one bundle entry on the fake Hub's repository, with the
// CoreML-LLM layout flattened as the shipped Gemma 4 entry does.
func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(`{"entries":[{"name":"tiny-ane","title":"Tiny","repo":"anechat-test/tiny-coreml","revision":"main",
		"format":"coreml","backend":"coreml","context":16,"licence":"MIT","licenceURL":"https://opensource.org/license/mit",
		"files":[{"path":"model_config.json"},{"path":"hf_model/tokenizer.json","as":"tokenizer.json"},{"path":"swa/cos_sliding.npy","as":"cos_sliding.npy"},
		{"path":"swa/chunk1.mlmodelc/","as":"chunk1.mlmodelc/"},{"path":"swa/chunk2.mlmodelc/","as":"chunk2.mlmodelc/"}],"sources":["the fake Hub"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseTarget(t *testing.T) {
	cat := testCatalog(t)
	for in, want := range map[string]string{
		"tiny-ane":           "entry anechat-test/tiny-coreml@main",
		"o/r":                "o/r@main",
		"o/r@v1.0":           "o/r@v1.0",
		"o/r@refs/pr/1":      "o/r@refs/pr/1",
		"nosuch":             "error: neither a catalog entry (tiny-ane)",
		"o/r@":               "error: not a revision",
		"o/r@../x":           "error: not a revision",
		"https://example/o/": "error: not a repository",
	} {
		tg, err := pull.ParseTarget(cat, in)
		got := tg.Repo + "@" + tg.Revision
		if tg.Entry != nil {
			got = "entry " + got
		}
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, want) && !(strings.HasPrefix(want, "error:") && strings.Contains(got, strings.TrimPrefix(want, "error: "))) {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func TestMake(t *testing.T) {
	s := hubtest.Start(t)
	c, err := hub.New(s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cat := testCatalog(t)
	plan := func(target string, files ...string) (*pull.Plan, error) {
		tg, err := pull.ParseTarget(cat, target)
		if err != nil {
			t.Fatal(err)
		}
		return pull.Make(ctx, c, tg, files)
	}
	commit := s.Fixtures().Repos["anechat-test/stories260K-GGUF"].Commit

	// A repository with two GGUF files: name one, by name or quantisation.
	if _, err := plan("anechat-test/stories260K-GGUF"); err == nil || !strings.Contains(err.Error(), "has 2 GGUF files") ||
		!strings.Contains(err.Error(), "stories260K-Q8_0.gguf (39.1 KiB)") {
		t.Errorf("two GGUF files, none named: %v", err)
	}
	p, err := plan("anechat-test/stories260K-GGUF", "q8_0")
	if err != nil || p.GGUF == nil || p.Name != "stories260K-Q8_0.gguf" || p.Commit != commit ||
		p.GGUF.URL != s.URL+"/anechat-test/stories260K-GGUF/resolve/"+commit+"/stories260K-Q8_0.gguf" || len(p.GGUF.SHA256) != 64 {
		t.Errorf("pick by quantisation: %+v, %v", p, err)
	}
	p, err = plan("anechat-test/stories260K-GGUF@main", "stories260K.gguf")
	if err != nil || p.Name != "stories260K.gguf" || p.Size != 1185376 ||
		p.GGUF.SHA256 != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
		t.Errorf("pick by name: %+v, %v", p, err)
	}
	if _, err := plan("anechat-test/stories260K-GGUF", "Q2_K"); err == nil || !strings.Contains(err.Error(), `no GGUF file "Q2_K"`) {
		t.Errorf("a missing quantisation: %v", err)
	}
	if _, err := plan("anechat-test/stories260K-GGUF", "stories"); err == nil || !strings.Contains(err.Error(), "names 2") {
		t.Errorf("an ambiguous name: %v", err)
	}

	// A catalog bundle: its files at their places, every one checked.
	p, err = plan("tiny-ane")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.Bundle.Files {
		got = append(got, f.Path)
		if f.SHA256 == "" && f.GitBlob == "" || !strings.Contains(f.URL, "/resolve/"+p.Commit+"/") {
			t.Errorf("%s: %+v: unchecked or not pinned", f.Path, f)
		}
	}
	want := "model_config.json tokenizer.json cos_sliding.npy chunk1.mlmodelc/coremldata.bin chunk1.mlmodelc/model.mil chunk1.mlmodelc/weights/weight.bin chunk2.mlmodelc/coremldata.bin chunk2.mlmodelc/model.mil chunk2.mlmodelc/weights/weight.bin"
	if strings.Join(got, " ") != want || p.Name != "tiny-ane" || p.Bundle.Source != "anechat-test/tiny-coreml@"+p.Commit {
		t.Errorf("bundle %s: %s", p.Name, strings.Join(got, " "))
	}
	if _, err := plan("tiny-ane", "x"); err == nil {
		t.Error("a catalog entry took file names")
	}

	// The repository of a catalog bundle, no file named: the entry's layout
	// at the revision asked for.
	tg, err := pull.ParseTarget(cat, "anechat-test/tiny-coreml@main")
	if err != nil || tg.Entry != nil || tg.Layout == nil || tg.Layout.Name != "tiny-ane" {
		t.Fatalf("the catalog bundle's repository: %+v, %v", tg, err)
	}
	p, err = pull.Make(ctx, c, tg, nil)
	if err != nil || p.Name != "tiny-ane" || len(p.Bundle.Files) != 9 || p.Bundle.Files[1].Path != "tokenizer.json" {
		t.Errorf("the catalog bundle's repository: %+v, %v", p, err)
	}
	tg.Layout = nil

	// A repository with no GGUF: the whole of it, hidden files left out.
	p, err = pull.Make(ctx, c, tg, nil)
	if err != nil || p.Bundle == nil || len(p.Bundle.Files) != 12 || p.Name != "tiny-coreml" {
		t.Errorf("whole repository: %+v, %v", p, err)
	}
	p, err = pull.Make(ctx, c, tg, []string{"swa/chunk1.mlmodelc", "model_config.json"})
	if err != nil || len(p.Bundle.Files) != 4 {
		t.Errorf("a folder and a file of a repository: %+v, %v", p, err)
	}

	// A gated repository: refused up front, with the link.
	_, err = plan("anechat-test/gated-GGUF")
	var he *hub.Error
	if !errors.Is(err, hub.ErrGated) || !errors.As(err, &he) || he.Link != s.URL+"/anechat-test/gated-GGUF" || !strings.Contains(err.Error(), s.URL+"/anechat-test/gated-GGUF") {
		t.Errorf("gated: %v", err)
	}
}

// TestMakeGated: a gated repository is refused without a token (with the
// link and where a token goes); with the token of an account that accepted
// the licence it is planned (the Hub asked about its file first); a token
// whose account did not, or one the Hub refuses, is said before anything
// downloads.
func TestMakeGated(t *testing.T) {
	s := hubtest.Start(t)
	c, err := hub.New(s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tg, err := pull.ParseTarget(testCatalog(t), "anechat-test/gated-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pull.Make(ctx, c, tg, nil); !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "Settings") ||
		!strings.Contains(err.Error(), s.URL+"/anechat-test/gated-GGUF") {
		t.Errorf("no token: %v", err)
	}
	p, err := pull.Make(ctx, c.WithToken(hubtest.Token), tg, nil)
	if err != nil || p.GGUF == nil || p.Name != "gated-Q4_K_M.gguf" {
		t.Fatalf("granted token: %+v, %v", p, err)
	}
	heads := 0
	for _, r := range s.Requests() {
		if r.Method == "HEAD" && strings.HasSuffix(r.Path, "/gated-Q4_K_M.gguf") {
			heads++
		}
	}
	if heads != 1 {
		t.Errorf("%d HEAD requests for the gated file, want 1 (its access checked)", heads)
	}
	if _, err := pull.Make(ctx, c.WithToken(hubtest.UngrantedToken), tg, nil); !errors.Is(err, hub.ErrGated) || !strings.Contains(err.Error(), "no access") {
		t.Errorf("token not granted: %v", err)
	}
	if _, err := pull.Make(ctx, c.WithToken("hf_notKnownToTheFakeHub00000"), tg, nil); !errors.Is(err, hub.ErrTokenRefused) {
		t.Errorf("wrong token: %v", err)
	}
}
