// Package kv is the host-side KV cache: per-layer K/V rows, sliding windows,
// pending rows that a Forward call writes and only the Session commits, and
// snapshots of the committed rows on disk.
//
// One Cache serves every backend: the CPU backend reads and writes rows in
// place; the Core ML backend copies them into and out of its fixed-shape
// buffers. Rows are float32 on the host.
package kv

import (
	"errors"
	"fmt"
)

// LayerSpec describes the KV storage of one layer.
type LayerSpec struct {
	// KVHeads is the number of key/value heads.
	KVHeads int
	// HeadDim is the width of one head.
	HeadDim int
	// Window is 0 for a full-attention layer; otherwise the sliding window W:
	// a query at position p sees positions p-W+1 .. p.
	Window int
	// Source is the layer whose K/V rows this layer reads. It equals the
	// layer's own index when the layer computes its own K/V; a KV-shared
	// layer (Gemma 4) names an earlier layer of the same kind and stores
	// nothing.
	Source int
}

// Stride is the number of floats in one K (or V) row of the layer.
func (l LayerSpec) Stride() int { return l.KVHeads * l.HeadDim }

// Geometry is the shape of a model's KV cache.
type Geometry struct {
	// Layers has one entry per transformer layer.
	Layers []LayerSpec
	// Context is the longest sequence (positions 0..Context-1).
	Context int
}

// Validate checks that the geometry is self-consistent.
func (g Geometry) Validate() error {
	if g.Context <= 0 {
		return fmt.Errorf("kv: context length %d must be positive", g.Context)
	}
	for i, l := range g.Layers {
		if l.KVHeads <= 0 || l.HeadDim <= 0 {
			return fmt.Errorf("kv: layer %d: kv heads %d and head dim %d must be positive", i, l.KVHeads, l.HeadDim)
		}
		if l.Window < 0 {
			return fmt.Errorf("kv: layer %d: negative window %d", i, l.Window)
		}
		if l.Source < 0 || l.Source > i {
			return fmt.Errorf("kv: layer %d: source layer %d must be in 0..%d", i, l.Source, i)
		}
		if s := g.Layers[l.Source]; l.Source != i && (s.Source != l.Source || s.Window != l.Window || s.Stride() != l.Stride()) {
			return fmt.Errorf("kv: layer %d: shares KV with layer %d, which is not an owning layer of the same kind", i, l.Source)
		}
	}
	return nil
}

// ErrPosition is returned when a call does not continue the committed rows.
var ErrPosition = errors.New("kv: position does not continue the cache")

// Cache holds the committed and pending K/V rows of one sequence.
//
// Rows at positions Len() .. Len()+Pending()-1 are pending: written by the last
// Forward call, visible to that call's later queries, and either committed
// (Commit) or dropped (Rollback). Dropping is free: nothing was overwritten that
// a future query could see.
type Cache struct {
	geo      Geometry
	maxBatch int
	bufs     []*buffer // per layer; nil for KV-shared layers
	n        int       // committed positions
	pending  int
	top      int // one past the highest position ever written
	epoch    uint64
}

// buffer stores one owning layer's rows. A full layer keeps every position
// (slot = position) and grows on demand up to the context length. A sliding
// layer keeps a ring of Window+maxBatch slots (slot = position mod ring): a
// call of up to maxBatch tokens then never overwrites a row that one of its own
// queries, or a later query after a rollback, still needs.
type buffer struct {
	stride int
	ring   int // 0 for full layers
	// floor is the lowest position whose row the buffer holds. It is 0
	// except after Restore, which fills only the live rows of a sliding
	// layer (its last Window positions).
	floor int
	k, v  []float32
}

// New returns an empty cache for geo that accepts calls of up to maxBatch
// tokens.
func New(geo Geometry, maxBatch int) (*Cache, error) {
	if err := geo.Validate(); err != nil {
		return nil, err
	}
	if maxBatch <= 0 {
		return nil, fmt.Errorf("kv: max batch %d must be positive", maxBatch)
	}
	c := &Cache{geo: geo, maxBatch: maxBatch, bufs: make([]*buffer, len(geo.Layers))}
	for i, l := range geo.Layers {
		if l.Source != i {
			continue
		}
		b := &buffer{stride: l.Stride()}
		if l.Window > 0 && l.Window+maxBatch < geo.Context {
			b.ring = l.Window + maxBatch
			b.k = make([]float32, b.ring*b.stride)
			b.v = make([]float32, b.ring*b.stride)
		}
		c.bufs[i] = b
	}
	return c, nil
}

// Geometry returns the cache's geometry.
func (c *Cache) Geometry() Geometry { return c.geo }

