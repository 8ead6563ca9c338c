package kv

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"unsafe"

	"anechat/internal/atomicfile"
)

// chunk is the unit of file I/O: small enough that checksumming a chunk just
// read finds it in the CPU cache, large enough to stream at disk speed.
const chunk = 1 << 20

// littleEndian reports whether float32 memory is already in file order, so
// rows can be written and read in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatBytes views f as bytes (little-endian hosts only).
func floatBytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// Write stores the committed rows of c, whose positions hold tokens, as a
// snapshot file in dir and returns its path (dir/<content hash>.kv). The
// write is atomic (DESIGN.md invariant 6): a temporary file, fsync, rename,
// fsync of dir; a crash leaves at most a temporary file, never a partial
// snapshot under a snapshot name. Writing a snapshot that already exists
// replaces the file with an identical one.
//
// Temporary files are atomicfile's (".tmp-<pid>-<name>-<random>", pid
// being this process's id), so that start-up cleaning
// (storage.ReconcileMinAge) leaves the files of writes still in progress in
// other processes alone.
func Write(ctx context.Context, dir string, meta Meta, tokens []int32, c *Cache) (string, error) {
	path, _, err := Create(ctx, dir, meta, tokens, c)
	return path, err
}

// Create is Write that also reports whether it created the file: created
// is false when a file of that name (the same snapshot, which an index
// record may point at) was there already. A caller that fails to index a
// snapshot removes the file only if it created it. On an error path is ""
// except when the file was renamed into place and only the directory's
// fsync failed.
func Create(ctx context.Context, dir string, meta Meta, tokens []int32, c *Cache) (path string, created bool, err error) {
	if len(tokens) != c.Len() {
		return "", false, fmt.Errorf("kv: snapshot of %d tokens, the cache holds %d positions", len(tokens), c.Len())
	}
	for _, s := range []string{meta.Model, meta.Tokenizer, meta.Template} {
		if len(s) > maxString {
			return "", false, fmt.Errorf("kv: snapshot fingerprint of %d bytes, at most %d", len(s), maxString)
		}
	}
	for i, t := range tokens {
		if t < 0 {
			return "", false, fmt.Errorf("kv: snapshot token %d has negative id %d", i, t)
		}
	}
	geo := c.Geometry()
	h := &Header{Meta: meta, Geometry: geo, Tokens: tokens}
	h.Size = headerSize(meta, len(geo.Layers), len(tokens))
	h.Sections = layout(geo, len(tokens), h.Size)
	// Checksums first: they are part of the header, which comes first.
	for i := range h.Sections {
		s := &h.Sections[i]
		if s.Rows == 0 {
			continue
		}
		k, v, err := c.Rows(i, s.First, s.First+s.Rows)
		if err != nil {
			return "", false, err
		}
		var sum uint32
		for _, p := range append(k, v...) {
			sum = crc32.Update(sum, castagnoli, rowBytes(p))
		}
		s.Sum = sum
	}
	final := filepath.Join(dir, h.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("kv: snapshot dir: %w", err)
	}
	f, err := atomicfile.Create(final, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("kv: snapshot: %w", err)
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, chunk)
	if _, err := w.Write(h.encode()); err != nil {
		return "", false, fmt.Errorf("kv: write %s: %w", f.Name(), err)
	}
	off := int64(h.Size)
	var zeros [SectionAlign]byte
	for i, s := range h.Sections {
		if s.Rows == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", false, err
		}
		if _, err := w.Write(zeros[:s.Offset-off]); err != nil {
			return "", false, fmt.Errorf("kv: write %s: %w", f.Name(), err)
		}
		k, v, _ := c.Rows(i, s.First, s.First+s.Rows)
		for _, p := range append(k, v...) {
			if _, err := w.Write(rowBytes(p)); err != nil {
				return "", false, fmt.Errorf("kv: write %s: %w", f.Name(), err)
			}
		}
		off = s.Offset + s.Size
	}
	if err := w.Flush(); err != nil {
		return "", false, fmt.Errorf("kv: write %s: %w", f.Name(), err)
	}
	_, err = os.Lstat(final)
	created = errors.Is(err, os.ErrNotExist)
	if err := f.Commit(); err != nil {
		var placed *atomicfile.SyncDirError
		if errors.As(err, &placed) {
			return final, created, fmt.Errorf("kv: snapshot: %w", err)
		}
		return "", false, fmt.Errorf("kv: snapshot: %w", err)
	}
	return final, created, nil
}

