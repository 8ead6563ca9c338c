package server

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// errQueueFull: the request was refused because limit requests already
// wait.
var errQueueFull = errors.New("server: the queue is full")

// fifo lets one request at a time hold the model and queues the others in
// arrival order, at most limit of them. A waiter whose context ends leaves
// the queue at once.
type fifo struct {
	mu      sync.Mutex
	limit   int
	busy    bool
	waiting []chan struct{} // closed when its request holds the model
	// avg is a moving average of how long a request holds the model, for
	// Retry-After.
	avg time.Duration
}

func newFIFO(limit int) *fifo { return &fifo{limit: limit} }

// acquire waits for the model in FIFO order and returns the function that
// gives it up. It fails with errQueueFull when limit requests wait already,
// and with ctx.Err() when ctx ends first.
func (q *fifo) acquire(ctx context.Context) (release func(), err error) {
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return q.releaser(), nil
	}
	if len(q.waiting) >= q.limit {
		q.mu.Unlock()
		return nil, errQueueFull
	}
	ch := make(chan struct{})
	q.waiting = append(q.waiting, ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return q.releaser(), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, c := range q.waiting {
		if c == ch {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	q.mu.Unlock()
	// The model was handed over as ctx ended: pass it on.
	q.releaser()()
	return nil, ctx.Err()
}

// releaser returns the release function of the request that now holds the
// model; calling it again does nothing.
func (q *fifo) releaser() func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			d := time.Since(start)
			if q.avg == 0 {
				q.avg = d
			} else {
				q.avg = (4*q.avg + d) / 5
			}
			if len(q.waiting) == 0 {
				q.busy = false
				return
			}
			next := q.waiting[0]
			q.waiting = q.waiting[1:]
			close(next)
		})
	}
}

// waitingN is how many requests wait.
func (q *fifo) waitingN() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// retryAfter is the whole seconds a refused client should wait: about the
// time the queue ahead of it takes, at least 1 and at most 60.
func (q *fifo) retryAfter() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.avg.Seconds() * float64(len(q.waiting)+1)
	return int(min(60, max(1, math.Ceil(s))))
}
