//go:build (linux || darwin) && (amd64 || arm64)

package cpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"anechat/engine/model/gguf"
)

// The bounds tests run every SIMD kernel this CPU selects with each of its
// arguments in memory that ends exactly where a PROT_NONE page begins, then
// in memory that starts exactly where one ends. Weights come straight from
// a mapped GGUF file, whose last tensor may end at the end of the mapping:
// a kernel that loads a byte past its rows (or before them) faults on a
// user's machine, and a store outside an output corrupts memory. Go slices
// in the other tests sit inside larger heap spans, where such an access
// goes unnoticed. Here it faults; the fault (debug.SetPanicOnFault) fails
// the test with the kernel, the argument, whether it was a load or a
// store and how many bytes beyond the argument it reached. Each guarded
// run must also give the bits of the same call on ordinary slices, and
// leave the bytes of the guarded mapping outside the argument untouched.
//
// Each run places every argument of the call at a guard at once (each in
// its own mapping): a fault's address names the argument whose guard it
// hit, so this checks each argument in turn at the cost of one run per
// side.

// boundsArg is one argument of a kernel call: what it is, its contents
// before the call, and its element size (the step of the diagnosis).
type boundsArg struct {
	name string
	init []byte
	elem int
}

// boundsCase is one call: run computes with buffers holding the
// arguments' contents (in args' order) and returns any result that is not
// in them (the buffers' contents after the call are compared too).
type boundsCase struct {
	name string
	args []boundsArg
	run  func(b [][]byte) []byte
}

// side is where a guarded argument sits against its PROT_NONE page.
type side int

const (
	atEnd   side = iota // its last byte is the last before the guard page
	atStart             // its first byte is the first after the guard page
)

func (s side) String() string {
	if s == atEnd {
		return "ending at a guard page"
	}
	return "starting after a guard page"
}

const canary = 0xa5 // the guarded mappings' bytes outside the argument

// guarded is one argument's mapping: data pages with the argument at one
// end, a guard page at that end.
type guarded struct {
	mem        []byte // the whole mapping
	lo, hi     int    // the argument's bytes in mem
	glo, ghi   int    // the guard page in mem
	side       side
	gapToGuard int // bytes left between the argument and the guard (diagnosis)
}

// newGuarded maps room for size bytes plus a guard page with protection
// prot (PROT_NONE; PROT_READ to tell loads from stores), places the
// argument gap bytes from the guard on side s and fills the rest with the
// canary.
func newGuarded(t *testing.T, size int, s side, gap, prot int) *guarded {
	t.Helper()
	ps := unix.Getpagesize()
	data := (size + gap + ps - 1) / ps * ps
	mem, err := unix.Mmap(-1, 0, data+ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", data+ps, err)
	}
	g := &guarded{mem: mem, side: s, gapToGuard: gap}
	if s == atEnd {
		g.glo, g.ghi = data, data+ps
		g.hi = data - gap
		g.lo = g.hi - size
		for i := range mem[:data] {
			mem[i] = canary
		}
	} else {
		g.glo, g.ghi = 0, ps
		g.lo = ps + gap
		g.hi = g.lo + size
		for i := range mem[ps:] {
			mem[ps+i] = canary
		}
	}
	if err := unix.Mprotect(mem[g.glo:g.ghi], prot); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return g
}

func (g *guarded) data() []byte { return g.mem[g.lo:g.hi:g.hi] }

func (g *guarded) free(t *testing.T) {
	if err := unix.Munmap(g.mem); err != nil {
		t.Fatalf("munmap: %v", err)
	}
}

// inGuard reports whether addr is in g's guard page.
func (g *guarded) inGuard(addr uintptr) bool {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(g.mem)))
	return addr >= base+uintptr(g.glo) && addr < base+uintptr(g.ghi)
}

// beyond is how far addr (in the guard page) lies outside the argument:
// bytes past its end, or before its start.
func (g *guarded) beyond(addr uintptr) int {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(g.mem)))
	if g.side == atEnd {
		return int(addr-base) - g.hi + 1
	}
	return g.lo - int(addr-base)
}

