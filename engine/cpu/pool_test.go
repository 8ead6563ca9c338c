package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
)

// taskFunc runs a function as a Task (tests; the kernels keep their loop
// bodies in their scratch).
type taskFunc func(worker, lo, hi int)

func (f taskFunc) Run(worker, lo, hi int) { f(worker, lo, hi) }

// countTask records which worker computed each item.
type countTask struct {
	hits    []atomic.Int32
	workers int
	bad     atomic.Int32 // items whose worker number was out of range
	seen    []atomic.Int32
}

func (c *countTask) Run(worker, lo, hi int) {
	if worker < 0 || worker >= c.workers {
		c.bad.Add(1)
	} else {
		c.seen[worker].Add(1)
	}
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

// TestPoolRun: every item is computed exactly once, on worker numbers
// within Workers, also with several loops running at once on one pool
// (two Forwards on distinct caches), and more than one worker takes part
// in a large loop.
func TestPoolRun(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	const loops, n = 8, 10000
	tasks := make([]*countTask, loops)
	var wg sync.WaitGroup
	for i := range tasks {
		tasks[i] = &countTask{hits: make([]atomic.Int32, n), workers: p.Workers(), seen: make([]atomic.Int32, p.Workers())}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				p.Run(n, 7, 1<<10, tasks[i])
			}
		}()
	}
	wg.Wait()
	for i, c := range tasks {
		if c.bad.Load() != 0 {
			t.Fatalf("loop %d: %d chunks on a worker number out of range", i, c.bad.Load())
		}
		for j := range c.hits {
			if h := c.hits[j].Load(); h != 20 {
				t.Fatalf("loop %d: item %d computed %d times in 20 runs", i, j, h)
			}
		}
	}
	// A loop small enough runs on the caller alone: worker 0 only.
	c := &countTask{hits: make([]atomic.Int32, 10), workers: 3, seen: make([]atomic.Int32, 3)}
	p.Run(10, 1, 1, c)
	if c.seen[0].Load() != 1 || c.seen[1].Load()+c.seen[2].Load() != 0 {
		t.Errorf("a small loop was handed out: %v %v %v", c.seen[0].Load(), c.seen[1].Load(), c.seen[2].Load())
	}
	if a := testing.AllocsPerRun(50, func() { p.Run(n, 7, 1<<10, tasks[0]) }); a != 0 {
		t.Errorf("Run allocated %v times per loop", a)
	}
}

// TestPoolClose: Close is idempotent and a pool of one worker (no
// goroutines) closes too; a nil pool runs loops on the caller.
func TestPoolClose(t *testing.T) {
	p := NewPool(2)
	p.Close()
	p.Close()
	NewPool(1).Close()
	var nilPool *Pool
	c := &countTask{hits: make([]atomic.Int32, 100), workers: 1, seen: make([]atomic.Int32, 1)}
	nilPool.Run(100, 1, 1<<20, c)
	if c.hits[99].Load() != 1 {
		t.Error("nil pool did not run the loop")
	}
}
