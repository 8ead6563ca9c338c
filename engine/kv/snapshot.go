package kv

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// Snapshot file format, version 1. All integers little endian.
//
//	offset  size  field
//	0       8     magic "anechaKV"
//	8       4     format version (1)
//	12      4     header size H: bytes 0..H-1, the header checksum included
//	16      4     dtype of the rows (1 = float32)
//	20      4     context length
//	24      4     token count n
//	28      4     layer count L
//	32      ...   model fingerprint, tokenizer fingerprint, chat template hash:
//	              each a u16 length and that many bytes
//	        16*L  per layer: KV heads, head dim, window, source layer (u32 each)
//	        32*L  per layer section: first position, rows (u32), offset, size
//	              (u64), crc32c of the section, reserved zero (u32)
//	        4*n   token ids (i32)
//	H-4     4     crc32c (Castagnoli) of bytes 0..H-5
//
// Then one section per owning layer that holds rows, in layer order, each at
// an offset aligned to SectionAlign (so it can be memory-mapped): the layer's
// K rows for positions first..first+rows-1, then its V rows, as float32.
// A full layer stores every committed position, a sliding layer its last
// Window positions (Cache.Live), a KV-shared layer nothing. The bytes between
// sections are zero. The file ends with the last section.
//
// Every byte is covered: the header by its checksum, the sections by theirs,
// the padding by being zero, the length by the layout. A reader rejects any
// difference.

// FormatVersion is the snapshot format this package writes and reads.
const FormatVersion = 1

// SectionAlign is the alignment of every layer section in a snapshot file:
// 16 KiB, the page size of Apple Silicon (a multiple of 4 KiB pages).
const SectionAlign = 16 << 10

// DTypeF32 marks rows stored as little-endian float32.
const DTypeF32 = 1

