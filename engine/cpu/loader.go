package cpu

import (
	"context"
	"fmt"

	"anechat/engine/load"
	"anechat/engine/model"
)

// Loader opens models on the CPU backend for engine/load: llama GGUF files
// and gemma4 safetensors directories. It is the CPU backend's entry in a
// load.Registry.
type Loader struct{}

// Name implements load.Backend.
func (Loader) Name() string { return "cpu" }

// Supports implements load.Backend.
func (Loader) Supports(src load.Source) error {
	switch {
	case src.Format == load.GGUF && src.Arch == "llama":
		return nil
	case src.Format == load.Safetensors && (src.Arch == "gemma4" || src.Arch == "gemma4_text"):
		return nil
	case src.Format == load.GGUF:
		return fmt.Errorf("architecture %q is not supported (want llama)", src.Arch)
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
		m, err := OpenLlama(src.Path, pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		m.ownPool = true
		m.SetFingerprint(src.Fingerprint)
		return m, nil
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