// canaryIntact reports the first byte of g's mapping outside the argument
// and the guard page that the call changed (-1 if none).
func (g *guarded) canaryIntact() int {
	lo, hi := 0, g.glo
	if g.side == atStart {
		lo, hi = g.ghi, len(g.mem)
	}
	for i := lo; i < hi; i++ {
		if (i < g.lo || i >= g.hi) && g.mem[i] != canary {
			return i
		}
	}
	return -1
}

// heapBuf returns size bytes on the heap, 8-byte aligned.
func heapBuf(size int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(make([]uint64, (size+7)/8+1)))), size)
}

// faultInfo is what a recovered panic of a kernel call says.
type faultInfo struct {
	fault bool    // a memory fault (else some other panic)
	addr  uintptr // the faulting address
	where string  // the function that faulted (first frame below sigpanic)
	value any
}

// callGuarded runs c with b, turning a fault into a faultInfo instead of
// a crash (as Forward's endGuard does for mapped weights).
func callGuarded(c boundsCase, b [][]byte) (res []byte, fi *faultInfo) {
	defer func(old bool) {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		fi = &faultInfo{value: r, where: panicSite()}
		var fa interface{ Addr() uintptr }
		if err, ok := r.(error); ok && errors.As(err, &fa) {
			fi.fault, fi.addr = true, fa.Addr()
		}
	}(debug.SetPanicOnFault(true))
	return c.run(b), nil
}

// panicSite names the function that raised the panic being recovered:
// the frame below runtime.sigpanic (a fault) or runtime.gopanic, with its
// file and line.
func panicSite() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	below := false
	for {
		f, more := frames.Next()
		if below && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s (%s:%d)", strings.TrimPrefix(f.Function, "anechat/engine/cpu."), f.File[strings.LastIndexByte(f.File, '/')+1:], f.Line)
		}
		if f.Function == "runtime.sigpanic" || f.Function == "runtime.gopanic" || strings.HasPrefix(f.Function, "runtime.panic") {
			below = true
		}
		if !more {
			return "?"
		}
	}
}

// results is what a call leaves: its returned bytes, then each buffer.
func results(extra []byte, b [][]byte) [][]byte {
	out := [][]byte{extra}
	for _, x := range b {
		out = append(out, bytes.Clone(x))
	}
	return out
}

// checkBounds runs c on ordinary slices, then with every argument at a
// guard page on each side, and fails the test (without crashing) on a
// fault, a result that differs, or a byte written outside an argument.
func checkBounds(t *testing.T, c boundsCase) {
	t.Helper()
	hb := make([][]byte, len(c.args))
	for i, a := range c.args {
		hb[i] = heapBuf(len(a.init))
		copy(hb[i], a.init)
	}
	extra, fi := callGuarded(c, hb)
	if fi != nil {
		t.Errorf("%s: panics on ordinary slices in %s: %v", c.name, fi.where, fi.value)
		return
	}
	want := results(extra, hb)
	for _, s := range []side{atEnd, atStart} {
		gs := make([]*guarded, len(c.args))
		b := make([][]byte, len(c.args))
		for i, a := range c.args {
			gs[i] = newGuarded(t, len(a.init), s, 0, unix.PROT_NONE)
			b[i] = gs[i].data()
			copy(b[i], a.init)
		}
		extra, fi := callGuarded(c, b)
		if fi != nil {
			for _, g := range gs {
				g.free(t)
			}
			t.Error(diagnose(t, c, s, fi))
			continue
		}
		got := results(extra, b)
		for i, g := range gs {
			if at := g.canaryIntact(); at >= 0 {
				t.Errorf("%s: with %s %s, a byte %d bytes outside it changed (a store outside the argument)", c.name, c.args[i].name, s, outside(g, at))
			}
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				what := "the result"
				if i > 0 {
					what = c.args[i-1].name
				}
				t.Errorf("%s: %s differs from the call on ordinary slices with every argument %s", c.name, what, s)
			}
		}
		for _, g := range gs {
			g.free(t)
		}
	}
}

