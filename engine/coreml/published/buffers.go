package published

import (
	"fmt"
	"slices"
	"strings"
	"weak"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// buffer is one input or output of a function: memory outside the Go heap
// (mlcore.Alloc: page-aligned, as Core ML prefers), contiguous, with its
// fp16 or int32 elements.
type buffer struct {
	buf  mlcore.Buffer
	f16  []uint16
	i32  []int32
	free func() error
}

// newBuffer allocates a zeroed buffer of dt and shape.
func newBuffer(dt mlcore.DType, shape []int) (*buffer, error) {
	buf, free, err := mlcore.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	b := &buffer{buf: buf, free: free}
	switch dt {
	case mlcore.Float16:
		b.f16 = buf.Float16s()
	case mlcore.Int32:
		b.i32 = buf.Int32s()
	}
	return b, nil
}

// setRow stores row as fp16 at element off.
func (b *buffer) setRow(off int, row []float32) {
	d := b.f16[off : off+len(row)]
	for i, v := range row {
		d[i] = coreml.ToHalf(v)
	}
}

// fill stores v as fp16 in n elements from off.
func (b *buffer) fill(off, n int, v float32) {
	h := coreml.ToHalf(v)
	for i := range b.f16[off : off+n] {
		b.f16[off+i] = h
	}
}

// getRow reads len(dst) fp16 elements at off.
func (b *buffer) getRow(dst []float32, off int) {
	for i, h := range b.f16[off : off+len(dst)] {
		dst[i] = safetensors.HalfToFloat(h)
	}
}

func (b *buffer) close() error {
	if b.free == nil {
		return nil
	}
	f := b.free
	b.free = nil
	b.f16, b.i32 = nil, nil
	return f()
}

// function holds the buffers of one function (decode or verify) on every
// chunk: host-built inputs shared by the chunks that take them, the cache
// inputs of each chunk that owns KV, and every chunk's outputs (a later
// chunk's carried inputs are those buffers).
type function struct {
	name  string
	width int
	host  map[string]*buffer
	cache []map[string]*buffer // per chunk: K_sliding_in, ... (nil when none)
	sync  []cacheSync          // per chunk: what its cache tensors hold
	out   []map[string]*buffer
	ins   []map[string]mlcore.Buffer
	outs  []map[string]mlcore.Buffer
	infos []*coreml.FunctionInfo
	all   []*buffer
}

// hostInputs are the inputs the host builds (every other input of a chunk
// is an output of an earlier chunk).
var hostInputs = map[string]bool{
	"hidden_states": true, "per_layer_raw": true, "causal_mask_full": true, "causal_mask_sliding": true,
	"update_mask": true, "update_indicator": true, "cos_s": true, "sin_s": true, "cos_f": true, "sin_f": true,
}

// cacheInputs are the cache tensors of a chunk that owns KV.
var cacheInputs = []string{"K_sliding_in", "V_sliding_in", "K_full_in", "V_full_in"}

// allocate makes the buffers of function name on every chunk, checking
// each declared input is built by the host (with the shape the host
// builds), a cache tensor, or an output of an earlier chunk of the same
// shape.
func (be *Model) allocate(name string) (_ *function, err error) {
	f := &function{name: name, width: 1, host: map[string]*buffer{}}
	defer func() {
		if err != nil {
			for _, t := range f.all {
				t.close()
			}
		}
	}()
	switch name {
	case FuncVerify:
		f.width = be.geo.verifyWidth
	case FuncPrefill:
		f.width = be.geo.prefillWidth
	}
	alloc := func(fs mlcore.FeatureSpec) (*buffer, error) {
		x, err := newBuffer(fs.DType, fs.Shape)
		if err != nil {
			return nil, fmt.Errorf("coreml: %s buffer %s: %w", name, fs, err)
		}
		f.all = append(f.all, x)
		return x, nil
	}
	toInfo := func(fs []mlcore.FeatureSpec) []coreml.TensorInfo {
		var out []coreml.TensorInfo
		for _, x := range fs {
			dt := "fp16"
			if x.DType == mlcore.Int32 {
				dt = "int32"
			}
			out = append(out, coreml.TensorInfo{Name: x.Name, Shape: slices.Clone(x.Shape), DType: dt})
		}
		return out
	}
	for j := range be.p.Decode {
		ins, outs, _ := be.run.Features(j, name)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: function %s: %s", coreml.ErrBundle, be.file(j, name), name, fmt.Sprintf(format, args...))
		}
		info := &coreml.FunctionInfo{Name: name, Kind: name, Width: f.width, Inputs: toInfo(ins), Outputs: toInfo(outs)}
		f.infos = append(f.infos, info)
		out := map[string]*buffer{}
		ob := map[string]mlcore.Buffer{}
		for _, o := range outs {
			if !o.MultiArray || (o.DType != mlcore.Float16 && o.DType != mlcore.Int32) {
				return nil, bad("output %s is not an fp16 or int32 array", o)
			}
			x, err := alloc(o)
			if err != nil {
				return nil, err
			}
			out[o.Name], ob[o.Name] = x, x.buf
		}
		ib := map[string]mlcore.Buffer{}
		var cache map[string]*buffer
		for _, in := range ins {
			if !in.MultiArray || in.DType != mlcore.Float16 {
				return nil, bad("input %s is not an fp16 array", in)
			}
			if src := f.carrier(j, in.Name); src != nil {
				if !slices.Equal(src.buf.Shape(), in.Shape) {
					return nil, bad("input %s: the earlier chunk's output is %v", in, src.buf.Shape())
				}
				ib[in.Name] = src.buf
				continue
			}
			if slices.Contains(cacheInputs, in.Name) && name != FuncPrefill {
				if _, ok := be.kvLayer[j]; !ok {
					return nil, bad("input %s: the decode function of this chunk takes no cache", in)
				}
				if cache == nil {
					cache = map[string]*buffer{}
				}
				x, err := alloc(in)
				if err != nil {
					return nil, err
				}
				cache[in.Name], ib[in.Name] = x, x.buf
				continue
			}
			want := be.geo.hostShape(in.Name, f.width)
			if want == nil {
				return nil, bad("input %s is neither built by the host (PUBLISHED.md) nor an output of an earlier chunk", in)
			}
			if !slices.Equal(want, in.Shape) {
				return nil, bad("input %s: the host builds %v (from model_config.json and chunk 1's features)", in, want)
			}
			x, ok := f.host[in.Name]
			if !ok {
				var err error
				if x, err = alloc(in); err != nil {
					return nil, err
				}
				f.host[in.Name] = x
			}
			ib[in.Name] = x.buf
		}
		if sl, ok := be.kvLayer[j]; ok && name != FuncPrefill {
			for _, n := range cacheInputs {
				if cache[n] == nil {
					return nil, bad("no input %s: a chunk that owns KV takes all of %s", n, strings.Join(cacheInputs, ", "))
				}
			}
			ns, nf := len(sl[0]), len(sl[1])
			want := map[string][]int{}
			if name == FuncDecode {
				for _, n := range []string{"K_sliding_out", "V_sliding_out"} {
					want[n] = []int{ns, be.geo.kvHeads, be.geo.window, be.geo.slotWidth}
				}
				for _, n := range []string{"K_full_out", "V_full_out"} {
					want[n] = []int{nf, be.geo.kvHeads, be.geo.context, be.geo.slotWidth}
				}
			} else {
				for _, n := range []string{"new_K_sliding", "new_V_sliding"} {
					want[n] = []int{ns, be.geo.kvHeads, f.width, be.geo.headSliding}
				}
				for _, n := range []string{"new_K_full", "new_V_full"} {
					want[n] = []int{nf, be.geo.kvHeads, f.width, be.geo.headFull}
				}
			}
			for n, shape := range want {
				x, ok := out[n]
				if !ok || x.f16 == nil || !slices.Equal(x.buf.Shape(), shape) {
					return nil, bad("output %q must be fp16 %v (the new K/V rows of the chunk's own layers)", n, shape)
				}
			}
			for _, n := range []string{"K_sliding_in", "K_full_in"} {
				if !slices.Equal(cache[n].buf.Shape(), cache["V"+n[1:]].buf.Shape()) {
					return nil, bad("%s and V%s differ in shape", n, n[1:])
				}
			}
		}
		f.cache, f.out, f.sync = append(f.cache, cache), append(f.out, out), append(f.sync, cacheSync{})
		f.ins, f.outs = append(f.ins, ib), append(f.outs, ob)
	}
	return f, nil
}

