package refrun

import (
	"fmt"
	"math"

	"anechat/engine/coreml"
	"anechat/engine/cpu"
)

// exec is one function call of one chunk: T rows, every input read from
// the host's buffers, every output written.
type exec struct {
	r       *Executor
	c       *coreml.ChunkInfo
	j, T    int
	in, out map[string][]float32
	ints    map[string][]int32 // int32 outputs
	last    bool
	prefill bool

	x        []float32 // the residual stream [T, H]
	perLayer []float32 // [T, L*P]
	placed   map[int][2][]float32
	first    int       // the chunk's first layer
	io       []layerIO // per layer of the chunk
}

// layerIO is what a layer's attention core reads and writes of the call's
// buffers, looked up before the layers run.
type layerIO struct {
	cos, sin, mask []float32
	halves         bool // the RoPE layout rotates split halves, not pairs
	// kNew, vNew ([1,kv_heads,T,head_dim]) and place are set on a layer
	// that computes its K/V rows.
	kNew, vNew []float32
	place      placeIO
}

// placeIO is a source layer's cache tensors and its kind's placement
// matrix, which place adds the new rows through.
type placeIO struct {
	kc, vc, pl []float32
}

func (e *exec) input(name string) ([]float32, error) {
	v, ok := e.in[name]
	if !ok {
		return nil, fmt.Errorf("%w: function of chunk %d has no input %q", ErrContract, e.j, name)
	}
	return v, nil
}

func (e *exec) output(name string) ([]float32, error) {
	v, ok := e.out[name]
	if !ok {
		return nil, fmt.Errorf("%w: function of chunk %d has no output %q", ErrContract, e.j, name)
	}
	return v, nil
}

func (e *exec) run() error {
	m := &e.r.m.Arch
	H, T := m.Hidden, e.T
	hin, err := e.input("hidden_in")
	if err != nil {
		return err
	}
	e.x = append([]float32(nil), hin...)
	if P := m.PLEDim; P > 0 {
		if err := e.perLayerInputs(); err != nil {
			return err
		}
	}
	e.placed = map[int][2][]float32{}
	first, end := e.c.Layers[0], e.c.Layers[1]
	e.first = first
	// Rows of a source layer computed in an earlier chunk are placed
	// into the cache tensor here, as the chunk that owns them does.
	for i := first; i < end; i++ {
		s := m.Layers[i].Source
		if s < first {
			if _, ok := e.placed[s]; !ok {
				kn, err := e.input(name("k_new_", s))
				if err != nil {
					return err
				}
				vn, err := e.input(name("v_new_", s))
				if err != nil {
					return err
				}
				pio, err := e.placeInputs(s)
				if err != nil {
					return err
				}
				e.place(s, kn, vn, pio)
			}
		}
	}
	if err := e.layerInputs(first, end); err != nil {
		return err
	}
	e.r.layers.Run(first, end, e.x, T, e.perLayer, e)
	if !e.last {
		out, err := e.output("hidden_out")
		if err != nil {
			return err
		}
		copy(out, e.x)
		return nil
	}
	rows := T
	x := e.x
	if e.prefill {
		// last @ x: the one-hot row selects the last real row.
		last, err := e.input("last")
		if err != nil {
			return err
		}
		sel := make([]float32, H)
		for t, w := range last {
			if w != 0 {
				for d := range H {
					sel[d] += w * x[t*H+d]
				}
			}
		}
		x, rows = sel, 1
	}
	// The final norm and the logits before the softcap (the host applies
	// it), row by row,
	// then written out in the contract's blocks of B ids: logits
	// [1,nb,R,B] (sample, prefill), and per block the first maximum
	// (cpu.Argmax: NaN never wins; a block of NaN gives index 0 and NaN)
	// and its value, block_argmax and block_max [1,nb,R] (generate,
	// prefill). The host takes the second level.
	V := m.Vocab
	B := e.r.m.Geometry.ArgmaxBlock
	nb := V / B
	z := make([]float32, rows*V)
	e.r.layers.Logits(x, rows, z)
	if out, ok := e.out["logits"]; ok {
		if len(out) != rows*V {
			return fmt.Errorf("%w: logits has %d values, want %d", ErrContract, len(out), rows*V)
		}
		for t := range rows {
			for b := range nb {
				copy(out[(b*rows+t)*B:(b*rows+t+1)*B], z[t*V+b*B:t*V+(b+1)*B])
			}
		}
	}
	local, ok := e.ints["block_argmax"]
	if !ok {
		return nil
	}
	top, err := e.output("block_max")
	if err != nil {
		return err
	}
	if len(local) != rows*nb || len(top) != rows*nb {
		return fmt.Errorf("%w: block_argmax/block_max have %d/%d values, want %d", ErrContract, len(local), len(top), rows*nb)
	}
	for t := range rows {
		for b := range nb {
			blk := z[t*V+b*B : t*V+(b+1)*B]
			i, v := cpu.Argmax(blk), float32(math.NaN())
			if i >= 0 {
				v = blk[i]
			} else {
				i = 0
			}
			local[b*rows+t], top[b*rows+t] = i, v
		}
	}
	return nil
}