// outside is how far byte at of g's mapping lies from the argument.
func outside(g *guarded, at int) int {
	if at < g.lo {
		return g.lo - at
	}
	return at - g.hi + 1
}

// diagnose describes a fault of c with every argument on side s: which
// argument's guard it hit, in which function, whether a load or a store
// (a rerun with that guard readable), and how far beyond the argument the
// accesses reach (reruns with that argument moved away from its guard one
// element at a time, the others on the heap).
func diagnose(t *testing.T, c boundsCase, s side, fi *faultInfo) string {
	if !fi.fault {
		return fmt.Sprintf("%s: panics in %s with every argument %s: %v", c.name, fi.where, s, fi.value)
	}
	// Which guard: a fresh run with the same placement tells the address
	// apart from the first run's mappings, which are gone; rerun each
	// argument alone at its guard instead.
	arg := -1
	var off int
	for i := range c.args {
		if f, g := runOne(t, c, i, s, 0, unix.PROT_NONE); f != nil {
			if f.fault && g.inGuard(f.addr) {
				arg, off = i, g.beyond(f.addr)
				fi = f
			}
			g.free(t)
			if arg >= 0 {
				break
			}
		} else {
			g.free(t)
		}
	}
	if arg < 0 {
		return fmt.Sprintf("%s: faults at %#x in %s with every argument %s, in no argument's guard page (and with each alone at its guard, none): %v", c.name, fi.addr, fi.where, s, fi.value)
	}
	a := c.args[arg]
	kind := "loads"
	if f, g := runOne(t, c, arg, s, 0, unix.PROT_READ); f != nil && f.fault && g.inGuard(f.addr) {
		kind = "stores"
		g.free(t)
	} else {
		g.free(t)
	}
	dir := "past the end of"
	if s == atStart {
		dir = "before the start of"
	}
	reach := "more than a page"
	ps := unix.Getpagesize()
	for gap := a.elem; gap <= ps; gap += a.elem {
		f, g := runOne(t, c, arg, s, gap, unix.PROT_NONE)
		g.free(t)
		if f == nil {
			reach = nbytes(gap)
			break
		}
	}
	return fmt.Sprintf("%s: %s %s %s %s (%d bytes, %d-byte elements): the first faulting byte is %s %s it; the call's accesses reach %s beyond it (fault at %#x)",
		c.name, fi.where, kind, dir, a.name, len(a.init), a.elem, nbytes(off), strings.Fields(dir)[0], reach, fi.addr)
}

func nbytes(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// runOne runs c with argument i at a guard on side s (gap bytes from it,
// guard protection prot) and the others on the heap; the caller frees g.
func runOne(t *testing.T, c boundsCase, i int, s side, gap, prot int) (*faultInfo, *guarded) {
	b := make([][]byte, len(c.args))
	var g *guarded
	for j, a := range c.args {
		if j == i {
			g = newGuarded(t, len(a.init), s, gap, prot)
			b[j] = g.data()
		} else {
			b[j] = heapBuf(len(a.init))
		}
		copy(b[j], a.init)
	}
	_, fi := callGuarded(c, b)
	return fi, g
}

// Typed views of argument buffers (the buffers are aligned for the type:
// heap buffers to 8 bytes, guarded ones to their size's alignment).

func asF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func asI8(b []byte) []int8 { return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b)) }

func asI32(b []byte) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func asKRecs(b []byte) []kRec {
	return unsafe.Slice((*kRec)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/kRecBytes)
}

// bytesOf copies a typed slice's bytes.
func bytesOf[T any](s []T) []byte {
	var z T
	return bytes.Clone(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z))))
}

func f32Arg(name string, v []float32) boundsArg { return boundsArg{name, bytesOf(v), 4} }

func appendF32(dst []byte, v ...float32) []byte {
	for _, x := range v {
		dst = fmt.Appendf(dst, "%08x", math.Float32bits(x))
	}
	return dst
}

// funcName is the name of a kernel function value.
func funcName(f any) string {
	n := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return strings.TrimPrefix(n, "anechat/engine/cpu.")
}

