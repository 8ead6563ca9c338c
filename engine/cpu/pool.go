package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool runs parallel loops on a fixed number of goroutines. Work is split into
// chunks of whole items (rows, heads); the split never changes what is
// computed for an item, only which goroutine computes it.
type Pool struct {
	workers int
}

// NewPool returns a pool of n workers; n <= 0 means one per CPU.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	return &Pool{workers: n}
}

// Workers is the number of goroutines a loop may use.
func (p *Pool) Workers() int {
	if p == nil {
		return 1
	}
	return p.workers
}

// For calls fn(worker, lo, hi) over [0, n) in chunks of at most chunk items,
// on up to Workers goroutines, and returns when all are done. worker is in
// 0..Workers-1 and identifies the goroutine (for per-worker scratch). cost is the approximate
// work per item (e.g. multiply-adds); small loops run on the caller's
// goroutine, where spawning would cost more than it saves.
func (p *Pool) For(n, chunk int, cost int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	chunk = max(chunk, 1)
	w := p.Workers()
	nchunks := (n + chunk - 1) / chunk
	if w == 1 || nchunks == 1 || n*cost < 1<<15 {
		fn(0, 0, n)
		return
	}
	w = min(w, nchunks)
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func(worker int) {
		for {
			c := int(next.Add(1) - 1)
			if c >= nchunks {
				return
			}
			lo := c * chunk
			fn(worker, lo, min(lo+chunk, n))
		}
	}
	wg.Add(w - 1)
	for i := 1; i < w; i++ {
		go func() { defer wg.Done(); work(i) }()
	}
	work(0)
	wg.Wait()
}