// carrier returns the output of an earlier chunk that chunk j's input
// name is: the latest earlier chunk's output of that name, or of that
// name with "_out" (hidden_states_out, per_layer_combined_out).
func (f *function) carrier(j int, name string) *buffer {
	for i := j - 1; i >= 0; i-- {
		if t, ok := f.out[i][name+"_out"]; ok {
			return t
		}
		if t, ok := f.out[i][name]; ok {
			return t
		}
	}
	return nil
}

// cacheSync is what a chunk's cache tensors hold: the rows of cache (at
// epoch) for the committed positions below valid, laid out for a call at
// start (the sliding tensors are a shift buffer relative to start); full
// rows from start on are zero. Rows of pending positions are copied for
// each call but never trusted by the next: the Session may drop them.
type cacheSync struct {
	cache        weak.Pointer[kv.Cache]
	epoch        uint64
	start, valid int
	ok           bool
}

// syncCache makes chunk j's cache tensors what buildCache writes for a call
// at start, copying only what changed since the last call on the same
// cache: the sliding tensors shift by the positions advanced and take the
// rows from valid on; the full tensors take rows valid..start-1 and are
// zeroed from start on. Anything else (another cache, a truncated,
// restored or reset one, a call further back or a window or more ahead)
// rebuilds them.
func (be *Model) syncCache(tens map[string]*buffer, st *cacheSync, j, start int, cache *kv.Cache) {
	g := &be.geo
	delta := start - st.start
	if !st.ok || st.cache != weak.Make(cache) || st.epoch != cache.Epoch() || delta < 0 || delta >= g.window {
		be.buildCache(tens, j, start, cache)
	} else {
		valid := min(st.valid, start)
		sl := be.kvLayer[j]
		row := g.slotWidth
		for _, n := range []string{"K_sliding_in", "V_sliding_in"} {
			b := tens[n].f16
			for s := range sl[0] {
				for h := range g.kvHeads {
					o := (s*g.kvHeads + h) * g.window * row
					copy(b[o:o+(g.window-delta)*row], b[o+delta*row:o+g.window*row])
				}
			}
		}
		for s, layer := range sl[0] {
			lo, _ := cache.Live(layer)
			for p := max(valid, start-g.window, 0); p < start; p++ {
				if p < cache.Len() && p < lo {
					continue
				}
				r := p - (start - g.window)
				be.putRow(tens["K_sliding_in"], g.window, s, r, cache.K(layer, p), g.headSliding)
				be.putRow(tens["V_sliding_in"], g.window, s, r, cache.V(layer, p), g.headSliding)
			}
		}
		for s, layer := range sl[1] {
			for _, n := range []string{"K_full_in", "V_full_in"} {
				b := tens[n].f16
				for h := range g.kvHeads {
					o := (s*g.kvHeads + h) * g.context * row
					// Rows from start on: zero (they held a later call's
					// pending rows at most up to the last start).
					clear(b[o+start*row : o+min(max(st.start, start), g.context)*row])
				}
			}
			for p := valid; p < start; p++ {
				be.putRow(tens["K_full_in"], g.context, s, p, cache.K(layer, p), g.headFull)
				be.putRow(tens["V_full_in"], g.context, s, p, cache.V(layer, p), g.headFull)
			}
		}
	}
	*st = cacheSync{cache: weak.Make(cache), epoch: cache.Epoch(), start: start, valid: min(start, cache.Len()), ok: true}
}