// rowKernelNames lists the row kernels a call of n tokens runs for t
// (rowGroupSize's groups), or the Go loops.
func rowKernelNames(t gguf.Type, n int) string {
	ks := rowKernels(t)
	if ks[1] == nil {
		return "Go loops (no row kernels)"
	}
	var names []string
	seen := map[int]bool{}
	for tk := 0; tk < n; {
		g := rowGroupSize(n - tk)
		if !seen[g] {
			names = append(names, funcName(ks[g]))
			seen[g] = true
		}
		tk += g
	}
	return strings.Join(names, ", ")
}

// encodeFloats returns v in the float format t (F32, F16, BF16).
func encodeFloats(t gguf.Type, v []float32) []byte {
	switch t {
	case gguf.F16:
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = ToF16(x)
		}
		return bytesOf(h)
	case gguf.BF16:
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = ToBF16(x)
		}
		return bytesOf(h)
	}
	return bytesOf(v)
}

// rowMatMulCase is MatMulInput of a rows×cols integer matrix with n
// tokens through the row kernels' dispatch (matMulRows: groups of 8 rows,
// tokens in groups of 8, 4, 2, 1; the last partial group of rows on the
// padded tail into scratch), every buffer the kernels read or write an
// argument: the weights, the padded tail rows, the grouped 8-bit values,
// the transposed block scales and sums (or Q8_K records), the output and
// the tail's scratch.
func rowMatMulCase(r *rand.Rand, typ gguf.Type, rows, cols, n int) boundsCase {
	w := testWeights(r, typ, rows, cols, 0.05)
	x := randVals(r, n*cols, 1)
	m0, err := NewMatrix("w", typ, rows, cols, w)
	if err != nil {
		panic(err)
	}
	in0 := NewInput(x, cols)
	args := []boundsArg{{"the weights (Matrix.Data)", w, 1}}
	tail := m0.tail != nil
	if tail {
		args = append(args, boundsArg{"the padded tail rows (Matrix.tail)", bytes.Clone(m0.tail), 1})
	}
	k := kFormat(typ)
	if k {
		in0.q8K()
		args = append(args, boundsArg{"the Q8_K values (qx, inputK.q)", bytesOf(in0.k.q), 1},
			boundsArg{"the Q8_K records (dx, inputK.recs)", bytesOf(in0.k.recs), kRecBytes})
	} else {
		in0.q8T()
		var sx []int32
		var sname string
		switch typ {
		case gguf.Q4_1, gguf.Q5_1:
			sname = "the block sums sT (sx)"
			sx = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(in0.sT))), len(in0.sT))
		case gguf.Q4_0:
			sname, sx = "the block sums qs8T (sx)", in0.qs8T
		case gguf.Q5_0:
			sname, sx = "the block sums qs16T (sx)", in0.qs16T
		default:
			sname, sx = "the block sums qs128T (sx)", in0.qs128T
		}
		args = append(args, boundsArg{"the 8-bit values (qx, Input.qG)", bytesOf(in0.qG), 1},
			boundsArg{"the block scales dT (dx)", bytesOf(in0.dT), 4}, boundsArg{sname, bytesOf(sx), 4})
	}
	args = append(args, f32Arg("the output", make([]float32, n*rows)))
	if tail {
		args = append(args, f32Arg("the tail rows' scratch (Input.work)", make([]float32, 8*n)))
	}
	run := func(b [][]byte) []byte {
		m, err := NewMatrix("w", typ, rows, cols, b[0])
		if err != nil {
			panic(err)
		}
		i := 1
		if tail {
			m.tail = b[i]
			i++
		}
		in := NewInput(x, cols)
		if k {
			in.q8K()
			in.k.q, in.k.recs = asI8(b[i]), asKRecs(b[i+1])
		} else {
			in.q8T()
			in.qG, in.dT = asI8(b[i]), asF32(b[i+1])
			switch typ {
			case gguf.Q4_1, gguf.Q5_1:
				in.sT = asF32(b[i+2])
			case gguf.Q4_0:
				in.qs8T = asI32(b[i+2])
			case gguf.Q5_0:
				in.qs16T = asI32(b[i+2])
			default:
				in.qs128T = asI32(b[i+2])
			}
		}
		out := asF32(b[len(b)-1-boolInt(tail)])
		if tail {
			in.work = asF32(b[len(b)-1])
		}
		m.MatMulInput(NewPool(1), out, in)
		return nil
	}
	return boundsCase{name: fmt.Sprintf("%s MatMul %dx%d, %d tokens (%s)", typ, rows, cols, n, rowKernelNames(typ, n)), args: args, run: run}
}

