package gguf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Fingerprint identifies the weights cheaply: a SHA-256 over the file size,
// the whole header (metadata and tensor infos) and 64 samples of 4 KiB spread
// evenly over the tensor data. Two files with the same fingerprint have the
// same metadata, layout and, with overwhelming likelihood, the same weights;
// it costs a few hundred KiB of reads whatever the model size.
func (f *File) Fingerprint() string {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(f.data)))
	h.Write([]byte("gguf-fingerprint-v1"))
	h.Write(n[:])
	h.Write(f.data[:f.dataStart])
	body := f.data[f.dataStart:]
	const samples, size = 64, 4096
	if len(body) <= samples*size {
		h.Write(body)
	} else {
		step := (len(body) - size) / (samples - 1)
		for i := range samples {
			o := i * step
			h.Write(body[o : o+size])
		}
	}
	return "gguf:" + hex.EncodeToString(h.Sum(nil))[:32]
}
