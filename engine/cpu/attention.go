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
