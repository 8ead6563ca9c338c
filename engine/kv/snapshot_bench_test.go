package kv

import (
	"context"
	"os"
	"testing"
)

// gemma4E2B is the KV geometry of Gemma 4 E2B (35 layers: every 5th full
// attention with head dim 512, the rest sliding with window 512 and head dim
// 256, one KV head; layers 15-34 share the KV of layers 13 and 14).
func gemma4E2B() Geometry {
	g := Geometry{Context: 4096}
	for i := range 35 {
		full := i%5 == 4
		l := LayerSpec{KVHeads: 1, HeadDim: 256, Window: 512, Source: i}
		if full {
			l.HeadDim, l.Window = 512, 0
		}
		if i >= 15 {
			l.Source = 13
			if full {
				l.Source = 14
			}
		}
		g.Layers = append(g.Layers, l)
	}
	return g
}

func benchSnapshot(b *testing.B, n int) (string, *Cache) {
	c, ids := filledCache(b, gemma4E2B(), 64, n, 1)
	path, err := Write(context.Background(), b.TempDir(), testMeta, ids, c)
	if err != nil {
		b.Fatal(err)
	}
	return path, c
}

// BenchmarkSnapshotLoad measures Load of a Gemma 4 E2B snapshot of 2048
// positions (about 29 MB, warm page cache); b.SetBytes makes -bench report
// the bandwidth.
func BenchmarkSnapshotLoad(b *testing.B) {
	path, _ := benchSnapshot(b, 2048)
	st, _ := os.Stat(path)
	c, _ := New(gemma4E2B(), 64)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for b.Loop() {
		if _, err := Load(context.Background(), path, testMeta, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotWrite measures Write of the same snapshot (fsync
// included).
func BenchmarkSnapshotWrite(b *testing.B) {
	path, c := benchSnapshot(b, 2048)
	st, _ := os.Stat(path)
	ids := make([]int32, c.Len())
	dir := b.TempDir()
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ids[0] = int32(i) // a new name each time
		p, err := Write(context.Background(), dir, testMeta, ids, c)
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(p)
	}
}

// BenchmarkPlainRead is the baseline: a sequential read of the same file in
// 1 MiB chunks.
func BenchmarkPlainRead(b *testing.B) {
	path, _ := benchSnapshot(b, 2048)
	st, _ := os.Stat(path)
	buf := make([]byte, chunk)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		for {
			n, err := f.Read(buf)
			if n == 0 || err != nil {
				break
			}
		}
		f.Close()
	}
}
