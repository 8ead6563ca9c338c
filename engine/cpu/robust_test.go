package cpu

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/sample"
)

// TestArgmaxAgreesWithGreedy: the backend's argmax (model.Argmax) and
// greedy picking from logits pick the same id for every row, NaN included.
// Before, Argmax started from x[0] and NaN never compares greater, so a
// NaN at x[0] won and a row of NaN gave token 0, where sample.Greedy skips
// NaN and gives -1.
func TestArgmaxAgreesWithGreedy(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		x    []float32
		want int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{1, nan, 0}, 0},
		{[]float32{nan, nan, nan}, -1},
		{nil, -1},
		{[]float32{-inf, nan, -inf}, 0},
		{[]float32{nan, inf, 5}, 1},
	}
	for _, c := range cases {
		if got, g := Argmax(c.x), sample.Greedy(c.x); got != c.want || got != g {
			t.Errorf("Argmax(%v) = %d, sample.Greedy = %d; want %d from both", c.x, got, g, c.want)
		}
	}
	// Through a backend's Result, as the decode loops see it.
	r := Result([]float32{nan, 1, 2, nan, nan, nan}, 2, 3, model.Argmax|model.Logits)
	for i, row := range r.Logits {
		if r.Argmax[i] != sample.Greedy(row) {
			t.Errorf("row %d: Argmax %d, Greedy %d", i, r.Argmax[i], sample.Greedy(row))
		}
	}
	if r.Argmax[0] != 2 || r.Argmax[1] != -1 {
		t.Errorf("Result argmax %v, want [2 -1]", r.Argmax)
	}
}

// oneWorkerFirst runs fn(data, lo) on pool for 4 chunks such that a worker
// other than the caller's goroutine (worker 0) runs fn first: worker 0
// waits until one has started.
func oneWorkerFirst(p *Pool, fn func(lo int)) {
	started := make(chan struct{})
	var once sync.Once
	p.For(4, 1, 1<<20, func(worker, lo, hi int) {
		if worker == 0 {
			<-started
			return
		}
		once.Do(func() { close(started) })
		fn(lo)
	})
}

// TestPoolCarriesWorkerPanics: a panic on a worker goroutine reaches the
// caller of For, with the worker's stack, instead of killing the process
// (an unrecovered panic on any goroutine does).
func TestPoolCarriesWorkerPanics(t *testing.T) {
	defer func() {
		r := recover()
		wp, ok := r.(*WorkerPanic)
		if !ok || wp.Value != "boom" || !strings.Contains(string(wp.Stack), "TestPoolCarriesWorkerPanics") ||
			!strings.Contains(wp.Error(), "boom") {
			t.Fatalf("recovered %v; want a *WorkerPanic with the value and the worker's stack", r)
		}
	}()
	oneWorkerFirst(NewPool(4), func(int) { panic("boom") })
	t.Fatal("For returned after a worker panicked")
}

// TestPoolCarriesWorkerFaults: a worker goroutine reads a mapping whose file
// was truncated. The fault reaches the guarded caller as a changed file, not
// a SIGBUS that kills the process.
func TestPoolCarriesWorkerFaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := mmap.Map(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	var sink atomic.Int64
	err = func() (err error) {
		defer mmap.Guard(&err, m)()
		oneWorkerFirst(NewPool(4), func(lo int) { sink.Add(int64(m.Data()[lo*65536])) })
		return nil
	}()
	var ce *mmap.ChangedError
	if !errors.As(err, &ce) || ce.Path != p || !errors.Is(err, model.ErrModelChanged) {
		t.Fatalf("err = %v; want a *mmap.ChangedError for %s", err, p)
	}
}

// truncatedLlama writes a random llama of typ to a temp file, opens it on a
// pool of 4 workers and truncates the file right after the token
// embeddings: lookups still work, every matrix product faults.
func truncatedLlama(t *testing.T, typ gguf.Type) (*Llama, string) {
	t.Helper()
	o := LlamaOptions{Hidden: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 1024, Context: 64}
	data, err := RandomLlama(o, typ, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "random.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenLlama(p, NewPool(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.CheckFiles(); err != nil {
		t.Fatalf("CheckFiles of an intact file: %v", err)
	}
	emb, _ := m.File().Tensor("token_embd.weight")
	if err := os.Truncate(p, emb.Offset+emb.Size); err != nil {
		t.Fatal(err)
	}
	return m, p
}

// TestLlamaTruncatedUnderForward: the weights file is truncated while the
// model is loaded; a wide Forward (matrix products on the worker pool, in
// the assembly kernels of each weight type) fails with the typed error and
// rolls its rows back. Before, the process died of SIGBUS.
func TestLlamaTruncatedUnderForward(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			m, p := truncatedLlama(t, typ)
			c, err := kv.New(m.Config().KV, 8)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Forward(context.Background(), []int32{1, 2, 3, 4, 5, 6, 7, 8}, 0, c, model.Logits)
			var ce *mmap.ChangedError
			if !errors.As(err, &ce) || ce.Path != p || !strings.Contains(err.Error(), "reload the model") {
				t.Fatalf("Forward on a truncated file: %v; want a *mmap.ChangedError for %s", err, p)
			}
			if c.Pending() != 0 {
				t.Fatalf("%d rows left pending", c.Pending())
			}
			if err := m.CheckFiles(); !errors.Is(err, model.ErrModelChanged) {
				t.Fatalf("CheckFiles after truncation: %v", err)
			}
		})
	}
}

// TestGemma4TruncatedUnderForward: the same for a safetensors model.
func TestGemma4TruncatedUnderForward(t *testing.T) {
	dir := copyFixture(t, nil)
	m, err := LoadGemma4(dir, NewPool(4))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(dir, "model.safetensors")
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckFiles(); !errors.Is(err, model.ErrModelChanged) || !strings.Contains(err.Error(), p) {
		t.Fatalf("CheckFiles after truncation: %v", err)
	}
	c, err := kv.New(m.Config().KV, 8)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Forward(context.Background(), []int32{2, 3, 4, 5}, 0, c, model.Argmax)
	var ce *mmap.ChangedError
	if !errors.As(err, &ce) || ce.Path != p || c.Pending() != 0 {
		t.Fatalf("Forward on a truncated file: %v (%d pending); want a *mmap.ChangedError for %s", err, c.Pending(), p)
	}
}
