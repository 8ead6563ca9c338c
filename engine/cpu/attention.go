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
	lo, hi := c.Visible(layer, pos)
	off := kvHead * headDim
	s := scores[:hi-lo+1]
	for p := lo; p <= hi; p++ {
		s[p-lo] = Dot(q[:headDim], c.K(layer, p)[off:off+headDim]) * scale
	}
	Softmax(s)
	out = out[:headDim]
	clear(out)
	for p := lo; p <= hi; p++ {
		Axpy(out, s[p-lo], c.V(layer, p)[off:off+headDim])
	}
}
