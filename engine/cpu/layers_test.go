package cpu

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenLayersRounds: OpenLayers passes every weight the layers, the
// final norm and the (tied) output projection compute with through round,
// each once, and leaves the per-layer embedding table, only indexed, as
// stored; what round writes is what the Layers compute with (all weights
// zeroed, the logits are zero); round's error fails the open, naming the
// checkpoint; the Layers' shapes and configuration are the model's.
func TestOpenLayersRounds(t *testing.T) {
	dir := filepath.Join(gemma4Dir, "model")
	var names []string
	l, err := OpenLayers(dir, func(name string, w []float32) error {
		names = append(names, name)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sorted := slices.Sorted(slices.Values(names))
	if len(slices.Compact(sorted)) != len(names) {
		t.Errorf("a weight was rounded twice: %v", names)
	}
	// The fixture's 98 tensors but the per-layer table.
	if len(names) != 97 || slices.Contains(names, "model.embed_tokens_per_layer.weight") || !slices.Contains(names, "model.embed_tokens.weight") {
		t.Errorf("%d weights rounded (want 97: all but model.embed_tokens_per_layer.weight): %v", len(names), names)
	}
	m, err := LoadGemma4(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := l.Config(), m.Config(); got.Hidden != want.Hidden || got.VocabSize != want.VocabSize || !slices.Equal(got.KV.Layers, want.KV.Layers) {
		t.Errorf("config %+v, the model's %+v", got, want)
	}
	for i, lo := range m.Arch().Layers {
		if s := l.Shape(i); s.Heads != m.Arch().Heads || s.KVHeads != lo.KVHeads || s.HeadDim != lo.HeadDim || s.FFN != lo.FFN {
			t.Errorf("layer %d: shape %+v, the model's %+v", i, s, lo)
		}
	}

	zero, err := OpenLayers(dir, func(_ string, w []float32) error { clear(w); return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	H, V := zero.Config().Hidden, zero.Config().VocabSize
	x := make([]float32, H)
	for i := range x {
		x[i] = float32(i + 1)
	}
	z := make([]float32, V)
	zero.Logits(x, 1, z)
	for i, v := range z {
		if v != 0 {
			t.Fatalf("logit %d = %g with every weight zeroed", i, v)
		}
	}

	bad := errors.New("weight refused")
	_, err = OpenLayers(dir, func(name string, _ []float32) error {
		if strings.Contains(name, "down_proj") {
			return bad
		}
		return nil
	}, nil)
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), dir) {
		t.Errorf("round's error: %v", err)
	}
}