const (
	magic        = "anechaKV"
	fixedHeader  = 32
	layerEntry   = 16
	sectionEntry = 32
	// Bounds that keep a damaged header from asking for absurd memory.
	maxString  = 4096
	maxLayers  = 4096
	maxStride  = 1 << 20
	maxContext = 1 << 24
	maxHeader  = 1 << 28
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors a snapshot reader returns (wrapped, naming the file and the field).
// Each means: ignore the snapshot and prefill normally.
var (
	// ErrCorrupt means the file is damaged: truncated, a checksum fails, a
	// field is out of range.
	ErrCorrupt = errors.New("kv: snapshot damaged")
	// ErrVersion means the file is of another format version.
	ErrVersion = errors.New("kv: snapshot format version not supported")
	// ErrMismatch means the snapshot is intact but belongs to another model,
	// tokenizer, chat template or KV geometry.
	ErrMismatch = errors.New("kv: snapshot does not match")
)

// Meta is what a snapshot is bound to besides its geometry.
type Meta struct {
	// Model is the model fingerprint (model.Config.Fingerprint).
	Model string
	// Tokenizer is the tokenizer fingerprint.
	Tokenizer string
	// Template is the chat template hash, or "" for raw prompts.
	Template string
}

// Section locates one layer's rows in a snapshot file.
type Section struct {
	// First is the position of the first stored row; Rows how many.
	First, Rows int
	// Offset and Size locate the K rows followed by the V rows.
	Offset, Size int64
	// Sum is the crc32c of the section's bytes.
	Sum uint32
}

// Header is the parsed header of a snapshot file.
type Header struct {
	Meta
	// Geometry is the KV geometry the snapshot was taken with.
	Geometry Geometry
	// Tokens are the ids whose K/V rows the snapshot holds (positions
	// 0..len(Tokens)-1).
	Tokens []int32
	// Sections has one entry per layer (Rows 0 for a KV-shared layer).
	Sections []Section
	// Size is the encoded header size in bytes.
	Size int
}

// FileSize is the length of a snapshot file with this header.
func (h *Header) FileSize() int64 {
	end := int64(h.Size)
	for _, s := range h.Sections {
		if s.Rows > 0 {
			end = s.Offset + s.Size
		}
	}
	return end
}

// Name is the snapshot's file name: a hash of its header, which holds the
// checksum of every section, so equal names mean equal contents.
func (h *Header) Name() string {
	sum := sha256.Sum256(h.encode())
	return hex.EncodeToString(sum[:16]) + ".kv"
}

// layout fills in the sections for n committed positions of geo.
func layout(geo Geometry, n, headerSize int) []Section {
	secs := make([]Section, len(geo.Layers))
	off := int64(headerSize)
	for i, l := range geo.Layers {
		if l.Source != i {
			continue
		}
		first := 0
		if l.Window > 0 {
			first = max(0, n-l.Window)
		}
		s := Section{First: first, Rows: n - first}
		if s.Rows > 0 {
			off = alignUp(off)
			s.Offset = off
			s.Size = int64(s.Rows) * int64(l.Stride()) * 8
			off += s.Size
		}
		secs[i] = s
	}
	return secs
}

func alignUp(off int64) int64 {
	return (off + SectionAlign - 1) / SectionAlign * SectionAlign
}

func headerSize(m Meta, layers, tokens int) int {
	return fixedHeader + 6 + len(m.Model) + len(m.Tokenizer) + len(m.Template) +
		layers*(layerEntry+sectionEntry) + 4*tokens + 4
}

// encode returns the header bytes, checksum included.
func (h *Header) encode() []byte {
	b := make([]byte, 0, h.Size)
	le := binary.LittleEndian
	b = append(b, magic...)
	b = le.AppendUint32(b, FormatVersion)
	b = le.AppendUint32(b, uint32(h.Size))
	b = le.AppendUint32(b, DTypeF32)
	b = le.AppendUint32(b, uint32(h.Geometry.Context))
	b = le.AppendUint32(b, uint32(len(h.Tokens)))
	b = le.AppendUint32(b, uint32(len(h.Geometry.Layers)))
	for _, s := range []string{h.Model, h.Tokenizer, h.Template} {
		b = le.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	for _, l := range h.Geometry.Layers {
		b = le.AppendUint32(b, uint32(l.KVHeads))
		b = le.AppendUint32(b, uint32(l.HeadDim))
		b = le.AppendUint32(b, uint32(l.Window))
		b = le.AppendUint32(b, uint32(l.Source))
	}
	for _, s := range h.Sections {
		b = le.AppendUint32(b, uint32(s.First))
		b = le.AppendUint32(b, uint32(s.Rows))
		b = le.AppendUint64(b, uint64(s.Offset))
		b = le.AppendUint64(b, uint64(s.Size))
		b = le.AppendUint32(b, s.Sum)
		b = le.AppendUint32(b, 0)
	}
	for _, t := range h.Tokens {
		b = le.AppendUint32(b, uint32(t))
	}
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// headerPrefix reads the fixed start of a header: it checks the magic and
// version and returns the header size.
func headerPrefix(b []byte) (int, error) {
	if len(b) < 16 {
		return 0, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(b))
	}
	if string(b[:8]) != magic {
		return 0, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:8])
	}
	le := binary.LittleEndian
	size := le.Uint32(b[12:])
	if size < fixedHeader+10 || size > maxHeader {
		return 0, fmt.Errorf("%w: header size %d out of range", ErrCorrupt, size)
	}
	if v := le.Uint32(b[8:]); v != FormatVersion {
		// Checked before the checksum: a future version may lay its
		// header out differently.
		return 0, fmt.Errorf("%w: version %d, this build reads %d", ErrVersion, v, FormatVersion)
	}
	return int(size), nil
}

