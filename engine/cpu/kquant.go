package cpu

import (
	"encoding/binary"

	"anechat/engine/model/gguf"
)

// The GGML block formats beyond Q4_0/Q4_1/Q8_0 (what Q4_K_M, Q5_K_M, Q6_K
// and the like files hold), as the PyPI gguf package's reference
// dequantisers (gguf/quants.py) and llama.cpp's ggml-quants.c define them.
// Every dequantiser here computes each float32 with the reference's
// operations in the reference's order (products of f16 scales and small
// integers, then one multiply and at most one subtraction or addition,
// each rounded: the float32(...) conversions stop Go from fusing them), so
// the output is the reference's bit for bit (TestDequantReference).
//
//	Q5_0  32 per block, 22 bytes: f16 d, qh (32 high bits), 16 bytes of
//	      nibbles (element i low nibble of byte i, element i+16 high);
//	      q = nibble | bit i of qh << 4, x = d·(q-16)
//	Q5_1  32 per block, 24 bytes: f16 d, f16 m, qh, nibbles; x = d·q + m
//	Q2_K  256 per block, 84 bytes: 16 scale bytes (low nibble scale, high
//	      nibble min, one per 16 elements), 64 bytes of 2-bit q, f16 d,
//	      f16 dmin; x = (d·sc)·q - dmin·m
//	Q3_K  256 per block, 110 bytes: hmask[32], 64 bytes of 2-bit q, 12
//	      bytes of 6-bit scales, f16 d; q = low 2 bits - (high bit ? 0 : 4),
//	      x = (d·(sc-32))·q
//	Q4_K  256 per block, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit
//	      scales and mins (one pair per 32 elements), 128 bytes of
//	      nibbles; x = (d·sc)·q - dmin·m
//	Q5_K  256 per block, 176 bytes: as Q4_K with qh[32] (the fifth bits)
//	      before the nibbles
//	Q6_K  256 per block, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2
//	      bits), 16 int8 scales (one per 16 elements), f16 d;
//	      x = (d·sc)·(q-32)
//
// Where the elements of a K block sit: see k2Index and friends below, which
// the dequantisers, the reference kernels (dotref.go) and the tests share.

// le16 reads a little-endian f16 at b.
func f16At(b []byte) float32 { return F16(binary.LittleEndian.Uint16(b)) }

// q5Block returns the 32 5-bit values of a Q5_0/Q5_1 block from its qh
// (4 bytes) and nibbles (16 bytes).
func q5Values(q *[32]int32, qh, qs []byte) {
	h := binary.LittleEndian.Uint32(qh)
	for i := range 16 {
		q[i] = int32(qs[i]&0xf) | int32(h>>i&1)<<4
		q[i+16] = int32(qs[i]>>4) | int32(h>>(i+16)&1)<<4
	}
}

// kScaleMin unpacks Q4_K's and Q5_K's 12 bytes of 6-bit scales and mins
// (sub-block j of 32 elements: scale sc[j], min m[j]).
func kScaleMin(s []byte) (sc, m [8]int32) {
	for j := range 4 {
		sc[j] = int32(s[j] & 63)
		m[j] = int32(s[j+4] & 63)
		sc[j+4] = int32(s[j+8]&0xf) | int32(s[j]>>6)<<4
		m[j+4] = int32(s[j+8]>>4) | int32(s[j+4]>>6)<<4
	}
	return sc, m
}

// q3Scales unpacks Q3_K's 12 bytes of 6-bit scales into the 16 signed
// scales sc-32 (one per 16 elements).
func q3Scales(s []byte) (sc [16]int32) {
	for i := range 16 {
		lo := s[i%8] >> (4 * (i / 8)) & 0xf
		hi := s[8+i%4] >> (2 * (i / 4)) & 3
		sc[i] = int32(lo|hi<<4) - 32
	}
	return sc
}

// The element values of the K blocks, element e = 0..255 of one block:
// the integer the block's scales multiply (kValues), by format.

// q2Values: element e = 128h + 32s + l takes bits 2s..2s+1 of qs[32h+l].
func q2Values(q *[256]int32, qs []byte) {
	for e := range 256 {
		h, s, l := e/128, e/32%4, e%32
		q[e] = int32(qs[32*h+l] >> (2 * s) & 3)
	}
}

