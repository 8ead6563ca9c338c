package coreml

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
)

// maxManifest bounds manifest.json and model_config.json, which are read
// whole: a manifest of 1,024 layers is about a MiB, a model_config.json a
// few KiB.
const maxManifest = 4 << 20

// maxTableBytes bounds any file size computed from a bundle's shapes: far
// above a real table (Gemma 4 E2B's per-layer embeddings are 2.3 GB), far
// below where an int64 product overflows.
const maxTableBytes = 1 << 46

// tableBytes returns the product of dims (a table's shape and its element
// size in bytes), multiplied with bits.Mul64 so nothing wraps: false when a
// factor is not positive or the product passes maxTableBytes. Every size
// the bundle code derives from a manifest or model_config.json is computed
// here: a wrapped product (16,777,216 layers x 32,768 hidden x 2 bytes =
// 2^64 = 0) once made an empty file pass as a huge table.
func tableBytes(dims ...int) (int64, bool) {
	n := uint64(1)
	for _, d := range dims {
		if d <= 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > maxTableBytes {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// insideBundle checks that the entry name of the bundle in dir (a file or
// package the manifest names in field) is inside it: a local name (no
// absolute path, no "..", no separator) that, with symbolic links followed,
// still lies under dir. A manifest must not make the reader open, map or
// checksum a file elsewhere on the disk. Errors wrap ErrBundle and name the
// manifest, the field and the entry.
func insideBundle(dir, field, name string) (string, error) {
	manifest := filepath.Join(dir, ManifestName)
	if !localName(name) {
		return "", fmt.Errorf("%w: %s: %s %q is not a file of the bundle (names must be plain names inside it)", ErrBundle, manifest, field, name)
	}
	p := filepath.Join(dir, name)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s (%s): %w", ErrBundle, p, field, err)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrBundle, dir, err)
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %s: %s %q is a symbolic link to %s, outside the bundle: copy the file into the bundle", ErrBundle, manifest, field, name, real)
	}
	return p, nil
}

// localName reports whether name is a plain file or directory name inside
// the bundle (no path separators, not "." or "..").
func localName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.IsLocal(name)
}

// statDir reports whether path is a directory (a symbolic link followed).
func statDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
