package jinja

import (
	"context"
	"time"
	"unsafe"
)

// The cost model. Every operation is charged by what it touches, before it
// builds anything:
//
//   - a step for every statement, expression and loop turn;
//   - a step for every list, tuple or dict element it visits or makes;
//   - a step for every bytesPerStep bytes it reads, compares, copies or
//     writes (a rune count, a search, a case mapping, a hash of a key);
//   - the bytes of every string, list, dict and taint record it builds,
//     counted against Limits.Memory as they are allocated (not as they are
//     freed: the bound holds whatever the garbage collector does).
//
// Sizes are checked against Limits.Output before a value is built, and the
// render checks its context and its wall-clock limit every checkEvery steps,
// so no single operation runs for long between two checks.

// bytesPerStep is how many bytes of strings one step reads or writes.
const bytesPerStep = 64

// runeWork is how many times a byte costs more when it is decoded and
// looked up rune by rune (a case mapping, a repr, a Unicode class test)
// than when it is copied or compared.
const runeWork = 4

// checkEvery is how many steps pass between two looks at the clock and the
// context.
const checkEvery = 1 << 12

// valueSize is what one element of a list or tuple takes in memory.
const valueSize = int(unsafe.Sizeof(Value{}))

// spanSize is what one taint record of a string takes in memory.
const spanSize = int(unsafe.Sizeof(Span{}))

// entrySize is what one dict entry takes besides its key's text: the key
// and the value, and the index's slot.
const entrySize = 2*valueSize + 32

// frameSize is what one macro call allocates besides its output (its
// arguments and writer; its scope is charged as a scope), charged against Limits.Memory so that
// calls in a loop cannot churn memory for free.
const frameSize = 512

// methodSize is what binding a method to a value allocates (a closure
// that holds the value).
const methodSize = 64 + valueSize

// maxNest bounds how deeply values (lists in lists, tuples in tuples) are
// walked by comparison, hashing and printing, as Python's recursion limit
// does (at 1,000).
const maxNest = maxNesting

type evaluator struct {
	lim   Limits
	steps int
	carry int // bytes read or written not yet charged as a step
	mem   int // bytes allocated so far
	depth int
	now   func() time.Time

	done     <-chan struct{} // the render's context, nil if it cannot end
	ctx      context.Context
	deadline time.Time // the wall-clock limit
	// next is the step count at which step looks at the limits, the clock
	// and the context again; 0 once the render has failed.
	next int
	// stop is the limit error that ended the render. Once set, every step
	// returns it, so helpers that cannot return an error (comparisons in a
	// sort) can stop early and the render still ends with the error.
	stop error
}

func newEvaluator(ctx context.Context, opts Options) *evaluator {
	ev := &evaluator{lim: opts.Limits.withDefaults(), now: opts.Now, ctx: ctx}
	if ev.now == nil {
		ev.now = time.Now
	}
	if ctx != nil {
		ev.done = ctx.Done()
	}
	ev.deadline = time.Now().Add(ev.lim.Time)
	return ev
}

// limitErr is the error of a render stopped by one of its limits.
func limitErr(line int, format string, args ...any) *Error {
	e := errorf(line, format, args...)
	e.Err = ErrLimit
	return e
}

// fail ends the render with err (the first error wins).
func (ev *evaluator) fail(err *Error) error {
	if ev.stop == nil {
		ev.stop = err
	}
	ev.next = 0
	return ev.stop
}

// step charges one step.
func (ev *evaluator) step(line int) error {
	ev.steps++
	if ev.steps < ev.next {
		return nil
	}
	return ev.check(line)
}

// charge charges n steps of work at once.
func (ev *evaluator) charge(line, n int) error {
	if n < 0 || n > ev.lim.Steps {
		return ev.fail(limitErr(line, "template exceeded %d evaluation steps (a loop that does not end?)", ev.lim.Steps))
	}
	ev.steps += n
	if ev.steps < ev.next {
		return nil
	}
	return ev.check(line)
}