// perLayerInputs: chunk 0 computes the per-layer inputs from hidden_in and
// ple_rows (and passes them on when it is not the last chunk); later
// chunks read them.
func (e *exec) perLayerInputs() error {
	m := &e.r.m.Arch
	T, L, P := e.T, len(m.Layers), m.PLEDim
	if e.j > 0 {
		pl, err := e.input("per_layer")
		if err != nil {
			return err
		}
		e.perLayer = pl
		return nil
	}
	rows, err := e.input("ple_rows")
	if err != nil {
		return err
	}
	pl := make([]float32, T*L*P)
	if err := e.r.layers.PerLayerInputs(e.x, T, rows, pl); err != nil {
		return fmt.Errorf("refrun: %w", err)
	}
	e.perLayer = pl
	if !e.last {
		out, err := e.output("per_layer")
		if err != nil {
			return err
		}
		copy(out, pl)
	}
	return nil
}

// placeInputs looks up source layer s's cache tensors and its kind's
// placement matrix.
func (e *exec) placeInputs(s int) (placeIO, error) {
	l := e.r.m.Arch.Layers[s]
	kc, err := e.input(name("k_cache_", s))
	if err != nil {
		return placeIO{}, err
	}
	vc, err := e.input(name("v_cache_", s))
	if err != nil {
		return placeIO{}, err
	}
	pl, err := e.input("place_" + l.Kind)
	if err != nil {
		return placeIO{}, err
	}
	return placeIO{kc: kc, vc: vc, pl: pl}, nil
}

// place adds the call's new rows of source layer s to its cache tensor
// through the placement matrix: slot[p] = cache[p] + Σ_t place[p,t]·new[t]
// ([1,kv_heads,slots,head_dim] and [1,kv_heads,T,head_dim]).
func (e *exec) place(s int, kn, vn []float32, in placeIO) {
	l := e.r.m.Arch.Layers[s]
	T, hd, pl := e.T, l.HeadDim, in.pl
	S := len(pl) / T
	pk, pv := append([]float32(nil), in.kc...), append([]float32(nil), in.vc...)
	for p := range S {
		for t := range T {
			w := pl[p*T+t]
			if w == 0 {
				continue
			}
			for h := range l.KVHeads {
				dk, dv := pk[(h*S+p)*hd:(h*S+p+1)*hd], pv[(h*S+p)*hd:(h*S+p+1)*hd]
				sk, sv := kn[(h*T+t)*hd:(h*T+t+1)*hd], vn[(h*T+t)*hd:(h*T+t+1)*hd]
				for d := range hd {
					dk[d] += float32(w * sk[d])
					dv[d] += float32(w * sv[d])
				}
			}
		}
	}
	e.placed[s] = [2][]float32{pk, pv}
}

// rope rotates every head of x ([T, heads*hd], row-major) by the cos/sin
// rows: x*cos + (x@R)*sin, R the layout's signed pair permutation. Each
// product is rounded before the sum (no fused multiply-add).
func rope(x []float32, cos, sin []float32, T, heads, hd int, halves bool) {
	half := hd / 2
	rot := make([]float32, hd)
	for t := range T {
		c, s := cos[t*hd:(t+1)*hd], sin[t*hd:(t+1)*hd]
		for h := range heads {
			v := x[(t*heads+h)*hd : (t*heads+h+1)*hd]
			for i := range half {
				a, b := i, i+half
				if !halves {
					a, b = 2*i, 2*i+1
				}
				rot[a], rot[b] = -v[b], v[a]
			}
			for j := range hd {
				v[j] = float32(v[j]*c[j]) + float32(rot[j]*s[j])
			}
		}
	}
}

// headsFirst writes rows [T, heads*hd] as [heads, T, hd].
func headsFirst(dst, src []float32, T, heads, hd int) {
	for t := range T {
		for h := range heads {
			copy(dst[(h*T+t)*hd:(h*T+t+1)*hd], src[(t*heads+h)*hd:(t*heads+h+1)*hd])
		}
	}
}

