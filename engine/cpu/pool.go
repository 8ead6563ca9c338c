package cpu

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Pool runs parallel loops on a fixed set of goroutines started once, by
// NewPool, and ended by Close: a loop starts no goroutine and, with a Task
// that lives as long as the caller's buffers, allocates nothing. Work is
// split into chunks of whole items (rows, heads); the split never changes
// what is computed for an item, only which goroutine computes it.
//
// Loops may run concurrently from several goroutines (two Forwards on
// distinct caches): each has its own chunks and its own worker numbers.
//
// A panic in a loop body never escapes a worker goroutine (it would kill
// the process): Run raises it again on the caller's goroutine, as a
// *WorkerPanic, once every goroutine has left the loop. The workers turn
// memory faults into panics (debug.SetPanicOnFault): the bodies read
// weights mapped from files, and a file truncated on disk then becomes an
// error of the guarded caller (mmap.Guard) instead of a crash.
type Pool struct {
	workers int
	jobs    chan *job // to the workers
	stop    *stopper  // closes jobs once: Close, or the pool's cleanup
	mu      sync.Mutex
	free    []*job
}

// stopper closes a pool's job channel once.
type stopper struct {
	once sync.Once
	jobs chan *job
}

func (s *stopper) close() { s.once.Do(func() { close(s.jobs) }) }

// A Task is the body of a parallel loop: Run computes items [lo, hi) on
// worker (0..Workers-1, unique among the goroutines of one loop, for
// per-worker scratch).
type Task interface {
	Run(worker, lo, hi int)
}

// job is one loop in flight; jobs are reused from Pool.free.
type job struct {
	task          Task
	n, chunk      int
	nchunks       int
	next, members atomic.Int64
	wg            sync.WaitGroup
	failed        atomic.Bool
	caught        any // the first panic of the loop's goroutines
}

// NewPool returns a pool of n workers; n <= 0 means one per CPU. The
// caller's goroutine is one of them: n-1 goroutines start, and wait for
// loops until Close (or until the pool is garbage, should nobody close it).
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	p := &Pool{workers: n}
	if n > 1 {
		p.jobs = make(chan *job, n)
		p.stop = &stopper{jobs: p.jobs}
		for range n - 1 {
			go work(p.jobs)
		}
		runtime.AddCleanup(p, (*stopper).close, p.stop)
	}
	return p
}

// work is a worker goroutine: it joins each job it receives.
func work(jobs <-chan *job) {
	debug.SetPanicOnFault(true)
	for j := range jobs {
		j.run(int(j.members.Add(1) - 1))
		j.wg.Done()
	}
}

// run takes chunks of j until none is left. A panic of the body stops
// this goroutine's part and is kept for the caller (the first one).
func (j *job) run(worker int) {
	defer func() {
		if r := recover(); r != nil && j.failed.CompareAndSwap(false, true) {
			j.caught = workerPanic(r)
		}
	}()
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.nchunks {
			return
		}
		lo := c * j.chunk
		j.task.Run(worker, lo, min(lo+j.chunk, j.n))
	}
}

// Close ends the worker goroutines. No loop may be running or start after.
func (p *Pool) Close() {
	if p == nil || p.stop == nil {
		return
	}
	p.stop.close()
}

// Workers is the number of goroutines a loop may use.
func (p *Pool) Workers() int {
	if p == nil {
		return 1
	}
	return p.workers
}

// Run calls t.Run(worker, lo, hi) over [0, n) in chunks of at most chunk
// items, on up to Workers goroutines, and returns when all are done. cost
// is the approximate work per item (e.g. multiply-adds); small loops run on
// the caller's goroutine, where handing them out would cost more than it
// saves.
func (p *Pool) Run(n, chunk, cost int, t Task) {
	if n <= 0 {
		return
	}
	chunk = max(chunk, 1)
	w := p.Workers()
	nchunks := (n + chunk - 1) / chunk
	if w == 1 || nchunks == 1 || n*cost < 1<<15 {
		t.Run(0, 0, n)
		return
	}
	w = min(w, nchunks)
	j := p.get()
	j.task, j.n, j.chunk, j.nchunks = t, n, chunk, nchunks
	j.next.Store(0)
	j.members.Store(1) // the caller is worker 0
	j.wg.Add(w - 1)
	for range w - 1 {
		p.jobs <- j
	}
	j.run(0)
	j.wg.Wait() // every helper has left j: it can be reused
	caught := j.caught
	j.task, j.caught = nil, nil
	j.failed.Store(false)
	p.put(j)
	if caught != nil {
		panic(caught)
	}
}

// WorkerPanic is what Pool.Run panics with on the caller's goroutine, once
// every goroutine of the loop is done, when the body panicked on any of
// them: the value and the stack of the goroutine that panicked, which the
// re-raised panic's trace does not show. It unwraps to the value when that
// is an error, so that a fault on mapped weights is still recognised
// (mmap.Fault).
type WorkerPanic struct {
	// Value is what the body panicked with.
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
// stack), unless r already carries one (a panic of a nested loop).
func workerPanic(r any) any {
	if _, ok := r.(*WorkerPanic); ok {
		return r
	}
	return &WorkerPanic{Value: r, Stack: debug.Stack()}
}

func (p *Pool) get() *job {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := len(p.free); k > 0 {
		j := p.free[k-1]
		p.free = p.free[:k-1]
		return j
	}
	return new(job)
}

func (p *Pool) put(j *job) {
	p.mu.Lock()
	p.free = append(p.free, j)
	p.mu.Unlock()
}
