package cpu

import (
	"context"
	"fmt"
	"slices"

	"anechat/engine/arch"
	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// Loader opens models on the CPU backend for engine/load: llama, gemma3,
// qwen2 and qwen3 GGUF files and gemma4 safetensors directories. It is the
// CPU backend's entry in a load.Registry.
type Loader struct{}

// Name implements load.Loader.
func (Loader) Name() string { return "cpu" }

// ggufArch reports whether the CPU runs GGUF files of general.architecture
// name.
func ggufArch(name string) bool {
	switch name {
	case "llama", gemma3.Name, qwen2.Name, qwen3.Name:
		return true
	}
	return false
}

// Supports implements load.Loader.
func (Loader) Supports(src load.Source) error {
	switch {
	case src.Format == load.GGUF && ggufArch(src.Arch):
		return nil
	case src.Format == load.Safetensors && (src.Arch == "gemma4" || src.Arch == "gemma4_text"):
		return nil
	case src.Format == load.GGUF:
		return fmt.Errorf("architecture %q is not supported (want llama, gemma3, qwen2 or qwen3)", src.Arch)
	case src.Format == load.Safetensors:
		return fmt.Errorf("model_type %q is not supported (want gemma4 or gemma4_text)", src.Arch)
	}
	return fmt.Errorf("%s models are not run on the CPU (want a .gguf file or a safetensors directory)", src.Format)
}

// Open implements load.Loader: it maps the weights, checks every tensor's
// presence and shape against the metadata, and reports src.Fingerprint as
// the model's identity.
func (l Loader) Open(ctx context.Context, src load.Source, opts load.Options) (model.Backend, error) {
	if err := l.Supports(src); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", src.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The model owns the pool: its Close ends the workers.
	pool := NewPool(opts.Threads)
	var m backend
	var err error
	if src.Format == load.GGUF {
		m, err = openGGUF(src.Path, pool, loadGGUF)
	} else {
		m, err = loaded(LoadGemma4(src.Path, pool))
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	m.base().ownPool = true
	m.base().SetFingerprint(src.Fingerprint)
	return m, nil
}

// backend is a model of this package: every one embeds the decoder.
type backend interface {
	model.Backend
	base() *decoder
}

func (m *decoder) base() *decoder { return m }

// loaded is m as a backend, nil when err is set.
func loaded[M backend](m M, err error) (backend, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadGGUF binds the weights of f by its general.architecture.
func loadGGUF(f *gguf.File, pool *Pool) (backend, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	switch name {
	case gemma3.Name:
		return loaded(LoadGemma3(f, pool))
	case qwen2.Name, qwen3.Name:
		return loaded(LoadQwen(f, pool))
	}
	return loaded(LoadLlama(f, pool))
}

// openGGUF opens the GGUF file at path and binds its weights with load;
// the model closes the file when it is closed.
func openGGUF[M interface{ base() *decoder }](path string, pool *Pool, load func(*gguf.File, *Pool) (M, error)) (M, error) {
	f, err := gguf.Open(path)
	if err != nil {
		var none M
		return none, err
	}
	m, err := load(f, pool)
	if err != nil {
		f.Close()
		return m, err
	}
	m.base().own(f)
	return m, nil
}

// bindGGUF binds, through b (on a GGUF file's weights), the weights of
// the GGUF decoder d: the model-wide ones every GGUF decoder has (the
// embedding, the final norm, the output projection or the embedding when
// tied), then each layer by bindLayer; it finishes m with KV geometry geo.
func (m *decoder) bindGGUF(b *binder, d arch.Decoder, geo kv.Geometry, pool *Pool, bindLayer func(b *binder, i int) layer) error {
	embd, out, norm := d.Globals()
	m.hidden, m.eps = d.Hidden, d.Eps
	m.embd, m.norm = b.embedding(embd, d.Tied), b.vec(norm)
	m.out = m.embd
	if !d.Tied {
		m.out = b.mat(out)
	}
	for i := range d.Layers {
		m.layers = append(m.layers, bindLayer(b, i))
	}
	if err := b.finish("blk.", d.Key("block_count"), d.Layers); err != nil {
		return err
	}
	cfg := model.Config{Arch: d.Arch, VocabSize: d.Vocab, Hidden: d.Hidden, ContextLen: d.Context, KV: geo,
		BOS: d.BOS, EOS: slices.Clone(d.EOS)}
	return m.finish(cfg, b.src, pool)
}