// MaxBatch is the widest call the cache accepts.
func (c *Cache) MaxBatch() int { return c.maxBatch }

// Len is the number of committed positions.
func (c *Cache) Len() int { return c.n }

// Pending is the number of rows written by the last Forward and not yet
// committed or dropped.
func (c *Cache) Pending() int { return c.pending }

// Reserve makes room for n pending rows at positions start..start+n-1,
// dropping any earlier pending rows. start must equal Len().
func (c *Cache) Reserve(start, n int) error {
	if start != c.n {
		return fmt.Errorf("%w: call starts at %d, cache holds %d committed positions", ErrPosition, start, c.n)
	}
	if n <= 0 || n > c.maxBatch {
		return fmt.Errorf("kv: call of %d tokens, cache accepts 1..%d", n, c.maxBatch)
	}
	if start+n > c.geo.Context {
		return fmt.Errorf("kv: positions %d..%d exceed the context length %d", start, start+n-1, c.geo.Context)
	}
	for _, b := range c.bufs {
		if b != nil && b.ring == 0 {
			b.grow((start+n)*b.stride, c.geo.Context*b.stride)
		}
	}
	c.pending = n
	c.top = max(c.top, start+n)
	return nil
}

func (b *buffer) grow(need, limit int) {
	if len(b.k) >= need {
		return
	}
	size := max(len(b.k)*2, need, 64*b.stride)
	size = min(size, limit)
	k := make([]float32, size)
	v := make([]float32, size)
	copy(k, b.k)
	copy(v, b.v)
	b.k, b.v = k, v
}

// Commit keeps the first n pending rows and drops the rest.
func (c *Cache) Commit(n int) error {
	if n < 0 || n > c.pending {
		return fmt.Errorf("kv: commit of %d rows, %d pending", n, c.pending)
	}
	c.n += n
	c.pending = 0
	return nil
}

// Rollback drops every pending row.
func (c *Cache) Rollback() { c.pending = 0 }

// Epoch changes whenever committed rows may have been replaced by anything
// other than a Commit after them (Reset, Truncate, Restore). A backend that
// keeps its own copy of the committed rows (the Core ML backend's fp16
// cache tensors) trusts the rows it copied from this cache while the epoch
// is the same, and copies again otherwise.
func (c *Cache) Epoch() uint64 { return c.epoch }

// Reset empties the cache, keeping its memory.
func (c *Cache) Reset() {
	c.epoch++
	c.n, c.pending, c.top = 0, 0, 0
	for _, b := range c.bufs {
		if b != nil {
			b.floor = 0
		}
	}
}

// Truncate drops committed positions from n on, so that the next call starts at
// n. It fails when a sliding layer's ring no longer holds the rows a query at n
// would need (they were overwritten by later positions); the caller then resets
// and prefills again.
func (c *Cache) Truncate(n int) error {
	if err := c.CanTruncate(n); err != nil {
		return err
	}
	c.n, c.pending = n, 0
	c.epoch++
	return nil
}

// CanTruncate reports whether Truncate(n) would succeed (nil) or why not,
// changing nothing: a caller choosing among caches asks before it cuts one.
func (c *Cache) CanTruncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kv: truncate to %d, cache holds %d", n, c.n)
	}
	for i, b := range c.bufs {
		w := c.geo.Layers[i].Window
		if b == nil || w == 0 {
			continue
		}
		// The ring holds positions top-ring .. top-1 intact (a restored
		// buffer only floor .. top-1); a query at n needs max(0, n-W+1) ..
		// n-1.
		need := max(0, n-w+1)
		if need < n && (need < b.floor || b.ring > 0 && need < c.top-b.ring) {
			return fmt.Errorf("kv: layer %d: cannot truncate to %d, the rows of its window were overwritten", i, n)
		}
	}
	return nil
}

// Bytes is the memory the cache's rows take: every owning layer's K and V
// buffers as allocated (a full layer's grow with the positions written and
// are kept by Reset; a sliding layer's ring is allocated whole by New).
func (c *Cache) Bytes() int64 {
	var n int64
	for _, b := range c.bufs {
		if b != nil {
			n += int64(len(b.k)+len(b.v)) * 4
		}
	}
	return n
}

// Visible returns the first and last positions a query at pos sees in layer:
// [max(0, pos-W+1), pos] for a sliding layer, [0, pos] for a full one.
func (c *Cache) Visible(layer, pos int) (lo, hi int) {
	if w := c.geo.Layers[layer].Window; w > 0 {
		return max(0, pos-w+1), pos
	}
	return 0, pos
}

