package cpu

import (
	"fmt"

	"anechat/engine/arch/llama"
	"anechat/engine/arch/rope"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// Llama executes the llama architecture (engine/arch/llama: stories260K,
// SmolLM2) on the CPU: decoder layers with plain attention and a SiLU MLP,
// rotating adjacent pairs. It is a model.Backend: concurrent Forward calls
// on distinct caches are safe (each takes its own scratch).
type Llama struct {
	decoder
	opt llama.Config
}

// LoadLlama binds the llama weights of f (engine/arch/llama names them).
// The weights stay in f's mapping: f must stay open while the model is
// used. pool may be nil: the model then makes one (one worker per CPU),
// which its Close ends.
func LoadLlama(f *gguf.File, pool *Pool) (*Llama, error) {
	return loadLlama(f, &binder{src: ggufWeights{f}}, pool)
}

// loadLlama is LoadLlama binding through b (on f's weights).
func loadLlama(f *gguf.File, b *binder, pool *Pool) (_ *Llama, err error) {
	defer mmap.Guard(&err, f.Mapping())()
	o, err := llama.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m := &Llama{opt: o}
	m.ropes = []rope.Spec{o.Rope()}
	err = m.bindGGUF(b, o.Decoder, o.Geometry(), pool, func(b *binder, i int) layer {
		l := bindDecoderLayer(b, o.Decoder, o.Layer(i).Block, siluMulRange)
		l.attn.scale = o.AttentionScale()
		return l
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// OpenLlama opens the GGUF file at path and binds its llama weights. The
// returned model keeps the file mapped until Close.
func OpenLlama(path string, pool *Pool) (*Llama, error) { return openGGUF(path, pool, LoadLlama) }

// Arch returns the model's architecture description.
func (m *Llama) Arch() llama.Config { return m.opt }
