package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Bytes is the content of a generated file of the fake Hub: size bytes
// that depend only on repo and path (sha256 in counter mode), so the
// fixtures record their checksums without the files being committed.
func Bytes(repo, path string, size int64) []byte {
	out := make([]byte, 0, size)
	var ctr [8]byte
	for i := uint64(0); int64(len(out)) < size; i++ {
		binary.LittleEndian.PutUint64(ctr[:], i)
		h := sha256.New()
		h.Write([]byte(repo))
		h.Write([]byte{0})
		h.Write([]byte(path))
		h.Write([]byte{0})
		h.Write(ctr[:])
		out = append(out, h.Sum(nil)...)
	}
	return out[:size]
}

// SHA256 is b's sha256 in lower-case hex.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// GitBlobID is the id Git gives a file of content b: the sha1 of
// "blob SIZE\x00" followed by b (what the tree's "oid" is for a file kept
// in Git).
func GitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// LFSPointer is the Git LFS pointer file Git keeps for a file of the given
// sha256 and size (git-lfs's spec v1): the tree's "oid" of an LFS file is
// this pointer's blob id, its lfs.pointerSize this pointer's length.
func LFSPointer(sha256hex string, size int64) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha256hex, size)
}
