package tokenizer

import "hash/maphash"

// pieceIndex maps piece text to id: an open-addressing table of (hash, id)
// slots that verifies hits against the pieces slice. Compared with a
// map[string]int32 it keeps no second copy of the keys and builds in a
// fraction of the time, which matters for the 262k-piece Gemma vocabulary
// and the 1.5M lookups its merges need at load.
type pieceIndex struct {
	seed   maphash.Seed
	slots  []pieceSlot
	mask   uint64
	pieces *[]string
	n      int
}

type pieceSlot struct {
	hash uint64 // 0 = empty
	id   int32
	len  int32 // len(piece), checked by quickBytes
}

func newPieceIndex(pieces *[]string, capacity int) *pieceIndex {
	size := 1
	for size < capacity*2 {
		size <<= 1
	}
	return &pieceIndex{seed: maphash.MakeSeed(), slots: make([]pieceSlot, size), mask: uint64(size - 1), pieces: pieces}
}

func nonzero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// set maps p to id, replacing an earlier id for the same text.
func (x *pieceIndex) set(p string, id int32) {
	if x.n*2 >= len(x.slots) {
		x.grow()
	}
	h := nonzero(maphash.String(x.seed, p))
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.hash == 0 {
			*s = pieceSlot{hash: h, id: id, len: int32(len(p))}
			x.n++
			return
		}
		if s.hash == h && (*x.pieces)[s.id] == p {
			s.id, s.len = id, int32(len(p))
			return
		}
	}
}

// setIfAbsent maps p to id unless p is already present.
func (x *pieceIndex) setIfAbsent(p string, id int32) {
	if _, ok := x.get(p); !ok {
		x.set(p, id)
	}
}

func (x *pieceIndex) grow() {
	old := x.slots
	x.slots = make([]pieceSlot, len(old)*2)
	x.mask = uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		for i := s.hash & x.mask; ; i = (i + 1) & x.mask {
			if x.slots[i].hash == 0 {
				x.slots[i] = s
				break
			}
		}
	}
}

func (x *pieceIndex) get(p string) (int32, bool) {
	h := nonzero(maphash.String(x.seed, p))
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s.hash == 0 {
			return -1, false
		}
		if s.hash == h && (*x.pieces)[s.id] == p {
			return s.id, true
		}
	}
}

// quickBytes looks p up without reading the piece text back: a hit needs
// the same 64-bit seeded hash and length. A false hit would need a 64-bit
// collision under a per-process random seed (about 1e-8 for all of Gemma's
// merges), so parsing merges trusts it; it saves a cache miss per lookup,
// which is most of the load time.
func (x *pieceIndex) quickBytes(p []byte) (int32, bool) {
	h := nonzero(maphash.Bytes(x.seed, p))
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s.hash == 0 {
			return -1, false
		}
		if s.hash == h && int(s.len) == len(p) {
			return s.id, true
		}
	}
}
