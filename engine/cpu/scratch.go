package cpu

import "sync"

// scratchPool keeps the scratch of finished Forward calls for the next
// ones. A Forward takes one (a new one when every kept one is in use by a
// concurrent call on another cache) and gives it back when it returns, so
// a steady decode loop allocates no buffers; each scratch only ever grows.
type scratchPool[T any] struct {
	mu   sync.Mutex
	free []*T
}

func (s *scratchPool[T]) get() *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		x := s.free[n-1]
		s.free = s.free[:n-1]
		return x
	}
	return new(T)
}

func (s *scratchPool[T]) put(x *T) {
	s.mu.Lock()
	s.free = append(s.free, x)
	s.mu.Unlock()
}

// logitsBuf returns the buffer for n rows of vocab logits: buf (grown) when
// the caller asked only for argmax, since nothing of it is returned; a new
// slice when the rows go back in the Result (the caller may keep them).
func logitsBuf(buf *[]float32, n, vocab int, fresh bool) []float32 {
	if fresh {
		return make([]float32, n*vocab)
	}
	*buf = grow(*buf, n*vocab)
	return *buf
}
