package cpu

import (
	"context"
	"fmt"

	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/load"
	"anechat/engine/model"
)

// Loader opens models on the CPU backend for engine/load: llama, gemma3,
// qwen2 and qwen3 GGUF files and gemma4 safetensors directories. It is the CPU backend's entry in a
// load.Registry.
type Loader struct{}

// Name implements load.Backend.
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

// Supports implements load.Backend.
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

// Open implements load.Backend: it maps the weights, checks every tensor's
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
	switch src.Format {
	case load.GGUF:
		return openGGUF(src, pool)
	default:
		m, err := LoadGemma4(src.Path, pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		m.ownPool = true
		m.SetFingerprint(src.Fingerprint)
		return m, nil
	}
}

// openGGUF opens the GGUF file of src on pool, which the model then owns
// (closed on failure).
func openGGUF(src load.Source, pool *Pool) (model.Backend, error) {
	var m interface {
		model.Backend
		SetFingerprint(string)
	}
	var err error
	switch src.Arch {
	case gemma3.Name:
		var g *Gemma3
		if g, err = OpenGemma3(src.Path, pool); err == nil {
			g.ownPool, m = true, g
		}
	case qwen2.Name, qwen3.Name:
		var q *Qwen
		if q, err = OpenQwen(src.Path, pool); err == nil {
			q.ownPool, m = true, q
		}
	default:
		var l *Llama
		if l, err = OpenLlama(src.Path, pool); err == nil {
			l.ownPool, m = true, l
		}
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	m.SetFingerprint(src.Fingerprint)
	return m, nil
}