// floatMatMulCase is MatMulInput of a rows×cols float matrix (F32, F16,
// BF16) with n tokens: the fused kernels reading the rows in place (4, 2,
// 1 tokens), Dot3 and Dot on the widened row, the widening of the row and
// of its tail beyond a multiple of 32; arguments the weights, the tokens,
// the output and the row buffer (Input.work).
func floatMatMulCase(r *rand.Rand, typ gguf.Type, rows, cols, n int) boundsCase {
	w := encodeFloats(typ, randVals(r, rows*cols, 0.1))
	x := randVals(r, n*cols, 1)
	args := []boundsArg{{"the weights (Matrix.Data)", w, typ.RowBytes(1)}, f32Arg("the tokens", x), f32Arg("the output", make([]float32, n*rows))}
	if typ != gguf.F32 {
		args = append(args, f32Arg("the row buffer (Input.work)", make([]float32, cols)))
	}
	run := func(b [][]byte) []byte {
		m, err := NewMatrix("w", typ, rows, cols, b[0])
		if err != nil {
			panic(err)
		}
		in := NewInput(asF32(b[1]), cols)
		if typ != gguf.F32 {
			in.work = asF32(b[3])
		}
		m.MatMulInput(NewPool(1), asF32(b[2]), in)
		return nil
	}
	return boundsCase{name: fmt.Sprintf("%s MatMul %dx%d, %d tokens", typ, rows, cols, n), args: args, run: run}
}

// rowCase is Matrix.Row of the last row of a 3-row matrix of typ
// (dequantRow: the SIMD dequantisers of Q4_0, Q4_1, Q8_0, the F16 and BF16
// widening, the Go loops of the rest).
func rowCase(r *rand.Rand, typ gguf.Type, cols int) boundsCase {
	var w []byte
	if integerType(typ) {
		w = testWeights(r, typ, 3, cols, 0.1)
	} else {
		w = encodeFloats(typ, randVals(r, 3*cols, 0.1))
	}
	return boundsCase{
		name: fmt.Sprintf("%s Row of %d columns", typ, cols),
		args: []boundsArg{{"the weights (Matrix.Data)", w, 1}, f32Arg("the destination", make([]float32, cols))},
		run: func(b [][]byte) []byte {
			m, err := NewMatrix("w", typ, 3, cols, b[0])
			if err != nil {
				panic(err)
			}
			m.Row(asF32(b[1]), 2)
			return nil
		},
	}
}

