package published

import (
	"encoding/binary"
	"fmt"
	"math"

	"anechat/engine/coreml"
	"anechat/engine/model/mmap"
)

// npyTable is a memory-mapped 2-D .npy table of fp16 or fp32 rows (a
// published bundle's RoPE cos/sin tables: one row per position).
type npyTable struct {
	path        string
	m           *mmap.Mapping
	off         int // where the data starts
	rows, width int
	f32         bool
}

// openNPYTable maps a C-order 2-D '<f2' or '<f4' .npy file whose rows are
// width wide. Errors wrap coreml.ErrBundle and name the file.
func openNPYTable(path string, width int) (*npyTable, error) {
	m, err := mmap.Map(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", coreml.ErrBundle, err)
	}
	t := &npyTable{path: path, m: m}
	if err := t.parse(width); err != nil {
		m.Close()
		return nil, err
	}
	return t, nil
}

func (t *npyTable) parse(width int) error {
	h, off, err := coreml.ParseNPY(t.path, t.m.Data())
	if err != nil {
		return err
	}
	if h.Shape[1] != width {
		return fmt.Errorf("%w: %s has shape %v; the chunks' RoPE inputs want (positions, %d)", coreml.ErrBundle, t.path, h.Shape, width)
	}
	t.off, t.rows, t.width, t.f32 = off, h.Shape[0], width, h.DType == "<f4"
	return nil
}

// row writes row p as fp16 bits to dst[:width]; a position past the table
// (only ever a padded row of a verify call) reads as zeros.
func (t *npyTable) row(dst []uint16, p int) {
	dst = dst[:t.width]
	if p < 0 || p >= t.rows {
		clear(dst)
		return
	}
	b := t.m.Data()[t.off:]
	if t.f32 {
		b = b[4*p*t.width:]
		for i := range dst {
			dst[i] = coreml.ToHalf(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return
	}
	b = b[2*p*t.width:]
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
}

func (t *npyTable) close() error {
	if t == nil || t.m == nil {
		return nil
	}
	m := t.m
	t.m = nil
	return m.Close()
}
