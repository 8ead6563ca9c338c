package cpu

import (
	"fmt"
	"runtime"
	"runtime/debug"
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
	var failed sync.Once
	var caught any // the first panic of any goroutine
	work := func(worker int) {
		// A panic must not escape a worker goroutine (it would kill the
		// process): it stops this worker and is raised again on the
		// caller's goroutine once every worker is done.
		defer func() {
			if r := recover(); r != nil {
				failed.Do(func() { caught = workerPanic(r) })
			}
		}()
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
		go func() {
			defer wg.Done()
			// fn reads weights that are usually mapped from a file: a
			// fault there (the file was truncated on disk) becomes a
			// panic, carried to the caller, whose mmap.Guard turns it
			// into an error, instead of a crash of the process.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			work(i)
		}()
	}
	work(0)
	wg.Wait()
	if caught != nil {
		panic(caught)
	}
}

// WorkerPanic is what Pool.For panics with on the caller's goroutine, once
// every worker is done, when fn panicked on any of them: the value and the
// stack of the goroutine that panicked, which the re-raised panic's trace
// does not show. It unwraps to the value when that is an error, so that a
// fault on mapped weights is still recognised (mmap.Fault).
type WorkerPanic struct {
	// Value is what fn panicked with.
	Value any
	// Stack is the stack of the goroutine that panicked.
	Stack []byte
}

func (p *WorkerPanic) Error() string {
	return fmt.Sprintf("cpu: panic in a pool worker: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap returns Value when it is an error.
func (p *WorkerPanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// workerPanic wraps r with the stack of the goroutine that panicked (called
// from its deferred recover, while the panicking frames are still on the
// stack), unless r already carries one (a panic of a nested For).
func workerPanic(r any) any {
	if _, ok := r.(*WorkerPanic); ok {
		return r
	}
	return &WorkerPanic{Value: r, Stack: debug.Stack()}
}