// floatCases are the float kernels called directly at the lengths the
// backend gives them: Dot, Dot3, Axpy, the gated activations, Softmax,
// the attention run kernels (scores of a run of K rows, the weighted sum
// of V rows, as AttendBlock calls them) and the two quantisers, with the
// strides of a single token and those of Input's grouped layout.
func floatCases(r *rand.Rand) []boundsCase {
	var cs []boundsCase
	for _, n := range []int{32, 64, 96, 100, 263} {
		a, b := randVals(r, n, 1), randVals(r, n, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("Dot of %d", n), []boundsArg{f32Arg("a", a), f32Arg("b", b)},
			func(b [][]byte) []byte { return appendF32(nil, Dot(asF32(b[0]), asF32(b[1]))) }})
		x0, x1, x2 := randVals(r, n, 1), randVals(r, n, 1), randVals(r, n, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("Dot3 of %d", n), []boundsArg{f32Arg("w", a), f32Arg("x0", x0), f32Arg("x1", x1), f32Arg("x2", x2)},
			func(b [][]byte) []byte {
				d := Dot3(asF32(b[0]), asF32(b[1]), asF32(b[2]), asF32(b[3]))
				return appendF32(nil, d[:]...)
			}})
	}
	for _, n := range []int{3, 4, 7, 8, 13, 16, 37, 100, 1029} {
		y, x := randVals(r, n, 1), randVals(r, n, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("Axpy of %d", n), []boundsArg{f32Arg("y", y), f32Arg("x", x)},
			func(b [][]byte) []byte { Axpy(asF32(b[0]), 0.37, asF32(b[1])); return nil }})
		g, u := randVals(r, n, 2), randVals(r, n, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("siluMulRange of %d", n), []boundsArg{f32Arg("gate", g), f32Arg("up", u)},
			func(b [][]byte) []byte { siluMulRange(asF32(b[0]), asF32(b[1])); return nil }})
		cs = append(cs, boundsCase{fmt.Sprintf("geluMulRange of %d", n), []boundsArg{f32Arg("gate", g), f32Arg("up", u)},
			func(b [][]byte) []byte { geluMulRange(asF32(b[0]), asF32(b[1])); return nil }})
		cs = append(cs, boundsCase{fmt.Sprintf("Softmax of %d", n), []boundsArg{f32Arg("x", g)},
			func(b [][]byte) []byte { Softmax(asF32(b[0])); return nil }})
	}
	for _, hd := range []int{32, 64, 128, 256} {
		if !hasRunKernels(hd) {
			continue
		}
		for _, heads := range []int{1, 2} {
			for _, rows := range []int{1, 2, 5, 8, 17} {
				stride := heads * hd
				// The last head's slice of a run of rows: rows-1 strides
				// and one head, as dotRowsSIMD's bounds check allows.
				kv := randVals(r, (rows-1)*stride+hd, 1)
				q, w, o := randVals(r, hd, 1), randVals(r, rows, 0.2), randVals(r, hd, 1)
				name := fmt.Sprintf("%d rows of %d heads of %d", rows, heads, hd)
				cs = append(cs, boundsCase{"dotRowsSIMD, " + name, []boundsArg{f32Arg("the query", q), f32Arg("the K rows", kv), f32Arg("the scores", make([]float32, rows))},
					func(b [][]byte) []byte {
						if !dotRowsSIMD(asF32(b[0]), asF32(b[1]), stride, 0.125, asF32(b[2])) {
							panic("dotRowsSIMD declined")
						}
						return nil
					}})
				cs = append(cs, boundsCase{"wsumSIMD, " + name, []boundsArg{f32Arg("the output", o), f32Arg("the V rows", kv), f32Arg("the weights", w)},
					func(b [][]byte) []byte {
						if !wsumSIMD(asF32(b[0]), asF32(b[1]), stride, asF32(b[2])) {
							panic("wsumSIMD declined")
						}
						return nil
					}})
			}
		}
	}
	for _, nb := range []int{1, 2, 3, 8} {
		x := randVals(r, 32*nb, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("quantizeQ8Into of %d blocks", nb),
			[]boundsArg{f32Arg("x", x), {"q", make([]byte, 32*nb), 1}, f32Arg("d", make([]float32, nb)), f32Arg("s", make([]float32, nb)), {"qs", make([]byte, 4*nb), 4}},
			func(b [][]byte) []byte {
				quantizeQ8Into(asI8(b[1]), 32, asF32(b[2]), asF32(b[3]), asI32(b[4]), 1, asF32(b[0]))
				return nil
			}})
	}
	for _, nb := range []int{1, 2, 3} {
		x := randVals(r, qkK*nb, 1)
		cs = append(cs, boundsCase{fmt.Sprintf("quantizeQ8KInto of %d blocks", nb),
			[]boundsArg{f32Arg("x", x), {"q", make([]byte, qkK*nb), 1}, {"the records", make([]byte, kRecBytes*nb), kRecBytes}},
			func(b [][]byte) []byte {
				quantizeQ8KInto(asI8(b[1]), qkK, asKRecs(b[2]), 1, asF32(b[0]))
				return nil
			}})
	}
	// Input's layouts: every token of a call quantised into the grouped
	// values and transposed scalars (q8T, q8K), the buffers exactly as
	// long as they allocate them.
	for _, n := range []int{1, 2, 4, 8, 15} {
		for _, nb := range []int{1, 3} {
			cols := 32 * nb
			x := randVals(r, n*cols, 1)
			ts := n + 3
			cs = append(cs, boundsCase{fmt.Sprintf("quantizeQ8Into, Input layout, %d tokens of %d blocks", n, nb),
				[]boundsArg{f32Arg("x", x), {"qG", make([]byte, n*cols), 1}, f32Arg("dT", make([]float32, nb*ts)), f32Arg("sT", make([]float32, nb*ts)), {"qsT", make([]byte, 4*nb*ts), 4}},
				func(b [][]byte) []byte {
					x, qG, dT, sT, qsT := asF32(b[0]), asI8(b[1]), asF32(b[2]), asF32(b[3]), asI32(b[4])
					for t := 0; t < n; {
						g := rowGroupSize(n - t)
						for j := range g {
							quantizeQ8Into(qG[(t*nb+j)*32:], g*32, dT[t+j:], sT[t+j:], qsT[t+j:], ts, x[(t+j)*cols:(t+j+1)*cols])
						}
						t += g
					}
					return nil
				}})
			kcols := qkK * nb
			xk := randVals(r, n*kcols, 1)
			cs = append(cs, boundsCase{fmt.Sprintf("quantizeQ8KInto, Input layout, %d tokens of %d blocks", n, nb),
				[]boundsArg{f32Arg("x", xk), {"q", make([]byte, n*kcols), 1}, {"the records", make([]byte, kRecBytes*nb*ts), kRecBytes}},
				func(b [][]byte) []byte {
					x, q, recs := asF32(b[0]), asI8(b[1]), asKRecs(b[2])
					for t := 0; t < n; {
						g := rowGroupSize(n - t)
						for j := range g {
							quantizeQ8KInto(q[(t*nb+j)*qkK:], g*qkK, recs[t+j:], ts, x[(t+j)*kcols:(t+j+1)*kcols])
						}
						t += g
					}
					return nil
				}})
		}
	}
	return cs
}