// touch charges reading or writing n bytes.
func (ev *evaluator) touch(line, n int) error {
	if n < 0 || n > 1<<40 {
		return ev.charge(line, -1)
	}
	ev.carry += n
	if ev.carry < bytesPerStep {
		if ev.next == 0 {
			return ev.check(line)
		}
		return nil
	}
	s := ev.carry / bytesPerStep
	ev.carry %= bytesPerStep
	return ev.charge(line, s)
}

// touchRunes charges working through n bytes rune by rune.
func (ev *evaluator) touchRunes(line, n int) error {
	if n < 0 || n > 1<<40 {
		return ev.charge(line, -1)
	}
	return ev.touch(line, runeWork*n)
}

// check looks at every limit: the steps, the clock and the context.
func (ev *evaluator) check(line int) error {
	if ev.stop != nil {
		return ev.stop
	}
	if ev.steps > ev.lim.Steps {
		return ev.fail(limitErr(line, "template exceeded %d evaluation steps (a loop that does not end?)", ev.lim.Steps))
	}
	if ev.done != nil {
		select {
		case <-ev.done:
			e := errorf(line, "template rendering stopped: %v", ev.ctx.Err())
			e.Err = ev.ctx.Err()
			return ev.fail(e)
		default:
		}
	}
	if time.Now().After(ev.deadline) {
		return ev.fail(limitErr(line, "template rendering took longer than %v", ev.lim.Time))
	}
	ev.next = min(ev.steps+checkEvery, ev.lim.Steps+1)
	return nil
}

// alloc accounts for n bytes about to be allocated.
func (ev *evaluator) alloc(line, n int) error {
	if ev.stop != nil {
		return ev.stop
	}
	if n < 0 || n > ev.lim.Memory-ev.mem {
		return ev.fail(limitErr(line, "template used more than %d bytes of memory", ev.lim.Memory))
	}
	ev.mem += n
	return nil
}

// checkSize fails when a string or list of n bytes or items would pass
// the output limit.
func (ev *evaluator) checkSize(line, n int) error {
	if n < 0 || n > ev.lim.Output {
		return ev.fail(limitErr(line, "template built a value of %d bytes or items, more than the %d allowed", n, ev.lim.Output))
	}
	return nil
}

// checkSize64 is checkSize for a size computed in int64 (a repetition).
func (ev *evaluator) checkSize64(line int, n int64) error {
	if n < 0 || n > int64(ev.lim.Output) {
		return ev.fail(limitErr(line, "template built a value of %d bytes or items, more than the %d allowed", n, ev.lim.Output))
	}
	return nil
}

// built accounts for a new string of n bytes (with spans taint records),
// before it is made: it must fit the output limit, writing it costs steps
// and its bytes count against the memory limit.
func (ev *evaluator) built(line, n, spans int) error {
	if err := ev.checkSize(line, n); err != nil {
		return err
	}
	if err := ev.touch(line, n); err != nil {
		return err
	}
	return ev.alloc(line, n+spans*spanSize)
}

// items accounts for a new list or tuple of n elements, before it is made.
func (ev *evaluator) items(line, n int) error {
	if err := ev.checkSize(line, n); err != nil {
		return err
	}
	if err := ev.charge(line, n); err != nil {
		return err
	}
	return ev.alloc(line, n*valueSize)
}

// put appends s (with its untrusted spans t) to w, growing w as the
// limits allow.
func (ev *evaluator) put(line int, w *tstr, s string, t []Span) error {
	n := len(w.buf) + len(s)
	if n > cap(w.buf) {
		if err := ev.checkSize(line, n); err != nil {
			return err
		}
		c := min(max(2*cap(w.buf), n, 64), max(ev.lim.Output, n))
		if err := ev.alloc(line, c); err != nil {
			return err
		}
		w.grow(c)
	}
	if len(t) > 0 && len(w.t)+len(t) > cap(w.t) {
		c := max(2*cap(w.t), len(w.t)+len(t), 4)
		if err := ev.alloc(line, c*spanSize); err != nil {
			return err
		}
		w.growSpans(c)
	}
	if err := ev.touch(line, len(s)); err != nil {
		return err
	}
	w.add(s, t)
	return nil
}
