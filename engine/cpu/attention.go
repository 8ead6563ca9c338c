package cpu

import "anechat/engine/kv"

// Attend computes one query head's attention output at position pos of layer:
// softmax(scale·q·K[p]) over the positions p the cache says are visible
// (kv.Cache.Visible: the full prefix, or the sliding window), times V[p].
// q is one head (headDim floats), kvHead selects the K/V head (grouped-query
// attention maps several query heads to one), scores is scratch of at least
// pos+1 floats, out receives headDim floats. The rows at positions ≤ pos must
// already be written (committed or pending). The result depends only on q,
// pos and those rows (row independence, exact masks).
func Attend(c *kv.Cache, layer, pos int, q []float32, kvHead, headDim int, scale float32, scores, out []float32) {
	AttendGroup(c, layer, pos, q, 1, kvHead, headDim, scale, scores, out)
}

// AttendGroup is Attend for the group query heads that share kvHead, laid
// out one after another in q (group·headDim floats) and out. Each K and V row
// is read once for the whole group; every head's result is bit-identical to
// Attend on that head alone. scores needs group·(pos+1) floats.
func AttendGroup(c *kv.Cache, layer, pos int, q []float32, group, kvHead, headDim int, scale float32, scores, out []float32) {
	lo, hi := c.Visible(layer, pos)
	off := kvHead * headDim
	n := hi - lo + 1
	for p := lo; p <= hi; p++ {
		k := c.K(layer, p)[off : off+headDim]
		for g := range group {
			scores[g*n+p-lo] = Dot(q[g*headDim:(g+1)*headDim], k) * scale
		}
	}
	for g := range group {
		Softmax(scores[g*n : (g+1)*n])
	}
	out = out[:group*headDim]
	clear(out)
	for p := lo; p <= hi; p++ {
		v := c.V(layer, p)[off : off+headDim]
		for g := range group {
			Axpy(out[g*headDim:(g+1)*headDim], scores[g*n+p-lo], v)
		}
	}
}

// AttendBlock is Attend for nh query heads sharing kvHead, for nt consecutive
// tokens at positions pos0..pos0+nt-1: head j of token t reads its query at
// q[t*qstride+j*headDim:] and writes out at the same offset. The K and V
// rows are walked run by run (kv.Cache.Run) with one kernel call per run
// (dotRowsSIMD, wsumSIMD) instead of one per row, and the block's heads and
// tokens read the same rows one after another, so they come from the core's
// cache after the first. Every (token, head) result is bit-identical to
// Attend on it alone: its scores are the same Dots times scale, its softmax
// the same, and its V rows are added by the same FMAs in the same ascending
// order. scores needs nt·nh·(pos0+nt) floats.
func AttendBlock(c *kv.Cache, layer, pos0, nt int, q []float32, qstride, nh, kvHead, headDim int, scale float32, scores, out []float32) {
	attendBlock(c, layer, pos0, nt, q, qstride, nh, kvHead, headDim, scale, scores, out, make([]int, nt))
}

// attendBlock is AttendBlock with los, nt ints of scratch for
// attendBlockRows.
func attendBlock(c *kv.Cache, layer, pos0, nt int, q []float32, qstride, nh, kvHead, headDim int, scale float32, scores, out []float32, los []int) {
	if !hasRunKernels(headDim) {
		attendBlockRows(c, layer, pos0, nt, q, qstride, nh, kvHead, headDim, scale, scores, out, los)
		return
	}
	off := kvHead * headDim
	width := pos0 + nt // every token's row of scores fits
	for t := range nt {
		lo, hi := c.Visible(layer, pos0+t)
		for j := range nh {
			qo := t*qstride + j*headDim
			qh := q[qo : qo+headDim : qo+headDim]
			sc := scores[(t*nh+j)*width : (t*nh+j)*width+hi-lo+1]
			for p := lo; p <= hi; {
				k, _, m, stride := c.Run(layer, p, hi-p+1)
				if s := sc[p-lo : p-lo+m]; !dotRowsSIMD(qh, k[off:], stride, scale, s) {
					for r := range s {
						s[r] = Dot(qh, k[r*stride+off:r*stride+off+headDim]) * scale
					}
				}
				p += m
			}
			Softmax(sc)
			o := out[qo : qo+headDim : qo+headDim]
			clear(o)
			for p := lo; p <= hi; {
				_, v, m, stride := c.Run(layer, p, hi-p+1)
				if s := sc[p-lo : p-lo+m]; !wsumSIMD(o, v[off:], stride, s) {
					for r, a := range s {
						Axpy(o, a, v[r*stride+off:r*stride+off+headDim])
					}
				}
				p += m
			}
		}
	}
}

