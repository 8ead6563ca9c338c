package cpu

import (
	"fmt"
	"os"

	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// Layers are a checkpoint's decoder layers and the weights around them,
// bound by the CPU backend's loaders, for an executor that drives the layers
// itself with its own attention core: the Core ML backend's reference
// executor (engine/coreml/refrun) executes a bundle's functions with them,
// so a bundle's layers run the same block functions as this backend and
// only the bundle's layout (RoPE rows, masks, the placement of K/V rows
// in its cache tensors) is the executor's own.
type Layers struct {
	m backend
}

// An AttentionCore is the middle of every attention block for an executor
// that drives Layers: Attend is called once per layer, layer its index,
// with the call's query rows q ([n, heads·headDim]) and, unless the layer
// reads the K/V rows of an earlier one (KV sharing; k and v are nil
// then), its key and value rows k and v ([n, kvHeads·headDim]): projected,
// biased and head-normed, not rotated. It rotates q and k, keeps k and v
// where the layers that read them find them, and writes to out ([n,
// heads·headDim]) each query head's attention over the rows visible to it.
// It may scale or rotate q and k in place.
type AttentionCore interface {
	Attend(layer int, q, k, v, out []float32)
}

// LayerShape is one layer's widths, for an executor to check its own
// description of the model against.
type LayerShape struct {
	Heads, KVHeads, HeadDim, FFN int
}

// OpenLayers opens the checkpoint at path, a llama GGUF file or a gemma4
// Hugging Face directory, and binds its weights as the CPU backend does
// (every tensor checked for presence and shape), except that each weight
// the layers, the final norm and the output projection compute with is a
// float32 copy of its values, passed through round first (which may change
// them in place, and whose error fails the open); the embedding tables,
// only indexed, stay as stored. pool may be nil: Layers then make one
// (one worker per CPU), which Close ends.
func OpenLayers(path string, round func(name string, w []float32) error, pool *Pool) (_ *Layers, err error) {
	if round == nil {
		round = func(string, []float32) error { return nil }
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	var m backend
	if st.IsDir() {
		m, err = loaded(loadGemma4(path, pool, round))
	} else {
		m, err = loaded(openGGUF(path, pool, func(f *gguf.File, pool *Pool) (*Llama, error) {
			return loadLlama(f, &binder{src: ggufWeights{f}, round: round}, pool)
		}))
	}
	if err != nil {
		return nil, err
	}
	return &Layers{m: m}, nil
}

// Config returns the model's configuration (its vocabulary, widths and KV
// geometry: each layer's K/V heads, head width and source).
func (l *Layers) Config() model.Config { return l.m.Config() }

// Shape returns layer i's widths.
func (l *Layers) Shape(i int) LayerShape {
	a, f := l.m.base().layers[i].blocks()
	return LayerShape{Heads: a.heads, KVHeads: a.kvHeads, HeadDim: a.headDim, FFN: f.gate.Rows}
}

// PerLayerInputs writes to out ([n, layers·PLEDim]) gemma4's per-layer
// inputs of the n rows x (the scaled embeddings, [n, hidden]), given emb,
// the tokens' rows of the per-layer embedding table already times its
// scale (gemma4.PLEScales's Emb), as the CPU backend computes them. It
// fails, writing nothing, for a model without per-layer inputs or rows
// of other widths.
func (l *Layers) PerLayerInputs(x []float32, n int, emb, out []float32) error {
	m := l.m.base()
	if m.ple == nil {
		return fmt.Errorf("cpu: %s: the model has no per-layer inputs", m.cfg.Arch)
	}
	w := n * m.widths.ple
	if len(x) < n*m.hidden || len(emb) < w || len(out) < w {
		return fmt.Errorf("cpu: per-layer inputs of %d rows: %d, %d and %d values for %d, %d and %d", n, len(x), len(emb), len(out), n*m.hidden, w, w)
	}
	var in Input
	m.ple.project(m.pool, &in, x[:n*m.hidden], m.hidden, out[:w], m.eps)
	m.ple.mix(out[:w], emb[:w])
	return nil
}

// Run runs layers first..end-1 on the n residual rows x ([n, hidden]),
// updating them, with perLayer the rows' per-layer inputs of every layer
// (gemma4; nil for a model without), and core the attention core.
func (l *Layers) Run(first, end int, x []float32, n int, perLayer []float32, core AttentionCore) {
	m := l.m.base()
	p := m.scratch.get()
	defer m.release(p)
	p.size(m, n)
	p.core = executorCore{core}
	copy(p.x, x[:n*m.hidden])
	copy(p.ple, perLayer)
	for li := first; li < end; li++ {
		m.layers[li].forward(p, li)
	}
	copy(x, p.x)
}

// executorCore is an executor's AttentionCore as a pass's core.
type executorCore struct{ c AttentionCore }

func (r executorCore) attend(li int, _ *attention, q, k, v, out []float32) {
	r.c.Attend(li, q, k, v, out)
}

// Logits applies the final norm to the rows x in place and writes their
// logits to z ([rows, vocab]), before any softcap.
func (l *Layers) Logits(x []float32, rows int, z []float32) {
	m := l.m.base()
	x = x[:rows*m.hidden]
	RMSNormRows(x, x, m.norm, m.hidden, m.eps)
	m.out.MatMul(m.pool, z, x)
}

// Close releases the checkpoint and ends the pool OpenLayers made.
func (l *Layers) Close() error { return l.m.base().Close() }
