package published

import (
	"testing"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
)

// benchSetup makes the cache tensors of the published E2B layout
// (chunk1: 7 sliding + 1 full slots, chunk2: 5 + 2; W 512, ctx 2048, rows
// 512 wide) and a kv.Cache holding 1500 positions.
func benchSetup(b *testing.B) (*Model, map[int]map[string]*buffer, *kv.Cache) {
	be := &Model{geo: geometry{window: 512, context: 2048, kvHeads: 1, slotWidth: 512, headSliding: 256, headFull: 512}, kvLayer: map[int][2][]int{}}
	var geo kv.Geometry
	geo.Context = 2048
	tens := map[int]map[string]*buffer{}
	for j, n := range [][2]int{{7, 1}, {5, 2}} {
		var sl [2][]int
		for kind, c := range n {
			for range c {
				l := kv.LayerSpec{KVHeads: 1, HeadDim: 256, Window: 512, Source: len(geo.Layers)}
				if kind == 1 {
					l.HeadDim, l.Window = 512, 0
				}
				sl[kind] = append(sl[kind], len(geo.Layers))
				geo.Layers = append(geo.Layers, l)
			}
		}
		be.kvLayer[j] = sl
		tens[j] = map[string]*buffer{}
		for _, name := range cacheInputs {
			rows, slots := 512, n[0]
			if name[2:6] == "full" {
				rows, slots = 2048, n[1]
			}
			x, err := newBuffer(mlcore.Float16, []int{slots, 1, rows, 512})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { x.close() })
			tens[j][name] = x
		}
	}
	cache, err := kv.New(geo, 8)
	if err != nil {
		b.Fatal(err)
	}
	for p := 0; p < 1500; p += 8 {
		cache.Reserve(p, 8)
		cache.Commit(8)
	}
	return be, tens, cache
}

// BenchmarkBuildCache times rebuilding every cache input from the
// kv.Cache (what a call on another cache, or after a truncation, costs).
func BenchmarkBuildCache(b *testing.B) {
	be, tens, cache := benchSetup(b)
	b.ResetTimer()
	for range b.N {
		for j := range 2 {
			be.buildCache(tens[j], j, cache.Len(), cache)
		}
	}
}

// BenchmarkSyncCache times a decode step's cache inputs: one position
// committed since the last call (the sliding tensors shift by a row, one
// new row per slot).
func BenchmarkSyncCache(b *testing.B) {
	be, tens, cache := benchSetup(b)
	st := make([]cacheSync, 2)
	for j := range 2 {
		be.syncCache(tens[j], &st[j], j, cache.Len(), cache)
	}
	b.ResetTimer()
	for range b.N {
		if cache.Len() == 2047 {
			cache.Truncate(1500)
			for j := range 2 {
				be.buildCache(tens[j], j, cache.Len(), cache)
				st[j] = cacheSync{}
				be.syncCache(tens[j], &st[j], j, cache.Len(), cache)
			}
		}
		cache.Reserve(cache.Len(), 1)
		cache.Commit(1)
		for j := range 2 {
			be.syncCache(tens[j], &st[j], j, cache.Len(), cache)
		}
	}
}