// ParseHeader parses and checks a snapshot header: b must hold at least the
// whole header (b may continue with the rest of the file). It checks the
// magic, the version, the header checksum, the geometry and that the section
// table is exactly the layout this format prescribes. It never panics.
func ParseHeader(b []byte) (*Header, error) {
	size, err := headerPrefix(b)
	if err != nil {
		return nil, err
	}
	if len(b) < size {
		return nil, fmt.Errorf("%w: header of %d bytes truncated to %d", ErrCorrupt, size, len(b))
	}
	b = b[:size]
	le := binary.LittleEndian
	if got, want := crc32.Checksum(b[:size-4], castagnoli), le.Uint32(b[size-4:]); got != want {
		return nil, fmt.Errorf("%w: header checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if dt := le.Uint32(b[16:]); dt != DTypeF32 {
		return nil, fmt.Errorf("%w: row dtype %d, this build reads %d (float32)", ErrCorrupt, dt, DTypeF32)
	}
	ctx, n, layers := le.Uint32(b[20:]), le.Uint32(b[24:]), le.Uint32(b[28:])
	if ctx == 0 || ctx > maxContext {
		return nil, fmt.Errorf("%w: context length %d out of range", ErrCorrupt, ctx)
	}
	if n > ctx {
		return nil, fmt.Errorf("%w: %d tokens exceed the context length %d", ErrCorrupt, n, ctx)
	}
	if layers > maxLayers {
		return nil, fmt.Errorf("%w: %d layers", ErrCorrupt, layers)
	}
	h := &Header{Size: size, Geometry: Geometry{Context: int(ctx)}}
	r := b[fixedHeader : size-4]
	var strs [3]string
	for i := range strs {
		if len(r) < 2 {
			return nil, fmt.Errorf("%w: header ends inside the fingerprints", ErrCorrupt)
		}
		l := int(le.Uint16(r))
		if l > maxString || len(r) < 2+l {
			return nil, fmt.Errorf("%w: fingerprint %d of %d bytes does not fit the header", ErrCorrupt, i, l)
		}
		strs[i] = string(r[2 : 2+l])
		r = r[2+l:]
	}
	h.Model, h.Tokenizer, h.Template = strs[0], strs[1], strs[2]
	if want := int64(layers)*(layerEntry+sectionEntry) + 4*int64(n); int64(len(r)) != want {
		return nil, fmt.Errorf("%w: header holds %d bytes for %d layers and %d tokens, want %d", ErrCorrupt, len(r), layers, n, want)
	}
	h.Geometry.Layers = make([]LayerSpec, layers)
	for i := range h.Geometry.Layers {
		l := LayerSpec{KVHeads: int(le.Uint32(r)), HeadDim: int(le.Uint32(r[4:])), Window: int(le.Uint32(r[8:])), Source: int(le.Uint32(r[12:]))}
		if l.KVHeads > maxStride || l.HeadDim > maxStride || l.KVHeads*l.HeadDim > maxStride || l.Window > maxContext {
			return nil, fmt.Errorf("%w: layer %d: %d kv heads of %d, window %d out of range", ErrCorrupt, i, l.KVHeads, l.HeadDim, l.Window)
		}
		h.Geometry.Layers[i] = l
		r = r[layerEntry:]
	}
	if err := h.Geometry.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	want := layout(h.Geometry, int(n), size)
	h.Sections = make([]Section, layers)
	for i := range h.Sections {
		s := Section{
			First:  int(le.Uint32(r)),
			Rows:   int(le.Uint32(r[4:])),
			Offset: int64(le.Uint64(r[8:])),
			Size:   int64(le.Uint64(r[16:])),
			Sum:    le.Uint32(r[24:]),
		}
		if rsv := le.Uint32(r[28:]); rsv != 0 {
			return nil, fmt.Errorf("%w: layer %d: reserved field %d", ErrCorrupt, i, rsv)
		}
		w := want[i]
		if s.First != w.First || s.Rows != w.Rows || s.Offset != w.Offset || s.Size != w.Size {
			return nil, fmt.Errorf("%w: layer %d: section rows %d+%d at %d size %d, the layout says %d+%d at %d size %d",
				ErrCorrupt, i, s.First, s.Rows, s.Offset, s.Size, w.First, w.Rows, w.Offset, w.Size)
		}
		if s.Rows == 0 && s.Sum != 0 {
			return nil, fmt.Errorf("%w: layer %d: checksum %08x of an empty section", ErrCorrupt, i, s.Sum)
		}
		h.Sections[i] = s
		r = r[sectionEntry:]
	}
	h.Tokens = make([]int32, n)
	for i := range h.Tokens {
		t := int32(le.Uint32(r[4*i:]))
		if t < 0 {
			return nil, fmt.Errorf("%w: token %d has negative id %d", ErrCorrupt, i, t)
		}
		h.Tokens[i] = t
	}
	return h, nil
}

// Check reports whether the snapshot may be loaded into a cache of geo by a
// model, tokenizer and template described by want; the error wraps
// ErrMismatch and says which binding differs.
func (h *Header) Check(want Meta, geo Geometry) error {
	switch {
	case h.Model != want.Model:
		return fmt.Errorf("%w: model fingerprint %q, want %q", ErrMismatch, h.Model, want.Model)
	case h.Tokenizer != want.Tokenizer:
		return fmt.Errorf("%w: tokenizer fingerprint %q, want %q", ErrMismatch, h.Tokenizer, want.Tokenizer)
	case h.Template != want.Template:
		return fmt.Errorf("%w: chat template hash %q, want %q", ErrMismatch, h.Template, want.Template)
	case h.Geometry.Context != geo.Context:
		return fmt.Errorf("%w: context length %d, want %d", ErrMismatch, h.Geometry.Context, geo.Context)
	case !slices.Equal(h.Geometry.Layers, geo.Layers):
		return fmt.Errorf("%w: KV geometry %v, want %v", ErrMismatch, h.Geometry.Layers, geo.Layers)
	}
	return nil
}
