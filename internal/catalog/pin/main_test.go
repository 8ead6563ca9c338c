package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/catalog"
	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
	"anechat/internal/pull"
)

// testCatalog is a catalog file of entries on the fake Hub (a GGUF file, a
// bundle with folders, a gated GGUF) and one the Hub does not have.
const testCatalog = `{"_doc": ["a test catalog <for> the pin script"], "entries": [
 {"name":"smol","title":"SmolLM2","repo":"bartowski/SmolLM2-135M-Instruct-GGUF","revision":"main","format":"gguf","backend":"cpu",
  "context":8192,"licence":"Apache 2.0","licenceURL":"https://www.apache.org/licenses/LICENSE-2.0",
  "files":[{"path":"SmolLM2-135M-Instruct-Q8_0.gguf"}],"sources":["the fake Hub"]},
 {"name":"tiny-ane","title":"Tiny","repo":"anechat-test/tiny-coreml","revision":"main","format":"coreml","backend":"coreml",
  "context":16,"licence":"MIT","licenceURL":"https://opensource.org/license/mit",
  "files":[{"path":"model_config.json"},{"path":"hf_model/tokenizer.json","as":"tokenizer.json"},{"path":"swa/cos_sliding.npy","as":"cos_sliding.npy"},
   {"path":"swa/chunk1.mlmodelc/","as":"chunk1.mlmodelc/"},{"path":"swa/chunk2.mlmodelc/","as":"chunk2.mlmodelc/"}],"sources":["the fake Hub"]},
 {"name":"gated","title":"Gated","repo":"anechat-test/gated-GGUF","revision":"main","format":"gguf","backend":"cpu",
  "context":512,"licence":"Gemma","licenceURL":"https://ai.google.dev/gemma/terms","acceptOnHub":true,
  "files":[{"path":"gated-Q4_K_M.gguf"}],"sources":["the fake Hub"]},
 {"name":"gone","title":"Gone","repo":"anechat-test/no-such-repo","revision":"main","format":"gguf","backend":"cpu",
  "context":512,"licence":"MIT","licenceURL":"https://opensource.org/license/mit",
  "files":[{"path":"gone.gguf"}],"sources":["nowhere"]}]}`

func load(t *testing.T, file string) *catalog.Catalog {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPinAgainstTheFakeHub: the script writes each entry's commit and
// every file's size and checksum from the fake Hub's tree (sha256 for LFS,
// the Git blob id for Git), leaves an entry the Hub lacks (or a gated one,
// without a token) as it was and says so; a pinned entry then downloads
// its commit, and a pin the tree contradicts is refused.
func TestPinAgainstTheFakeHub(t *testing.T) {
	s := hubtest.Start(t)
	fx := s.Fixtures()
	file := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(file, []byte(testCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	err := run(context.Background(), s.URL, "", file, nil, &log)
	if err == nil || !strings.Contains(err.Error(), "gated, gone") {
		t.Fatalf("run: %v, want gated and gone not pinned\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "gone: not pinned: anechat-test/no-such-repo was not found") ||
		!strings.Contains(log.String(), "gated: not pinned: anechat-test/gated-GGUF is a gated repository") {
		t.Errorf("log:\n%s", log.String())
	}
	c := load(t, file)
	if !strings.Contains(string(mustRead(t, file)), "<for>") {
		t.Error("the file was written with HTML escapes")
	}
	smol, _ := c.Find("smol")
	const stories = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"
	if smol.Commit != fx.Repos[smol.Repo].Commit || smol.Revision != "main" || len(smol.Pins) != 1 ||
		smol.Pins[0] != (catalog.Pin{Path: "SmolLM2-135M-Instruct-Q8_0.gguf", Size: 1185376, SHA256: stories}) {
		t.Errorf("smol: %+v", smol)
	}
	tiny, _ := c.Find("tiny-ane")
	blobs, sums := 0, 0
	for _, p := range tiny.Pins {
		if p.GitBlob != "" {
			blobs++
		} else {
			sums++
		}
	}
	if tiny.Commit != fx.Repos[tiny.Repo].Commit || len(tiny.Pins) != 9 || blobs != 4 || sums != 5 {
		t.Errorf("tiny-ane: commit %s, %d pins (%d Git, %d LFS): %+v", tiny.Commit, len(tiny.Pins), blobs, sums, tiny.Pins)
	}
	for _, n := range []string{"gated", "gone"} {
		if e, _ := c.Find(n); e.Commit != "" || e.Pins != nil {
			t.Errorf("%s was changed: %+v", n, e)
		}
	}

	// Only the entry named, with a token: the gated one is pinned too.
	log.Reset()
	if err := run(context.Background(), s.URL, hubtest.Token, file, []string{"gated"}, &log); err != nil {
		t.Fatalf("pin gated with the token: %v\n%s", err, log.String())
	}
	if g, _ := load(t, file).Find("gated"); g.Commit == "" || len(g.Pins) != 1 || g.Pins[0].SHA256 != stories {
		t.Errorf("gated with the token: %+v", g)
	}

	// A pinned entry downloads its commit and its pinned files.
	c = load(t, file)
	hc, _ := hub.New(s.URL, nil)
	tg, err := pull.ParseTarget(c, "tiny-ane")
	if err != nil || tg.Revision != tiny.Commit {
		t.Fatalf("target of the pinned entry: %+v, %v", tg, err)
	}
	if p, err := pull.Make(context.Background(), hc, tg, nil); err != nil || p.Commit != tiny.Commit || len(p.Bundle.Files) != 9 {
		t.Fatalf("plan of the pinned entry: %v", err)
	}
	// A pin the tree contradicts (another checksum, a file more) is refused.
	e, _ := c.Find("tiny-ane")
	e.Pins[0].GitBlob = strings.Repeat("0", 40)
	if _, err := pull.Make(context.Background(), hc, tg, nil); err == nil || !strings.Contains(err.Error(), "differs from the catalog's pin of "+e.Pins[0].Path) {
		t.Errorf("a wrong pin: %v", err)
	}
	fresh := load(t, file)
	e, _ = fresh.Find("tiny-ane")
	e.Pins = append(e.Pins, catalog.Pin{Path: "extra.bin", Size: 1, SHA256: stories})
	tg, _ = pull.ParseTarget(fresh, "tiny-ane")
	if _, err := pull.Make(context.Background(), hc, tg, nil); err == nil || !strings.Contains(err.Error(), "10 pinned") {
		t.Errorf("a pin of a file not taken: %v", err)
	}
	if err := run(context.Background(), s.URL, "", file, []string{"nosuch"}, &log); err == nil || !strings.Contains(err.Error(), `no entry "nosuch"`) {
		t.Errorf("an unknown entry named: %v", err)
	}
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