// boundsCases are every case, for the kernel set switched on.
func boundsCases() []boundsCase {
	r := rand.New(rand.NewPCG(31, 41))
	var cs []boundsCase
	widths := []int{1, 2, 4, 8, 15} // each group size alone, and 8+4+2+1
	for _, typ := range allIntegerTypes {
		bsize := typ.BlockSize()
		for _, rows := range []int{8, 13} {
			for _, nb := range []int{1, 2, 3, 5} {
				for _, n := range widths {
					cs = append(cs, rowMatMulCase(r, typ, rows, nb*bsize, n))
				}
			}
		}
		for _, nb := range []int{1, 3} {
			cs = append(cs, rowCase(r, typ, nb*bsize))
		}
	}
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16} {
		for _, rows := range []int{8, 13} {
			for _, cols := range []int{8, 32, 45, 96} {
				for _, n := range []int{1, 2, 3, 4, 5, 7} {
					cs = append(cs, floatMatMulCase(r, typ, rows, cols, n))
				}
			}
		}
		for _, cols := range []int{8, 13, 32, 45} {
			cs = append(cs, rowCase(r, typ, cols))
		}
	}
	return append(cs, floatCases(r)...)
}

// TestKernelBounds: every kernel of every kernel set this CPU has reads
// and writes only its arguments (see the top of this file).
func TestKernelBounds(t *testing.T) {
	for _, ks := range boundsKernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.enable()()
			cs := boundsCases()
			for _, c := range cs {
				checkBounds(t, c)
			}
			t.Logf("%d calls, kernels %s, page size %d", len(cs), Kernels(), unix.Getpagesize())
		})
	}
}