// layerInputs looks up, for layers first..end-1, the buffers their
// attention reads and writes (layerIO), so that a call whose buffers are
// not the function's fails before any layer runs.
func (e *exec) layerInputs(first, end int) error {
	m := &e.r.m.Arch
	e.io = make([]layerIO, end-first)
	for i := first; i < end; i++ {
		l, io := m.Layers[i], &e.io[i-first]
		var err error
		if io.cos, err = e.input("rope_cos_" + l.Rope); err != nil {
			return err
		}
		if io.sin, err = e.input("rope_sin_" + l.Rope); err != nil {
			return err
		}
		io.halves = m.Ropes[l.Rope].Layout == "halves"
		if l.Source == i {
			if io.kNew, err = e.output(name("k_new_", i)); err != nil {
				return err
			}
			if io.vNew, err = e.output(name("v_new_", i)); err != nil {
				return err
			}
			if io.place, err = e.placeInputs(i); err != nil {
				return err
			}
		} else if _, ok := e.placed[l.Source]; !ok && (l.Source < first || l.Source > i || m.Layers[l.Source].Source != l.Source) {
			return fmt.Errorf("%w: layer %d reads layer %d's rows, which chunk %d neither computes nor takes", ErrContract, i, l.Source, e.j)
		}
		if io.mask, err = e.input("mask_" + l.Kind); err != nil {
			return err
		}
	}
	return nil
}

// Attend implements cpu.AttentionCore, the layout of the bundle's
// contract: q and k rotated by the cos/sin rows, a computing layer's new
// K/V rows written heads-first to its k_new/v_new outputs and placed into
// its cache tensor, q scaled, and the attention over the placed cache
// through the mask (attend).
func (e *exec) Attend(i int, q, k, v, out []float32) {
	m := &e.r.m.Arch
	l, io := m.Layers[i], &e.io[i-e.first]
	T, hd, nh, kvh := e.T, l.HeadDim, m.Heads, l.KVHeads
	rope(q, io.cos, io.sin, T, nh, hd, io.halves)
	if k != nil {
		rope(k, io.cos, io.sin, T, kvh, hd, io.halves)
		headsFirst(io.kNew, k, T, kvh, hd)
		headsFirst(io.vNew, v, T, kvh, hd)
		e.place(i, io.kNew, io.vNew, io.place)
	}
	pkv := e.placed[l.Source]
	if scale := float32(m.AttnScale); scale != 1 {
		for j := range q {
			q[j] *= scale
		}
	}
	attend(out, q, pkv[0], pkv[1], io.mask, T, nh, kvh, hd)
}

// attend is the contract's attention: for each row t and query head, the
// scores q·k over the slots its mask row leaves finite (plus the mask's
// value there), softmax, and the weighted sum of V — the slots taken in
// position order: the finite entries of a row form a run of slots that
// may wrap around the ring, walked from its start. (Any other order is
// the same function; this one is the CPU backend's, which keeps the two
// comparable bit for bit.)
func attend(out, q, pk, pv, mask []float32, T, nh, kvh, hd int) {
	S := len(mask) / T
	group := nh / kvh
	order := make([]int, 0, S)
	sc := make([]float32, S)
	for t := range T {
		mrow := mask[t*S : (t+1)*S]
		order = slotsInOrder(order[:0], mrow)
		for hq := range nh {
			g := hq / group
			qh := q[(t*nh+hq)*hd : (t*nh+hq+1)*hd]
			s := sc[:len(order)]
			for i, p := range order {
				s[i] = cpu.Dot(qh, pk[(g*S+p)*hd:(g*S+p+1)*hd]) + mrow[p]
			}
			cpu.Softmax(s)
			o := out[(t*nh+hq)*hd : (t*nh+hq+1)*hd]
			clear(o)
			for i, p := range order {
				cpu.Axpy(o, s[i], pv[(g*S+p)*hd:(g*S+p+1)*hd])
			}
		}
	}
}

// slotsInOrder appends the slots of a mask row whose value is finite,
// starting after the last masked (-inf) slot before the first finite run
// and going around the ring once.
func slotsInOrder(order []int, mrow []float32) []int {
	S := len(mrow)
	masked := func(p int) bool { return math.IsInf(float64(mrow[p]), -1) }
	start := 0
	for p := range S {
		if !masked(p) && masked((p-1+S)%S) {
			start = p
			break
		}
	}
	for i := range S {
		p := (start + i) % S
		if !masked(p) {
			order = append(order, p)
		}
	}
	return order
}
