package coreml

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/model"
)

type goldenCase struct {
	Bundle string  `json:"bundle"`
	Kind   string  `json:"kind"`
	Tokens []int32 `json:"tokens"`
	Start  int     `json:"start"`
	Inputs map[string]struct {
		Offset int   `json:"offset"`
		Shape  []int `json:"shape"`
	} `json:"inputs"`
}

// goldenRow is gen.py's kv_row: a synthetic fp16-exact K or V row of owner
// s at position q in the kv.Cache layout (row[h*hd+d]).
func goldenRow(s, q, kvh, hd int, v bool) []float32 {
	row := make([]float32, kvh*hd)
	off := 0
	if v {
		off = 11
	}
	for h := range kvh {
		for d := range hd {
			row[h*hd+d] = float32((s*7+q*3+h*5+d+off)%31-15) / 8
		}
	}
	return row
}

// TestHostInputsMatchPython: for every call gen.py recorded, the inputs the
// Go host builds (sidecar rows, per-layer rows, RoPE rows, masks, placement,
// the one-hot last row, the cache tensors) are the Python host's
// (anebundle.host, the converter's reference host) bit for bit. Cache
// tensors are compared where the format fixes them: the slots of visible
// positions, and the call's own slots (zero); other slots "may hold
// anything finite".
func TestHostInputsMatchPython(t *testing.T) {
	raw, err := os.ReadFile(testData(t, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	blob, err := os.ReadFile(testData(t, "golden.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []goldenCase }
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 5 {
		t.Fatalf("golden.json has %d cases", len(g.Cases))
	}
	bundles := map[string]*Model{}
	recs := map[string]*recorder{}
	for _, c := range g.Cases {
		be := bundles[c.Bundle]
		if be == nil {
			rec := &recorder{dt: mlcore.Float16}
			b := openTestBundle(t, c.Bundle)
			var err error
			if be, err = NewModel(b, rec, "test"); err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			bundles[c.Bundle], recs[c.Bundle] = be, rec
		}
		rec := recs[c.Bundle]
		t.Run(fmt.Sprintf("%s/%s@%d+%d", c.Bundle, c.Kind, c.Start, len(c.Tokens)), func(t *testing.T) {
			cfg := be.Config()
			cache, err := kv.New(cfg.KV, 64)
			if err != nil {
				t.Fatal(err)
			}
			fillCache(t, cache, c.Start)
			want := map[string]model.Output{KindGenerate: model.Argmax, KindSample: model.Logits, KindPrefill: model.Argmax | model.Last}[c.Kind]
			if _, err := be.Forward(context.Background(), c.Tokens, c.Start, cache, want); err != nil {
				t.Fatal(err)
			}
			m := be.b.Manifest
			for name, in := range c.Inputs {
				got, ok := rec.inputs[name]
				if !ok {
					t.Errorf("%s: the Go host passed no input %s", c.Bundle, name)
					continue
				}
				n := 1
				for _, d := range in.Shape {
					n *= d
				}
				wantBits := make([]uint16, n)
				for i := range wantBits {
					wantBits[i] = binary.LittleEndian.Uint16(blob[2*(in.Offset+i):])
				}
				if len(got) != n {
					t.Errorf("%s: %d elements, want %d", name, len(got), n)
					continue
				}
				if s, ok := cacheSource(name); ok {
					l := m.Arch.Layers[s]
					checkCacheTensor(t, name, got, wantBits, c, m.slots(l.Kind), windowOf(m, l), l.KVHeads, l.HeadDim)
					continue
				}
				if i := firstDiff(got, wantBits); i >= 0 {
					t.Errorf("%s: element %d (of shape %v) is %#04x, the Python host's %#04x", name, i, in.Shape, got[i], wantBits[i])
				}
			}
		})
	}
}

func windowOf(m *Manifest, l LayerInfo) int {
	if l.Kind == "sliding" {
		return m.Arch.Window
	}
	return 0
}

// cacheSource reports the layer of a k_cache_/v_cache_ input name.
func cacheSource(name string) (int, bool) {
	var s int
	for _, p := range []string{"k_cache_%d", "v_cache_%d"} {
		if n, _ := fmt.Sscanf(name, p, &s); n == 1 {
			return s, true
		}
	}
	return 0, false
}

// checkCacheTensor compares [1,kvh,slots,hd] cache tensors on the slots of
// the positions the call can see and on its own slots.
func checkCacheTensor(t *testing.T, name string, got, want []uint16, c goldenCase, slots, window, kvh, hd int) {
	t.Helper()
	lo := 0
	if window > 0 {
		lo = max(0, c.Start-window+1)
	}
	check := func(q int, zero bool) {
		s := q % slots
		for h := range kvh {
			for d := range hd {
				i := (h*slots+s)*hd + d
				w := want[i]
				if zero {
					w = 0
				}
				if got[i] != w {
					t.Errorf("%s: slot %d (position %d) head %d [%d] = %#04x, want %#04x", name, s, q, h, d, got[i], w)
					return
				}
			}
		}
	}
	for q := lo; q < c.Start; q++ {
		check(q, false)
	}
	for q := c.Start; q < c.Start+len(c.Tokens); q++ {
		check(q, true)
	}
}

func firstDiff(a, b []uint16) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// fillCache commits n positions of goldenRow rows to every owning layer.
func fillCache(t *testing.T, cache *kv.Cache, n int) {
	t.Helper()
	geo := cache.Geometry()
	for q := range n {
		if err := cache.Reserve(q, 1); err != nil {
			t.Fatal(err)
		}
		for s, l := range geo.Layers {
			if l.Source != s {
				continue
			}
			copy(cache.K(s, q), goldenRow(s, q, l.KVHeads, l.HeadDim, false))
			copy(cache.V(s, q), goldenRow(s, q, l.KVHeads, l.HeadDim, true))
		}
		if err := cache.Commit(1); err != nil {
			t.Fatal(err)
		}
	}
	_ = slices.Equal[[]int]
}
