package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"anechat/engine/arch"
	"anechat/engine/arch/gemma4"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// RandomGemma4 builds a gemma4 model of geometry o with random weights
// stored as typ (any type the CPU kernels compute with), norms near 1. It
// exists for benchmarks and tests at geometries no fixture has (such as
// gemma4.E2B); it is deterministic in seed. pool may be nil: the model then
// makes one, which its Close ends.
func RandomGemma4(o gemma4.Config, typ gguf.Type, seed uint64, pool *Pool) (*Gemma4, error) {
	if !Supported(typ) {
		return nil, fmt.Errorf("cpu: random gemma4: type %s is not supported", typ)
	}
	if o.Vocab <= 0 || o.Hidden <= 0 || o.Heads <= 0 || len(o.Layers) == 0 || o.Context <= 0 {
		return nil, fmt.Errorf("cpu: random gemma4: incomplete options %+v", o)
	}
	src := randomSource{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), typ: typ}
	m, err := bindGemma4(o, "", &binder{src: src}, pool)
	if err != nil {
		return nil, err
	}
	m.cfg.Fingerprint = fmt.Sprintf("random-gemma4:%s:%d", typ, seed)
	return m, nil
}

// randomSource is a weightSource of random values, drawn from r in the
// order the weights are bound: matrices of type typ (randomWeights), norms
// near 1 in F32. It holds no optional tensor (has is false).
type randomSource struct {
	r   *rand.Rand
	typ gguf.Type
}

func (s randomSource) Path() string               { return "random weights" }
func (s randomSource) has(string) bool            { return false }
func (s randomSource) unread() ([]string, string) { return nil, "" }
func (s randomSource) mappings() []*mmap.Mapping  { return nil }
func (s randomSource) shape(t arch.Tensor) []int  { return []int{max(t.Rows, 1), t.Cols} }

func (s randomSource) stored(t arch.Tensor) (storedWeight, error) {
	w := storedWeight{typ: s.typ, shape: s.shape(t), file: s.Path()}
	if !t.Vector() {
		w.data = randomWeights(s.r, s.typ, t.Rows, t.Cols)
		return w, nil
	}
	w.typ, w.data = gguf.F32, make([]byte, 4*t.Cols)
	for i := range t.Cols {
		v := 1 + float32(0.1*float32(s.r.NormFloat64())) // not fused on arm64
		binary.LittleEndian.PutUint32(w.data[4*i:], math.Float32bits(v))
	}
	return w, nil
}

// randomWeights returns rows×cols values of standard deviation ~1/sqrt(cols)
// encoded as typ: uniform floats for F32/F16/BF16, random blocks for the
// quantised types.
func randomWeights(r *rand.Rand, typ gguf.Type, rows, cols int) []byte {
	scale := float32(1 / math.Sqrt(float64(cols)))
	switch typ {
	case gguf.F32, gguf.F16, gguf.BF16:
	default:
		return randomBlocks(r, typ, rows*cols, scale)
	}
	n := rows * cols
	out := make([]byte, typ.RowBytes(n))
	// Uniform in [-a, a) with a = sqrt(3)·scale has standard deviation scale.
	a := float32(math.Sqrt(3)) * scale
	for i := 0; i < n; i += 2 {
		v := r.Uint64()
		for j := 0; j < 2 && i+j < n; j++ {
			x := (float32(uint32(v>>(32*j))>>8)/(1<<24)*2 - 1) * a
			switch typ {
			case gguf.F32:
				u := math.Float32bits(x)
				o := 4 * (i + j)
				out[o], out[o+1], out[o+2], out[o+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			case gguf.F16:
				h := ToF16(x)
				out[2*(i+j)], out[2*(i+j)+1] = byte(h), byte(h>>8)
			case gguf.BF16:
				h := ToBF16(x)
				out[2*(i+j)], out[2*(i+j)+1] = byte(h), byte(h>>8)
			}
		}
	}
	return out
}
