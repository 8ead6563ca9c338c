package kv

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// BlockSize is the number of tokens in one block of the snapshot index: a
// stored prefix is found by matching whole blocks.
const BlockSize = 64

// BlockHashes returns one hash per whole BlockSize-token block of ids. Hash i
// covers meta and ids[:BlockSize*(i+1)] (each block's hash chains the one
// before), so two prompts share hash i exactly when, with overwhelming
// likelihood, they share their first BlockSize*(i+1) tokens under the same
// model, tokenizer and template. The snapshot index stores these for each
// snapshot and looks up the longest shared run.
func BlockHashes(meta Meta, ids []int32) []string {
	h := sha256.New()
	for _, s := range []string{meta.Model, meta.Tokenizer, meta.Template} {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	prev := h.Sum(nil)
	out := make([]string, 0, len(ids)/BlockSize)
	buf := make([]byte, 0, len(prev)+4*BlockSize)
	for i := 0; i+BlockSize <= len(ids); i += BlockSize {
		buf = append(buf[:0], prev...)
		for _, t := range ids[i : i+BlockSize] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		sum := sha256.Sum256(buf)
		prev = sum[:]
		out = append(out, hex.EncodeToString(sum[:16]))
	}
	return out
}
