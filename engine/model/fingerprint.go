package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
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

// FingerprintFiles returns the identity of the weights in files (one GGUF
// file, or the config and safetensors files of a model directory): a hash of
// each file's base name, size, head, a sample of its data and its tail,
// in name order. Any change to a header, the metadata or the file sizes
// changes it, and so does retraining (every sample changes); a file smaller
// than the head is hashed whole. Snapshots and caches are bound to it
// (Config.Fingerprint).
func FingerprintFiles(files ...string) (string, error) {
	if len(files) == 0 {
		return "", fmt.Errorf("model: fingerprint of no files")
	}
	files = append([]string(nil), files...)
	sort.Slice(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	h := sha256.New()
	var total int64
	for _, path := range files {
		n, err := fingerprintFile(h, path)
		if err != nil {
			return "", err
		}
		total += n
	}
	return fmt.Sprintf("%s:%d:%s", FingerprintVersion, total, hex.EncodeToString(h.Sum(nil)[:16])), nil
}

// FingerprintDir is FingerprintFiles over the regular files of dir whose
// names end in one of exts (e.g. ".json", ".safetensors").
func FingerprintDir(dir string, exts ...string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("model: fingerprint of %s: %w", dir, err)
	}
	var files []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		for _, x := range exts {
			if filepath.Ext(e.Name()) == x {
				files = append(files, filepath.Join(dir, e.Name()))
				break
			}
		}
	}
	if len(files) == 0 {
		return "", fmt.Errorf("model: fingerprint of %s: no %v files", dir, exts)
	}
	return FingerprintFiles(files...)
}

func fingerprintFile(h io.Writer, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("model: fingerprint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("model: fingerprint: %w", err)
	}
	size := st.Size()
	var meta [8]byte
	io.WriteString(h, filepath.Base(path))
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
			return fmt.Errorf("model: fingerprint: reading %s at %d: %w", path, off, err)
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