// K returns the key row of layer at pos (the row of its Source layer for a
// KV-shared layer). The slice aliases the cache: a backend writes pending rows
// through it. pos must be committed or pending and, on a sliding layer, inside
// the ring.
func (c *Cache) K(layer, pos int) []float32 {
	b := c.bufs[c.geo.Layers[layer].Source]
	o := b.slot(pos) * b.stride
	return b.k[o : o+b.stride : o+b.stride]
}

// V returns the value row of layer at pos; see K.
func (c *Cache) V(layer, pos int) []float32 {
	b := c.bufs[c.geo.Layers[layer].Source]
	o := b.slot(pos) * b.stride
	return b.v[o : o+b.stride : o+b.stride]
}

// Run returns the key and value rows of layer for positions pos..pos+m-1
// as flat slices of m rows, stride floats apart (the row length of K and
// V), where m <= n is the longest run from pos stored contiguously: a
// sliding layer's ring wraps around, so a run ends at the ring's last slot.
// Attention kernels walk positions run by run instead of row by row. The
// positions must be committed or pending (see K).
func (c *Cache) Run(layer, pos, n int) (k, v []float32, m, stride int) {
	b := c.bufs[c.geo.Layers[layer].Source]
	s := b.slot(pos)
	m = n
	if b.ring > 0 {
		m = min(n, b.ring-s)
	}
	lo, hi := s*b.stride, (s+m)*b.stride
	return b.k[lo:hi:hi], b.v[lo:hi:hi], m, b.stride
}

func (b *buffer) slot(pos int) int {
	if b.ring > 0 {
		return pos % b.ring
	}
	return pos
}

// Owns reports whether layer stores its own rows (it is not KV-shared).
func (c *Cache) Owns(layer int) bool { return c.bufs[layer] != nil }

// Live returns the committed positions lo..hi-1 whose rows layer holds and a
// later query can still read: every committed position of a full layer, the
// last Window of a sliding one, none (lo == hi) of a KV-shared layer. A
// snapshot stores exactly these rows.
func (c *Cache) Live(layer int) (lo, hi int) {
	b := c.bufs[layer]
	if b == nil {
		return c.n, c.n
	}
	lo = b.floor
	if w := c.geo.Layers[layer].Window; w > 0 {
		lo = max(lo, c.n-w)
	}
	return lo, c.n
}

// Rows returns the K and V rows of the owning layer at positions lo..hi-1 in
// position order, as one contiguous piece, or two when they wrap around a
// sliding layer's ring. The slices alias the cache (a snapshot writer reads
// them, a reader fills them after Restore). lo..hi-1 must be committed and,
// on a sliding layer, inside the ring; it fails otherwise.
func (c *Cache) Rows(layer, lo, hi int) (k, v [][]float32, err error) {
	if layer < 0 || layer >= len(c.bufs) || c.bufs[layer] == nil {
		return nil, nil, fmt.Errorf("kv: layer %d does not own K/V rows", layer)
	}
	b := c.bufs[layer]
	if lo < 0 || hi < lo || hi > c.n {
		return nil, nil, fmt.Errorf("kv: layer %d: rows %d..%d outside the %d committed positions", layer, lo, hi-1, c.n)
	}
	if lo < hi && (lo < b.floor || b.ring > 0 && lo < c.top-b.ring) {
		return nil, nil, fmt.Errorf("kv: layer %d: row %d is no longer held (its slot was overwritten)", layer, lo)
	}
	if lo == hi {
		return nil, nil, nil
	}
	s, e := b.slot(lo), b.slot(hi-1)+1
	if e > s {
		return [][]float32{b.k[s*b.stride : e*b.stride]}, [][]float32{b.v[s*b.stride : e*b.stride]}, nil
	}
	// Wrapped: slots s..ring-1, then 0..e-1.
	return [][]float32{b.k[s*b.stride : b.ring*b.stride], b.k[:e*b.stride]},
		[][]float32{b.v[s*b.stride : b.ring*b.stride], b.v[:e*b.stride]}, nil
}

// Restore empties the cache and makes it hold n committed positions whose
// rows are not yet written: the caller (a snapshot reader) fills the Live rows
// of every owning layer through Rows. A restored sliding layer holds only its
// last Window positions, so Truncate below them fails as it would for rows
// the ring overwrote.
func (c *Cache) Restore(n int) error {
	if n < 0 || n > c.geo.Context {
		return fmt.Errorf("kv: restore of %d positions, context length is %d", n, c.geo.Context)
	}
	c.Reset()
	for i, b := range c.bufs {
		if b == nil {
			continue
		}
		if b.ring == 0 {
			b.grow(n*b.stride, c.geo.Context*b.stride)
		}
		if w := c.geo.Layers[i].Window; w > 0 {
			b.floor = max(0, n-w)
		}
	}
	c.n, c.top = n, n
	return nil
}