// rowBytes returns the file bytes of rows: the memory itself on
// little-endian hosts, an encoded copy otherwise.
func rowBytes(f []float32) []byte {
	if littleEndian {
		return floatBytes(f)
	}
	b := make([]byte, 4*len(f))
	for i, x := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ReadHeader reads and checks the header of the snapshot file at path, and
// that the file has the length the header implies.
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kv: snapshot %s: %w", path, err)
	}
	defer f.Close()
	h, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func readHeader(f *os.File) (*Header, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var pre [16]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %w", ErrCorrupt, err)
	}
	size, err := headerPrefix(pre[:])
	if err != nil {
		return nil, err
	}
	if int64(size) > st.Size() {
		return nil, fmt.Errorf("%w: header of %d bytes, file of %d", ErrCorrupt, size, st.Size())
	}
	b := make([]byte, size)
	copy(b, pre[:])
	if _, err := io.ReadFull(f, b[16:]); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %w", ErrCorrupt, err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if want := h.FileSize(); st.Size() != want {
		return nil, fmt.Errorf("%w: file of %d bytes, the header describes %d", ErrCorrupt, st.Size(), want)
	}
	return h, nil
}

// Load restores the snapshot at path into c, after checking that it is intact
// and bound to want and to c's geometry. It reads the rows straight into the
// cache's memory and verifies every checksum; afterwards c holds the
// snapshot's positions committed, exactly as the cache it was written from
// (Cache.Live rows; a query at any later position sees the same rows).
//
// On any error c is left empty (Reset) and the error wraps ErrCorrupt,
// ErrVersion or ErrMismatch, or is a file or context error: the caller logs it
// and prefills normally (DESIGN.md invariant 4).
func Load(ctx context.Context, path string, want Meta, c *Cache) (*Header, error) {
	h, err := load(ctx, path, want, c)
	if err != nil {
		c.Reset()
		return nil, fmt.Errorf("kv: snapshot %s: %w", path, err)
	}
	return h, nil
}

func load(ctx context.Context, path string, want Meta, c *Cache) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := readHeader(f)
	if err != nil {
		return nil, err
	}
	if err := h.Check(want, c.Geometry()); err != nil {
		return nil, err
	}
	if err := c.Restore(len(h.Tokens)); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	off := int64(h.Size)
	pad := make([]byte, SectionAlign)
	var scratch []byte
	for i, s := range h.Sections {
		if s.Rows == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gap := pad[:s.Offset-off]
		if _, err := io.ReadFull(r, gap); err != nil {
			return nil, fmt.Errorf("%w: layer %d: %w", ErrCorrupt, i, err)
		}
		for _, x := range gap {
			if x != 0 {
				return nil, fmt.Errorf("%w: layer %d: non-zero padding before the section", ErrCorrupt, i)
			}
		}
		k, v, err := c.Rows(i, s.First, s.First+s.Rows)
		if err != nil {
			return nil, err
		}
		var sum uint32
		for _, p := range append(k, v...) {
			for len(p) > 0 {
				part := p[:min(len(p), chunk/4)]
				p = p[len(part):]
				var dst []byte
				if littleEndian {
					dst = floatBytes(part)
				} else {
					scratch = append(scratch[:0], make([]byte, 4*len(part))...)
					dst = scratch
				}
				if _, err := io.ReadFull(r, dst); err != nil {
					return nil, fmt.Errorf("%w: layer %d: %w", ErrCorrupt, i, err)
				}
				sum = crc32.Update(sum, castagnoli, dst)
				if !littleEndian {
					for j := range part {
						part[j] = math.Float32frombits(binary.LittleEndian.Uint32(dst[4*j:]))
					}
				}
			}
		}
		if sum != s.Sum {
			return nil, fmt.Errorf("%w: layer %d: section checksum %08x, stored %08x", ErrCorrupt, i, sum, s.Sum)
		}
		off = s.Offset + s.Size
	}
	// The header fixed the length; a file that grew since is damaged.
	if n, _ := r.Read(pad[:1]); n != 0 {
		return nil, fmt.Errorf("%w: bytes after the last section", ErrCorrupt)
	}
	return h, nil
}
