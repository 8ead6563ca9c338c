package load

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"anechat/engine/model/mmap"
)

// Sizes of what a fingerprint reads of each weight file: the whole head
// (where GGUF and safetensors keep their headers and metadata), evenly spaced
// samples of the data, and the tail. A 3 GB model costs ~10 MB of reads.
const (
	fingerprintHead    = 4 << 20
	fingerprintSamples = 64
	fingerprintSample  = 64 << 10
	fingerprintTail    = 64 << 10
)

// FingerprintVersion prefixes every fingerprint; bump it when what is hashed
// changes, so that snapshots bound to the old scheme no longer match.
const FingerprintVersion = "fp1"

// Fingerprint returns the identity of a model made of files under root (one
// GGUF file and its directory; the config and safetensors files of a model
// directory; every file of a Core ML bundle): a hash of each file's path
// relative to root, its size, its head, a sample of its data and its tail,
// in path order. Any change to a header, the metadata or the file sizes
// changes it, and so does retraining (every sample changes); a file smaller
// than the head is hashed whole. It is the one identity of a model: KV
// snapshots, the models table and the measured call costs are bound to it
// (model.Config.Fingerprint is this value).
func Fingerprint(root string, files ...string) (string, error) {
	if len(files) == 0 {
		return "", fmt.Errorf("fingerprint of no files")
	}
	type named struct{ rel, path string }
	list := make([]named, len(files))
	for i, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("fingerprint: %s is not under %s", f, root)
		}
		list[i] = named{filepath.ToSlash(rel), f}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].rel < list[j].rel })
	h := sha256.New()
	var total int64
	for _, f := range list {
		n, err := fingerprintFile(h, f.path, f.rel)
		if err != nil {
			return "", err
		}
		total += n
	}
	return fmt.Sprintf("%s:%d:%s", FingerprintVersion, total, hex.EncodeToString(h.Sum(nil)[:16])), nil
}

func fingerprintFile(h io.Writer, path, name string) (int64, error) {
	f, err := mmap.Open(path)
	if err != nil {
		return 0, fmt.Errorf("fingerprint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("fingerprint: %w", err)
	}
	size := st.Size()
	var meta [8]byte
	io.WriteString(h, name)
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(meta[:], uint64(size))
	h.Write(meta[:])
	read := func(off, n int64) error {
		if off < 0 {
			n += off
			off = 0
		}
		n = min(n, size-off)
		if n <= 0 {
			return nil
		}
		if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
			return fmt.Errorf("fingerprint: reading %s at %d: %w", path, off, err)
		}
		return nil
	}
	if size <= fingerprintHead+fingerprintSamples*fingerprintSample+fingerprintTail {
		return size, read(0, size)
	}
	if err := read(0, fingerprintHead); err != nil {
		return 0, err
	}
	// Samples evenly spaced over the data between head and tail.
	span := size - fingerprintHead - fingerprintTail - fingerprintSample
	for i := int64(0); i < fingerprintSamples; i++ {
		if err := read(fingerprintHead+span*i/(fingerprintSamples-1), fingerprintSample); err != nil {
			return 0, err
		}
	}
	return size, read(size-fingerprintTail, fingerprintTail)
}
