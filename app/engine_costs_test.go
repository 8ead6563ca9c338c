package app

import (
	"context"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/internal/kvindex"
	"anechat/storage"

	"anechat/internal/testres"
)

// TestEngineGeneratorKeepsCosts: with a snapshot store, the first
// speculative reply measures the call costs and stores them in the
// database; a new generator on the reopened database (a restart) loads them
// and does not measure; the text is the same as at width 1.
func TestEngineGeneratorKeepsCosts(t *testing.T) {
	path := testres.Stories(t)
	dir := t.TempDir()
	req := GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 24, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}
	plainGen := NewEngineGenerator(nil)
	plain, _ := collect(t, plainGen, req)
	plainGen.Close()
	req.Width = 4
	start := func() (*EngineGenerator, *kvindex.Index) {
		t.Helper()
		x, err := kvindex.Open(context.Background(), dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := NewEngineGenerator(nil)
		g.UseStorage(x, x.DB())
		return g, x
	}
	g, x := start()
	if text, _ := collect(t, g, req); text != plain {
		t.Fatalf("width 4: %q, width 1: %q", text, plain)
	}
	if n := chatSession(t, g).Measurements(); n != 1 {
		t.Fatalf("first start measured %d times, want 1", n)
	}
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	fp := src.Fingerprint
	if _, found, err := x.DB().SettingRaw(context.Background(), engine.CostsKey(fp, cpu.Kernels())); err != nil || !found {
		t.Fatalf("costs not stored: found %v, %v", found, err)
	}
	g.Close()
	x.Close()

	g, x = start()
	defer x.Close()
	defer g.Close()
	if text, _ := collect(t, g, req); text != plain {
		t.Fatalf("after restart, width 4: %q, width 1: %q", text, plain)
	}
	if n := chatSession(t, g).Measurements(); n != 0 {
		t.Errorf("after restart measured %d times, want 0 (stored costs)", n)
	}
}