// attendBlockRows is AttendBlock where the run kernels do not apply (head
// dims that are not a multiple of 32, CPUs without AVX2): row by row, each
// K and V row used for every (token, head) that sees it while it is loaded.
func attendBlockRows(c *kv.Cache, layer, pos0, nt int, q []float32, qstride, nh, kvHead, headDim int, scale float32, scores, out []float32, los []int) {
	off := kvHead * headDim
	width := pos0 + nt
	los = los[:nt]
	plo, phi := c.Visible(layer, pos0)
	for t := range nt {
		lo, hi := c.Visible(layer, pos0+t)
		los[t] = lo
		plo, phi = min(plo, lo), max(phi, hi)
	}
	for p := plo; p <= phi; p++ {
		k := c.K(layer, p)[off : off+headDim]
		for t := range nt {
			if p < los[t] || p > pos0+t {
				continue
			}
			for j := range nh {
				qo := t*qstride + j*headDim
				scores[(t*nh+j)*width+p-los[t]] = Dot(q[qo:qo+headDim], k) * scale
			}
		}
	}
	for t := range nt {
		for j := range nh {
			Softmax(scores[(t*nh+j)*width : (t*nh+j)*width+pos0+t-los[t]+1])
			qo := t*qstride + j*headDim
			clear(out[qo : qo+headDim])
		}
	}
	for p := plo; p <= phi; p++ {
		v := c.V(layer, p)[off : off+headDim]
		for t := range nt {
			if p < los[t] || p > pos0+t {
				continue
			}
			for j := range nh {
				qo := t*qstride + j*headDim
				Axpy(out[qo:qo+headDim], scores[(t*nh+j)*width+p-los[t]], v)
			}
		}
	}
}

// attnTask runs the attention of one layer for n tokens at positions
// start.. on the pool (attend): heads query heads in groups of group per
// KV head (q and out: token t's head h at t*heads*headDim + h*headDim).
// Work items are blocks of tokens and heads of one KV head (AttendBlock),
// as large as still gives every worker two items, so K and V rows are
// shared as widely as the parallelism allows. The split changes no result.
// A Forward keeps one in its scratch, with the workers' scores, for all its
// layers.
type attnTask struct {
	c                        *kv.Cache
	layer, start, n          int
	q, out                   []float32
	heads, group, headDim    int
	scale                    float32
	tb, hb, tblocks, hblocks int
	scores                   []float32 // per worker: tb·hb·(start+n)
	los                      []int     // per worker: tb (attendBlockRows)
}

// attend runs the layer's attention; a's scratch grows as needed.
func (a *attnTask) attend(p *Pool, c *kv.Cache, layer, start, n int, q []float32, heads, group, headDim int, scale float32, out []float32) {
	kvHeads := heads / group
	tb, hb := n, group
	items := func() int { return kvHeads * (group / hb) * ((n + tb - 1) / tb) }
split:
	for items() < 2*p.Workers() {
		switch {
		case tb > 1:
			tb = (tb + 1) / 2
		case hb%2 == 0:
			hb /= 2
		case hb > 1:
			hb = 1 // an odd group: one head per item
		default:
			break split
		}
	}
	width := start + n
	if need := p.Workers() * tb * hb * width; len(a.scores) < need {
		a.scores = make([]float32, need)
	}
	a.los = grow(a.los, p.Workers()*tb)
	a.c, a.layer, a.start, a.n, a.q, a.out = c, layer, start, n, q, out
	a.heads, a.group, a.headDim, a.scale = heads, group, headDim, scale
	a.tb, a.hb, a.tblocks, a.hblocks = tb, hb, (n+tb-1)/tb, group/hb
	p.Run(kvHeads*a.hblocks*a.tblocks, 1, tb*hb*width*headDim*2, a)
	a.c, a.q, a.out = nil, nil, nil
}

// Run implements Task.
func (a *attnTask) Run(w, lo, hi int) {
	width, qstride := a.start+a.n, a.heads*a.headDim
	sc := a.scores[w*a.tb*a.hb*width : (w+1)*a.tb*a.hb*width]
	los := a.los[w*a.tb : (w+1)*a.tb]
	for i := lo; i < hi; i++ {
		kvh, rest := i/(a.hblocks*a.tblocks), i%(a.hblocks*a.tblocks)
		h0 := kvh*a.group + (rest/a.tblocks)*a.hb
		t0 := (rest % a.tblocks) * a.tb
		nt := min(a.tb, a.n-t0)
		o := t0*qstride + h0*a.headDim
		attendBlock(a.c, a.layer, a.start+t0, nt, a.q[o:], qstride, a.hb, kvh, a.headDim, a.scale, sc, a.out[o:], los)
	}
}