// putRow writes src's heads (hd wide) into row r of slot s of dst
// (slots, heads, rows, slot width).
func (be *Model) putRow(dst *buffer, rows, s, r int, src []float32, hd int) {
	g := &be.geo
	for h := range g.kvHeads {
		dst.setRow(((s*g.kvHeads+h)*rows+r)*g.slotWidth, src[h*hd:(h+1)*hd])
	}
}

// buildCache fills chunk j's cache inputs from cache for a call at start:
// the sliding tensors as the published host keeps them (a shift buffer
// whose row W-1 holds position start-1, row r position start-W+r), the
// full tensors with row i holding position i < start; every other row and
// the columns past a sliding row's width are zero.
func (be *Model) buildCache(tens map[string]*buffer, j, start int, cache *kv.Cache) {
	g := &be.geo
	sl := be.kvLayer[j]
	for _, n := range cacheInputs {
		clear(tens[n].f16)
	}
	put := be.putRow
	for s, layer := range sl[0] {
		lo, _ := cache.Live(layer)
		for r := range g.window {
			p := start - g.window + r
			if p < 0 || (p < cache.Len() && p < lo) {
				continue
			}
			put(tens["K_sliding_in"], g.window, s, r, cache.K(layer, p), g.headSliding)
			put(tens["V_sliding_in"], g.window, s, r, cache.V(layer, p), g.headSliding)
		}
	}
	for s, layer := range sl[1] {
		for p := range start {
			put(tens["K_full_in"], g.context, s, p, cache.K(layer, p), g.headFull)
			put(tens["V_full_in"], g.context, s, p, cache.V(layer, p), g.headFull)
		}
	}
}

func (be *Model) mappings() []*mmap.Mapping {
	var ms []*mmap.Mapping
	for _, s := range []*coreml.Sidecar{be.embed, be.ple} {
		if s != nil {
			ms = append(ms, s.Mappings()...)
		}
	}
	for _, t := range be.ropes {
		if t.m != nil {
			ms = append(ms, t.m)
		}
	}
	return ms
}

func (be *Model) release() {
	for _, f := range be.fns {
		for _, t := range f.all {
			t.close()
		}
		f.all = nil
	}
	for _, s := range []*coreml.Sidecar{be.embed, be.ple} {
		if s != nil {
			s.Close()
		}
	}
	for _, t := range be.ropes {
		t.close()
	}
}
