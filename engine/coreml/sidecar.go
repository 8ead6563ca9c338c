package coreml

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"anechat/engine/model/mmap"
)

// Sidecar is an embedding table of a bundle, memory-mapped: INT8 rows with
// one fp16 scale per row, or fp16 rows. Row r reads back as
// fp16(float32(q[r][j]) * float32(scale[r])) (int8) or as the stored fp16
// value: the value the bundle's functions take, already multiplied by the
// architecture's embedding scale (the manifest's value_scale).
type Sidecar struct {
	Rows, Cols int
	int8       bool
	data       *mmap.Mapping // int8: rows*cols bytes; fp16: rows*cols*2
	scales     *mmap.Mapping // int8 only: rows*2 bytes
	// pubMul, when set, makes a row's factor float32(scale)/127*pubMul,
	// as CoreML-LLM's published tables are stored (OpenPublishedSidecar);
	// bundles of the anechat converter store the factor itself.
	pubMul float32
}

// rowScale is the factor of row r of an int8 table.
func (s *Sidecar) rowScale(r int) float32 {
	scale := fromHalf(binary.LittleEndian.Uint16(s.scales.Data()[2*r:]))
	if s.pubMul != 0 {
		scale = scale / 127 * s.pubMul
	}
	return scale
}

// openSidecar maps the table's files and checks their sizes (the checksums
// are checked by verifyFiles).
func openSidecar(dir, name string, s SidecarInfo) (*Sidecar, error) {
	sc := &Sidecar{Rows: s.Rows, Cols: s.Cols, int8: s.Data.DType == "int8"}
	elem := 2
	if sc.int8 {
		elem = 1
	}
	size, ok := tableBytes(s.Rows, s.Cols, elem)
	scales, sok := tableBytes(s.Rows, 2)
	if !ok || !sok {
		return nil, fmt.Errorf("%w: %s: sidecars.%s: %d x %d %s values are not a table a file can hold (the bundle's config is damaged)", ErrBundle, filepath.Join(dir, s.Data.File), name, s.Rows, s.Cols, s.Data.DType)
	}
	var err error
	if sc.data, err = mapSized(filepath.Join(dir, s.Data.File), size,
		fmt.Sprintf("%d x %d %s values (sidecars.%s)", s.Rows, s.Cols, s.Data.DType, name)); err != nil {
		return nil, err
	}
	if sc.int8 {
		if sc.scales, err = mapSized(filepath.Join(dir, s.Scales.File), scales,
			fmt.Sprintf("%d float16 scales (sidecars.%s)", s.Rows, name)); err != nil {
			sc.Close()
			return nil, err
		}
	}
	return sc, nil
}

// OpenPublishedSidecar maps an INT8 table of CoreML-LLM's published
// layout (engine/coreml/published): rows×cols int8 values in dir/data and
// one fp16 scale per row in dir/scales, row r reading back as
// fp16(float32(q)·(float32(scale[r])/127·mul)), the value the project's
// EmbeddingLookup computes. name says which table, for errors.
func OpenPublishedSidecar(dir, name, data, scales string, rows, cols int, mul float32) (*Sidecar, error) {
	s, err := openSidecar(dir, name, SidecarInfo{Rows: rows, Cols: cols,
		Data: FileInfo{File: data, DType: "int8"}, Scales: &FileInfo{File: scales}})
	if err != nil {
		return nil, err
	}
	s.pubMul = mul
	return s, nil
}

// mapSized maps path and checks it holds exactly size bytes (what says
// what they are, for the message).
func mapSized(path string, size int64, what string) (*mmap.Mapping, error) {
	m, err := mmap.Map(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if got := int64(len(m.Data())); got != size {
		m.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, want %d for %s (the file is truncated or of another model)", ErrBundle, path, got, size, what)
	}
	return m, nil
}

// Row writes the values of row r to dst[:Cols] (as float32; each is an
// fp16 value exactly) and returns dst[:Cols].
func (s *Sidecar) Row(dst []float32, r int) []float32 {
	dst = dst[:s.Cols]
	if s.int8 {
		q := s.data.Data()[r*s.Cols : (r+1)*s.Cols]
		scale := s.rowScale(r)
		for j, v := range q {
			dst[j] = roundHalf(float32(int8(v)) * scale)
		}
		return dst
	}
	b := s.data.Data()[2*r*s.Cols : 2*(r+1)*s.Cols]
	for j := range dst {
		dst[j] = fromHalf(binary.LittleEndian.Uint16(b[2*j:]))
	}
	return dst
}

// RowHalf writes row r as fp16 bits to dst[:Cols] (the values Row
// returns, without the round trip through float32).
func (s *Sidecar) RowHalf(dst []uint16, r int) {
	dst = dst[:s.Cols]
	if s.int8 {
		q := s.data.Data()[r*s.Cols : (r+1)*s.Cols]
		scale := s.rowScale(r)
		for j, v := range q {
			dst[j] = toHalf(float32(int8(v)) * scale)
		}
		return
	}
	b := s.data.Data()[2*r*s.Cols : 2*(r+1)*s.Cols]
	for j := range dst {
		dst[j] = binary.LittleEndian.Uint16(b[2*j:])
	}
}

// Check reports an error wrapping mmap.ErrChanged when a file changed on
// disk since it was mapped.
func (s *Sidecar) Check() error {
	for _, m := range []*mmap.Mapping{s.data, s.scales} {
		if m != nil {
			if err := m.Check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Mappings returns the sidecar's mappings (for fault guards).
func (s *Sidecar) Mappings() []*mmap.Mapping {
	var out []*mmap.Mapping
	for _, m := range []*mmap.Mapping{s.data, s.scales} {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// Close unmaps the table.
func (s *Sidecar) Close() error {
	var first error
	for _, m := range []*mmap.Mapping{s.data, s.scales} {
		if m != nil {
			if err := m.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	s.data, s.scales = nil, nil
	return first
}

// checksum is one file to verify against the manifest.
type checksum struct {
	path, want, field string
}

// verifyFiles reads every file and compares its sha256 with the
// manifest's, calling progress with the bytes read so far and the total;
// ctx cancels it between blocks.
func verifyFiles(ctx context.Context, files []checksum, progress func(done, total int64)) error {
	var total, done int64
	for _, f := range files {
		st, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("%w: %s (%s): %w", ErrBundle, f.path, f.field, err)
		}
		total += st.Size()
	}
	for _, f := range files {
		got, err := mmap.SHA256(ctx, f.path, func(n int64) {
			done += n
			if progress != nil {
				progress(done, total)
			}
		})
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				return err // cancelled: not a fault of the bundle
			}
			return fmt.Errorf("%w: %s (%s): %w", ErrBundle, f.path, f.field, err)
		}
		if got != f.want {
			return fmt.Errorf("%w: %s: sha256 %s differs from the manifest's %s (%s): the file is damaged or was replaced; copy or convert the bundle again",
				ErrBundle, f.path, got, f.want, f.field)
		}
	}
	return nil
}