// q3Values: as Q2_K for the low bits; the high bit of element
// e = 128h + 32s + l is bit 4h+s of hmask[l], and q = low - (high ? 0 : 4).
func q3Values(q *[256]int32, hmask, qs []byte) {
	for e := range 256 {
		h, s, l := e/128, e/32%4, e%32
		lo := int32(qs[32*h+l] >> (2 * s) & 3)
		if hmask[l]>>(4*h+s)&1 == 0 {
			lo -= 4
		}
		q[e] = lo
	}
}

// q4Values: element e = 64c + 32s + l is nibble s of qs[32c+l] (low, then
// high); its sub-block is e/32 = 2c+s.
func q4Values(q *[256]int32, qs []byte) {
	for e := range 256 {
		c, s, l := e/64, e/32%2, e%32
		q[e] = int32(qs[32*c+l] >> (4 * s) & 0xf)
	}
}

// q5kValues: q4Values plus the fifth bit of element e = 32j + l, bit j of
// qh[l].
func q5kValues(q *[256]int32, qh, qs []byte) {
	q4Values(q, qs)
	for e := range 256 {
		j, l := e/32, e%32
		q[e] |= int32(qh[l]>>j&1) << 4
	}
}

// q6Values: element e = 128h + 32s + l: its low 4 bits are nibble s/2 of
// ql[64h + 32(s%2) + l], its high 2 bits bits 2s..2s+1 of qh[32h+l]; the
// value is q-32.
func q6Values(q *[256]int32, ql, qh []byte) {
	for e := range 256 {
		h, s, l := e/128, e/32%4, e%32
		lo := int32(ql[64*h+32*(s%2)+l] >> (4 * (s / 2)) & 0xf)
		hi := int32(qh[32*h+l] >> (2 * s) & 3)
		q[e] = lo | hi<<4 - 32
	}
}

// dequantRowMore dequantises the formats of this file (Go loops: these
// rows are read for embedding lookups and by the float fallback); it
// reports false for any other type.
func dequantRowMore(dst []float32, t gguf.Type, src []byte) bool {
	bs, n := t.BlockBytes(), t.BlockSize()
	if n == 0 || (t != gguf.Q5_0 && t != gguf.Q5_1 && t != gguf.Q2_K && t != gguf.Q3_K && t != gguf.Q4_K && t != gguf.Q5_K && t != gguf.Q6_K) {
		return false
	}
	var q32 [32]int32
	var q [256]int32
	for b := range len(dst) / n {
		blk := src[b*bs : (b+1)*bs : (b+1)*bs]
		o := dst[b*n : (b+1)*n : (b+1)*n]
		switch t {
		case gguf.Q5_0:
			d := f16At(blk)
			q5Values(&q32, blk[2:6], blk[6:22])
			for i, v := range q32 {
				o[i] = d * float32(v-16)
			}
		case gguf.Q5_1:
			d, m := f16At(blk), f16At(blk[2:])
			q5Values(&q32, blk[4:8], blk[8:24])
			for i, v := range q32 {
				o[i] = float32(d*float32(v)) + m
			}
		case gguf.Q2_K:
			d, dmin := f16At(blk[80:]), f16At(blk[82:])
			q2Values(&q, blk[16:80])
			for e, v := range q {
				sc := blk[e/16]
				dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
				o[e] = float32(dl*float32(v)) - ml
			}
		case gguf.Q3_K:
			d := f16At(blk[108:])
			sc := q3Scales(blk[96:108])
			q3Values(&q, blk[:32], blk[32:96])
			for e, v := range q {
				dl := d * float32(sc[e/16])
				o[e] = dl * float32(v)
			}
		case gguf.Q4_K, gguf.Q5_K:
			d, dmin := f16At(blk), f16At(blk[2:])
			sc, m := kScaleMin(blk[4:16])
			if t == gguf.Q4_K {
				q4Values(&q, blk[16:144])
			} else {
				q5kValues(&q, blk[16:48], blk[48:176])
			}
			for e, v := range q {
				d1, m1 := d*float32(sc[e/32]), dmin*float32(m[e/32])
				o[e] = float32(d1*float32(v)) - m1
			}
		case gguf.Q6_K:
			d := f16At(blk[208:])
			q6Values(&q, blk[:128], blk[128:192])
			for e, v := range q {
				dl := d * float32(int8(blk[192+e/16]))
				o[e] = dl * float32(v)
			}
		}
	}
	return true
}
